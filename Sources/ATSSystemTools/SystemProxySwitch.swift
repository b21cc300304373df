import Foundation

/// Points the system's HTTP and HTTPS proxy (every enabled network service, or the ones named) at a
/// running proxy, and puts the previous settings back. The previous settings are saved to a state file
/// before the first change; a state file this switch did not write is never overwritten (another instance
/// is running, or one crashed and `ats-proxy system-proxy restore` has not run yet).
///
/// Not thread-safe: the owner calls `engage` once and `restore` once (at exit).
public final class SystemProxySwitch {
    /// Where the switch is in its life.
    enum State {
        /// Nothing changed yet.
        case idle
        /// The system proxy points at the proxy; the previous settings are in the state file.
        case engaged(SavedSystemProxy)
        /// The previous settings were put back (or restoring was attempted and reported).
        case restored
    }

    let networkSetup: NetworkSetup
    let stateFile: SystemProxyStateFile
    private var state = State.idle

    public init(networkSetup: NetworkSetup, stateFile: SystemProxyStateFile) {
        self.networkSetup = networkSetup
        self.stateFile = stateFile
    }

    /// Whether the system proxy currently points at this process's proxy.
    public var isEngaged: Bool {
        switch state {
        case .engaged: true
        case .idle, .restored: false
        }
    }

    /// Saves the current HTTP/HTTPS proxy of `services` (nil: every enabled service) and points them at
    /// `host:port`. Returns the lines to print: what changed and how to undo it. On a failure part-way,
    /// what was changed is put back before the error is thrown.
    public func engage(host: String, port: Int, services requested: [String]?) throws -> [String] {
        switch state {
        case .idle: break
        case .engaged, .restored: preconditionFailure("SystemProxySwitch.engage in state \(state)")
        }
        if let existing = try stateFile.load() {
            throw ToolError(commandLine: "--system-proxy", problem: Self.refusal(existing, file: stateFile))
        }
        let services = try requested ?? networkSetup.enabledServices()
        var saved = SavedSystemProxy(
            ownerPID: getpid(), proxyHost: host, proxyPort: port, savedAt: Date(), services: [])
        for service in services {
            saved.services.append(
                SavedSystemProxy.Service(
                    name: service, web: try networkSetup.proxy(.web, of: service),
                    secureWeb: try networkSetup.proxy(.secureWeb, of: service)))
        }
        try stateFile.create(saved)
        var lines: [String] = []
        for service in saved.services {
            for kind in NetworkSetup.ProxyKind.allCases {
                do {
                    try networkSetup.setProxy(kind, of: service.name, host: host, port: port)
                } catch {
                    let undo = Self.restore(saved, networkSetup: networkSetup, stateFile: stateFile)
                    state = .restored
                    let detail =
                        undo.complete ? "the previous settings were put back" : undo.lines.joined(separator: "; ")
                    throw ToolError(commandLine: "--system-proxy", problem: "\(error) (\(detail))")
                }
                lines.append(
                    "system proxy: \(service.name) \(kind.label) proxy → \(host):\(port) (was \(service.setting(kind)))"
                )
            }
        }
        lines.append(
            "system proxy: restored at exit; after a crash run 'ats-proxy system-proxy restore' (saved in \(stateFile.path))"
        )
        state = .engaged(saved)
        return lines
    }

    /// Puts the saved settings back (once); returns the lines to print. Does nothing unless engaged.
    public func restore() -> [String] {
        switch state {
        case .idle, .restored: return []
        case .engaged(let saved):
            state = .restored
            return Self.restore(saved, networkSetup: networkSetup, stateFile: stateFile).lines
        }
    }

    /// The outcome of one restore: what was done, and whether everything was put back.
    public struct RestoreOutcome: Sendable, Equatable {
        public var lines: [String]
        /// True when every setting ats-proxy made was undone or had been changed by someone else since;
        /// the state file is then deleted. False keeps the file, so the restore can be run again.
        public var complete: Bool
    }

    /// Puts back every setting in `saved` that still points at the proxy ats-proxy set (a setting someone
    /// changed since is left alone and said so), then deletes the state file when nothing failed.
    public static func restore(
        _ saved: SavedSystemProxy, networkSetup: NetworkSetup, stateFile: SystemProxyStateFile
    ) -> RestoreOutcome {
        var lines: [String] = []
        var complete = true
        for service in saved.services {
            for kind in NetworkSetup.ProxyKind.allCases {
                let previous = service.setting(kind)
                do {
                    let current = try networkSetup.proxy(kind, of: service.name)
                    guard current.points(to: saved.proxyHost, port: saved.proxyPort) else {
                        lines.append(
                            "system proxy: \(service.name) \(kind.label) proxy left as it is (\(current)): changed since ats-proxy set it"
                        )
                        continue
                    }
                    try networkSetup.apply(previous, kind, of: service.name)
                    lines.append("system proxy: \(service.name) \(kind.label) proxy restored (\(previous))")
                } catch {
                    complete = false
                    lines.append("system proxy: error: \(service.name) \(kind.label) proxy not restored: \(error)")
                }
            }
        }
        if complete {
            stateFile.remove()
        } else {
            lines.append(
                "system proxy: the saved state is kept in \(stateFile.path); fix the error and run 'ats-proxy system-proxy restore'"
            )
        }
        return RestoreOutcome(lines: lines, complete: complete)
    }

    /// Why a saved state blocks a new change: another instance runs, or one ended without restoring.
    static func refusal(_ existing: SavedSystemProxy, file: SystemProxyStateFile) -> String {
        let formatter = ISO8601DateFormatter()
        let when = formatter.string(from: existing.savedAt)
        let target = "\(existing.proxyHost):\(existing.proxyPort)"
        if existing.ownerIsAlive && existing.ownerPID != getpid() {
            return
                "another ats-proxy (pid \(existing.ownerPID)) set the system proxy to \(target) at \(when); stop it first (it restores the settings at exit); saved state: \(file.path)"
        }
        return
            "an ats-proxy (pid \(existing.ownerPID)) set the system proxy to \(target) at \(when) and ended without restoring it; run 'ats-proxy system-proxy restore' first (saved state: \(file.path))"
    }
}
