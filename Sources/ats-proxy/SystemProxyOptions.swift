import ATSProxyIO
import ATSSystemTools
import ArgumentParser
import Foundation

/// `--system-proxy` for `run` and `exec`: points the Mac's HTTP and HTTPS proxy (which CFNetwork, Mac apps
/// and the iOS Simulator follow) at the proxy once it listens, and restores the previous settings at exit.
struct SystemProxyOptions: ParsableArguments {
    @Flag(
        name: .long,
        help: ArgumentHelp(
            "macOS: set the HTTP and HTTPS proxy of the network services to this proxy while it runs.",
            discussion: """
                Uses networksetup on every enabled network service (or those given with --system-proxy-service); \
                the previous settings are saved first and restored at exit, on SIGINT/SIGTERM, or after a crash \
                with 'ats-proxy system-proxy restore'.
                """))
    var systemProxy = false

    @Option(
        name: .customLong("system-proxy-service"),
        help: "With --system-proxy: the network service to change (repeatable; default: every enabled one).")
    var systemProxyServices: [String] = []

    func validate() throws {
        if !systemProxyServices.isEmpty && !systemProxy {
            throw ValidationError("--system-proxy-service needs --system-proxy")
        }
    }

    /// With `--system-proxy`: points the system proxy at the first of `bound` and arranges the restore at
    /// exit. Prints what changed and how to undo it. Throws (changing nothing) when another instance's
    /// saved state is in the way or networksetup fails.
    func engage(bound: [SocketAddress]) throws {
        guard systemProxy, let first = bound.first else { return }
        // A wildcard listener is reachable on loopback; CFNetwork wants a host, not 0.0.0.0.
        let host: String
        if first.isWildcard {
            host = first.family == AF_INET6 ? "::1" : "127.0.0.1"
        } else {
            host = first.ip.description
        }
        let proxySwitch = SystemProxySwitch(networkSetup: NetworkSetup(), stateFile: .standard())
        let lines: [String]
        do {
            lines = try proxySwitch.engage(
                host: host, port: Int(first.port), services: systemProxyServices.isEmpty ? nil : systemProxyServices)
        } catch let error as ToolError where error.problem.contains("is not on PATH") {
            throw CLIError.configuration("--system-proxy needs macOS's networksetup: \(error)")
        }
        SystemProxyExitHook.install(proxySwitch)
        FileHandle.standardError.write(Data((lines.map { "ats-proxy: \($0)" }.joined(separator: "\n") + "\n").utf8))
    }
}

/// Restores the system proxy when the process exits normally (`exit`, which `run` calls after its graceful
/// shutdown and `exec` when its command ends). A crash skips it; the saved state remains for
/// `ats-proxy system-proxy restore`.
enum SystemProxyExitHook {
    /// The engaged switch; set once, read at exit.
    nonisolated(unsafe) private static var engaged: SystemProxySwitch?
    private static let lock = NSLock()

    /// Remembers `proxySwitch` and registers the exit handler.
    static func install(_ proxySwitch: SystemProxySwitch) {
        lock.lock()
        engaged = proxySwitch
        lock.unlock()
        atexit { SystemProxyExitHook.restoreNow() }
    }

    /// Puts the previous settings back (once) and prints what was done.
    static func restoreNow() {
        lock.lock()
        let proxySwitch = engaged
        engaged = nil
        lock.unlock()
        guard let proxySwitch else { return }
        let lines = proxySwitch.restore()
        guard !lines.isEmpty else { return }
        FileHandle.standardError.write(Data((lines.map { "ats-proxy: \($0)" }.joined(separator: "\n") + "\n").utf8))
    }
}
