import Foundation

/// The macOS `networksetup` tool, for the HTTP ("web") and HTTPS ("secure web") proxy of network services.
/// `networksetup` often exits 0 after printing `** Error: …`, so every answer is read for that too.
public struct NetworkSetup: Sendable {
    /// One of the two proxies a network service has that the Simulator and CFNetwork follow.
    public enum ProxyKind: String, Sendable, Codable, CaseIterable {
        /// The HTTP proxy (`-getwebproxy`).
        case web
        /// The HTTPS proxy (`-getsecurewebproxy`).
        case secureWeb

        /// `webproxy` or `securewebproxy`, the word in networksetup's flags.
        var flagWord: String {
            switch self {
            case .web: "webproxy"
            case .secureWeb: "securewebproxy"
            }
        }

        /// `HTTP` or `HTTPS`, for messages.
        public var label: String {
            switch self {
            case .web: "HTTP"
            case .secureWeb: "HTTPS"
            }
        }
    }

    /// One proxy setting of one network service, as `networksetup -get…proxy` prints it.
    public struct ProxySetting: Sendable, Codable, Equatable, CustomStringConvertible {
        public var enabled: Bool
        public var server: String
        public var port: Int

        public init(enabled: Bool, server: String, port: Int) {
            self.enabled = enabled
            self.server = server
            self.port = port
        }

        /// `on 127.0.0.1:8080`, `off`, or `off (127.0.0.1:8080 kept)`.
        public var description: String {
            let address = server.isEmpty ? nil : "\(server):\(port)"
            if enabled { return "on \(address ?? "(no server)")" }
            return address.map { "off (\($0) kept)" } ?? "off"
        }

        /// Whether this setting sends traffic to `server:port`.
        public func points(to host: String, port: Int) -> Bool { enabled && server == host && self.port == port }
    }

    let tool: ExternalTool

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        tool = ExternalTool("networksetup", environment: environment)
    }

    /// The enabled network services, in networksetup's order; throws when there is none.
    public func enabledServices() throws -> [String] {
        let arguments = ["-listallnetworkservices"]
        let output = try checked(arguments)
        let services = output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty && !$0.hasPrefix("*") && !$0.hasPrefix("An asterisk")
        }
        guard !services.isEmpty else {
            throw ToolError(commandLine: tool.commandLine(arguments), problem: "no enabled network service")
        }
        return services
    }

    /// The current `kind` proxy of `service`.
    public func proxy(_ kind: ProxyKind, of service: String) throws -> ProxySetting {
        let arguments = ["-get\(kind.flagWord)", service]
        let output = try checked(arguments)
        var fields: [String: String] = [:]
        for line in output.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].trimmingCharacters(in: .whitespaces)] =
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        guard let enabled = fields["Enabled"], let port = fields["Port"].flatMap({ Int($0) }) else {
            throw ToolError(
                commandLine: tool.commandLine(arguments),
                problem:
                    "unexpected answer (no Enabled/Port lines): \(output.trimmingCharacters(in: .whitespacesAndNewlines))"
            )
        }
        return ProxySetting(enabled: enabled == "Yes", server: fields["Server"] ?? "", port: port)
    }

    /// Points the `kind` proxy of `service` at `host:port` and turns it on.
    public func setProxy(_ kind: ProxyKind, of service: String, host: String, port: Int) throws {
        try checked(["-set\(kind.flagWord)", service, host, "\(port)"], interactive: true)
    }

    /// Turns the `kind` proxy of `service` on or off, keeping its server and port.
    public func setProxyState(_ kind: ProxyKind, of service: String, enabled: Bool) throws {
        try checked(["-set\(kind.flagWord)state", service, enabled ? "on" : "off"], interactive: true)
    }

    /// Puts `setting` back as the `kind` proxy of `service` (server and port when it had one, then its state).
    public func apply(_ setting: ProxySetting, _ kind: ProxyKind, of service: String) throws {
        if !setting.server.isEmpty {
            try setProxy(kind, of: service, host: setting.server, port: setting.port)
        }
        if !setting.enabled || setting.server.isEmpty {
            try setProxyState(kind, of: service, enabled: setting.enabled)
        }
    }

    /// Runs networksetup and returns its output, throwing on a non-zero status or an `Error` line. Changes
    /// run `interactive` (standard input connected), in case networksetup asks for a password.
    @discardableResult
    private func checked(_ arguments: [String], interactive: Bool = false) throws -> String {
        let output = try tool.run(arguments, interactive: interactive)
        let text = output.stdout + output.stderr
        let complaint = text.split(separator: "\n").first {
            $0.contains("Error") || $0.contains("is not a recognized network service")
                || $0.contains("requires admin") || $0.contains("must be run as root")
        }
        if output.status != 0 || complaint != nil {
            let message = complaint.map(String.init) ?? output.message
            throw ToolError(
                commandLine: tool.commandLine(arguments),
                problem: message.isEmpty ? "exit status \(output.status)" : message.trimmingCharacters(in: .whitespaces)
            )
        }
        return output.stdout
    }
}
