import Foundation

/// The distribution's trust store on Linux: a CA file in the local anchor directory, then the tool that
/// rebuilds the system bundle (`update-ca-certificates` on Debian/Ubuntu/Alpine, `update-ca-trust` on
/// Fedora/RHEL). Changing it needs root; the error says so.
public struct LinuxTrustAnchors: Sendable {
    /// A directory for local anchors and the tool that folds them into the system bundle.
    public struct Layout: Sendable, Equatable {
        public var directory: String
        public var tool: String
        public var arguments: [String]

        public init(directory: String, tool: String, arguments: [String] = []) {
            self.directory = directory
            self.tool = tool
            self.arguments = arguments
        }

        /// Debian and its derivatives.
        public static let debian = Layout(directory: "/usr/local/share/ca-certificates", tool: "update-ca-certificates")
        /// Fedora, RHEL, CentOS.
        public static let fedora = Layout(
            directory: "/etc/pki/ca-trust/source/anchors", tool: "update-ca-trust", arguments: ["extract"])
    }

    /// The file name of the CA in the anchor directory (Debian takes only `.crt` files).
    public static let fileName = "ats-proxy-ca.crt"

    public let layout: Layout
    let environment: [String: String]

    public init(layout: Layout, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.layout = layout
        self.environment = environment
    }

    /// The layout whose tool is on PATH (Debian first); `directory` overrides the anchor directory.
    public static func detect(
        directory: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> LinuxTrustAnchors {
        for candidate in [Layout.debian, Layout.fedora]
        where ExternalTool(candidate.tool, environment: environment).locate() != nil {
            var layout = candidate
            if let directory { layout.directory = directory }
            return LinuxTrustAnchors(layout: layout, environment: environment)
        }
        throw ToolError(
            commandLine: "--system",
            problem:
                "neither update-ca-certificates (Debian, Ubuntu: apt-get install ca-certificates) nor update-ca-trust (Fedora, RHEL) is on PATH"
        )
    }

    var anchorPath: String { "\(layout.directory)/\(Self.fileName)" }

    /// Copies the CA PEM into the anchor directory and rebuilds the system bundle.
    public func install(_ certificatePath: String) throws -> [String] {
        guard let pem = FileManager.default.contents(atPath: certificatePath) else {
            throw ToolError(commandLine: certificatePath, problem: "cannot read the proxy CA")
        }
        try writeAnchor(pem)
        let output = try ExternalTool(layout.tool, environment: environment).check(layout.arguments)
        var lines = ["system trust store: \(anchorPath) written"]
        let summary = output.stdout.split(separator: "\n").last.map(String.init)
        lines.append("system trust store: \(layout.tool) ran" + (summary.map { " (\($0))" } ?? ""))
        return lines
    }

    /// Removes the CA from the anchor directory (when it is there) and rebuilds the system bundle.
    public func uninstall() throws -> [String] {
        var lines: [String] = []
        if FileManager.default.fileExists(atPath: anchorPath) {
            guard unlink(anchorPath) == 0 else { throw permissionError("cannot remove \(anchorPath)") }
            lines.append("system trust store: \(anchorPath) removed")
        } else {
            lines.append("system trust store: \(anchorPath) was not there")
        }
        try ExternalTool(layout.tool, environment: environment).check(layout.arguments)
        lines.append("system trust store: \(layout.tool) ran")
        return lines
    }

    private func writeAnchor(_ pem: Data) throws {
        do {
            try FileManager.default.createDirectory(atPath: layout.directory, withIntermediateDirectories: true)
        } catch {
            throw permissionError("cannot create \(layout.directory)")
        }
        let fd = open(anchorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw permissionError("cannot write \(anchorPath)") }
        defer { close(fd) }
        let written = pem.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == pem.count else { throw permissionError("cannot write \(anchorPath)") }
    }

    private func permissionError(_ what: String) -> ToolError {
        let reason = String(cString: strerror(errno))
        let hint = errno == EACCES || errno == EPERM || errno == EROFS ? " (run it with sudo)" : ""
        return ToolError(commandLine: "--system", problem: "\(what): \(reason)\(hint)")
    }
}
