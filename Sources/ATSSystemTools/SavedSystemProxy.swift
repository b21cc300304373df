import Foundation

/// What the system proxy was before ats-proxy changed it, written before the first change so that a crash
/// can be undone (`ats-proxy system-proxy restore`), and what ats-proxy set, so that a setting changed by
/// someone else since is left alone.
public struct SavedSystemProxy: Sendable, Codable, Equatable {
    /// The previous HTTP and HTTPS proxies of one network service.
    public struct Service: Sendable, Codable, Equatable {
        public var name: String
        public var web: NetworkSetup.ProxySetting
        public var secureWeb: NetworkSetup.ProxySetting

        public init(name: String, web: NetworkSetup.ProxySetting, secureWeb: NetworkSetup.ProxySetting) {
            self.name = name
            self.web = web
            self.secureWeb = secureWeb
        }

        /// The previous setting of `kind`.
        public func setting(_ kind: NetworkSetup.ProxyKind) -> NetworkSetup.ProxySetting {
            switch kind {
            case .web: web
            case .secureWeb: secureWeb
            }
        }
    }

    /// The process that made the change.
    public var ownerPID: Int32
    /// The proxy address it set on every service.
    public var proxyHost: String
    public var proxyPort: Int
    public var savedAt: Date
    public var services: [Service]

    public init(ownerPID: Int32, proxyHost: String, proxyPort: Int, savedAt: Date, services: [Service]) {
        self.ownerPID = ownerPID
        self.proxyHost = proxyHost
        self.proxyPort = proxyPort
        self.savedAt = savedAt
        self.services = services
    }

    /// Whether the process that wrote this state still runs.
    public var ownerIsAlive: Bool { kill(ownerPID, 0) == 0 || errno == EPERM }
}

/// The file that holds a `SavedSystemProxy` between a change and its undo. Created exclusively, so of two
/// instances starting at once only one gets to change the system proxy.
public struct SystemProxyStateFile: Sendable {
    public let path: String

    public init(path: String) { self.path = path }

    /// `$ATS_PROXY_STATE_DIR/system-proxy.json`; else under `~/Library/Application Support/ats-proxy` on
    /// macOS and `$XDG_STATE_HOME/ats-proxy` (default `~/.local/state/ats-proxy`) elsewhere.
    public static func standard(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> SystemProxyStateFile
    {
        let home = environment["HOME"] ?? NSHomeDirectory()
        let directory: String
        if let explicit = environment["ATS_PROXY_STATE_DIR"], !explicit.isEmpty {
            directory = explicit
        } else {
            #if os(macOS)
                directory = "\(home)/Library/Application Support/ats-proxy"
            #else
                let state = environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(home)/.local/state"
                directory = "\(state)/ats-proxy"
            #endif
        }
        return SystemProxyStateFile(path: "\(directory)/system-proxy.json")
    }

    /// The saved state, or nil when there is none; throws when the file exists but cannot be read.
    public func load() throws -> SavedSystemProxy? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ToolError(commandLine: path, problem: "cannot read the saved system proxy state")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(SavedSystemProxy.self, from: data)
        } catch {
            throw ToolError(commandLine: path, problem: "not a saved system proxy state (\(error))")
        }
    }

    /// Writes `state` to a file that must not exist yet; throws when it does (another instance's state).
    public func create(_ state: SavedSystemProxy) throws {
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let data = try encoder.encode(state)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw ToolError(commandLine: path, problem: "cannot create the saved system proxy state: \(reason)")
        }
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count else {
            unlink(path)
            throw ToolError(commandLine: path, problem: "cannot write the saved system proxy state")
        }
    }

    /// Deletes the saved state (after a complete restore).
    public func remove() {
        unlink(path)
    }
}
