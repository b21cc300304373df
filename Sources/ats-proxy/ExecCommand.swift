import ATSProxyCore
import ATSProxyIO
import ATSReport
import ATSSystemTools
import ArgumentParser
import Foundation
import Synchronization

/// `ats-proxy exec [options] -- COMMAND ARGS…`: runs a command (a test suite, a script) with its
/// HTTP and HTTPS traffic going through a private ats-proxy on a free loopback port, then exits
/// with the command's status, 3 when the command passed but ATS violations were seen, 4 when the
/// command's client refused the proxy's certificate (the CA is not trusted where it looks), or 5 when it
/// accepted a forged server of `--challenge`.
struct ExecCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run a command through ats-proxy and fail it on ATS violations.",
        discussion: """
            The proxy listens on a free port of 127.0.0.1. The command gets these variables:
              HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (and lower-case forms)
                  http://127.0.0.1:PORT
              NO_PROXY, no_proxy
                  removed
              SSL_CERT_FILE, CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE,
              NODE_EXTRA_CA_CERTS, ATS_PROXY_CA_BUNDLE
                  a PEM bundle: the system roots and the proxy CA
              ATS_PROXY_URL
                  http://127.0.0.1:PORT
              ATS_PROXY_CA_CERT
                  the proxy CA certificate (PEM)
              ATS_PROXY_TRUST_OVERLAY
                  active, unavailable or off (below)
            ATS_PROXY_URL and ATS_PROXY_CA_CERT are what the ATSProxyTesting library reads.

            On Linux some clients read only the system bundle (URLSession's libcurl, OpenSSL's defaults). \
            With --trust-overlay auto (the default) the command runs in a private mount namespace in which \
            the system bundle path (or each --trust-overlay-path) shows the bundle above; nothing on the \
            machine changes. That needs root \
            or unprivileged user namespaces; when neither is there, exec says what to run instead.

            Exit status: the command's; 3 if it succeeded but ATS violations were seen (unless \
            --allow-violations; with --baseline, only violations the baseline does not list count); 4 if the client refused the proxy's certificate (it does not trust the proxy \
            CA: a set-up failure, not an ATS verdict); 5 if the client accepted a forged server of --challenge \
            (its own trust evaluation is off; 4 wins over 5, 5 over 3); 127 if the command cannot be started; \
            2 for bad options.

            When GITHUB_STEP_SUMMARY is set (GitHub Actions), a Markdown summary (violations, fixes, the \
            minimal Info.plist dictionary) is appended to that file.

            Example: ats-proxy exec --config Info.plist -- swift test
            """)

    /// Whether to show the bundle at the system bundle path (Linux).
    enum TrustOverlayMode: String, ExpressibleByArgument, CaseIterable {
        /// When the process may (root or user namespaces); otherwise a note with what to run instead.
        case auto
        /// Fail (status 2) when it cannot be done.
        case require
        /// Never.
        case off
    }

    @OptionGroup var options: ProxyOptions

    @Flag(name: .long, help: "Keep the command's exit status even when ATS violations were seen.")
    var allowViolations = false

    @Option(
        name: .long,
        help: "Linux: show the proxy CA in the system bundle to the command: auto, require or off (see below).")
    var trustOverlay: TrustOverlayMode = .auto

    @Option(
        name: .long,
        help: "Linux: a CA bundle path to show the proxy CA at (repeatable; default: the distribution's system bundle)."
    )
    var trustOverlayPath: [String] = []

    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).")
    var command: [String] = []

    /// Exit status when the client refused the proxy's certificate.
    static let clientUntrustedStatus: Int32 = 4
    /// Exit status when the client accepted a forged server of `--challenge` (its trust evaluation is off).
    static let challengeFindingStatus: Int32 = 5

    mutating func validate() throws {
        // Everything after `exec` is captured for the command, so help must be caught here.
        if let first = command.first, ["--help", "-h"].contains(first) { throw CleanExit.helpRequest(self) }
        // The capture starts at the first word exec does not know: before `--` that is a misspelt option, never
        // the command (which would then fail as "command not found", or run with the option as its name).
        if let first = command.first, first != "--", first.hasPrefix("-") {
            throw ValidationError(UnknownOptionCheck.unknownOptionMessage(first, command: Self.self))
        }
        if command.first == "--" { command.removeFirst() }
        guard !command.isEmpty else {
            throw ValidationError("give a command after --, e.g. ats-proxy exec -- curl https://example.com/")
        }
    }

    func run() throws {
        var command = self.command
        if command.first == "--" { command.removeFirst() }
        guard let executable = Self.resolve(command[0]) else {
            FileHandle.standardError.write(
                Data("ats-proxy: error: cannot start '\(command[0])': command not found\n".utf8))
            throw ExitCode(127)
        }
        let untrusted = FirstUntrustedRecord()
        let stepSummaryPath = Self.stepSummaryPath(ProcessInfo.processInfo.environment)
        let launched: LaunchedProxy
        let bundle: String
        do {
            launched = try options.launch(
                listenOverride: ["127.0.0.1:0"], observer: { untrusted.offer($0) }, needsReport: stepSummaryPath != nil)
            bundle = try Self.writeBundle(caPath: launched.caPath)
        } catch {
            exitWithError(error)
        }
        let proxyURL = "http://\(launched.bound[0])"
        let overlay = prepareOverlay(bundle: bundle)
        var environment = ProcessInfo.processInfo.environment
        for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"] {
            environment[key] = proxyURL
        }
        for key in ["NO_PROXY", "no_proxy"] { environment.removeValue(forKey: key) }
        for key in [
            "SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "ATS_PROXY_CA_BUNDLE",
        ] {
            environment[key] = bundle
        }
        // The ATSProxyTesting library reads it. (As a setting, the same name means --ca-cert: an ats-proxy the
        // command starts would find this proxy's certificate there, with --ca-key still its own to give.)
        environment["ATS_PROXY_CA_CERT"] = launched.caPath
        environment["ATS_PROXY_URL"] = proxyURL
        environment["ATS_PROXY_TRUST_OVERLAY"] = overlay.state

        let launch = overlay.launcher.map { ($0[0], Array($0.dropFirst()) + ["--", executable] + command.dropFirst()) }
        let process: ChildProcess
        do {
            process = try ChildProcess(
                executable: launch?.0 ?? executable, arguments: launch?.1 ?? Array(command.dropFirst()),
                environment: environment, standardInput: .inherit)
        } catch let error as ChildProcess.SpawnError {
            FileHandle.standardError.write(
                Data("ats-proxy: error: cannot start '\(command[0])': \(String(cString: strerror(error.code)))\n".utf8))
            throw ExitCode(127)
        }
        let watcher = SignalWatcher()
        let pid = process.processIdentifier
        for signalNumber in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
            watcher.watch(signalNumber) { kill(pid, signalNumber) }
        }
        process.waitUntilExit()
        watcher.cancelAll()

        launched.server.stopAccepting()
        let deadline = Date().addingTimeInterval(2)
        while launched.server.liveConnections > 0 && Date() < deadline { usleep(20_000) }
        // Whatever is still open is cut and recorded (one record per exchange), as `run` does at its stop.
        launched.server.closeRemaining()
        launched.log.flush()
        launched.writeReport()
        try? FileManager.default.removeItem(atPath: bundle)

        let status = process.waitUntilExit().shellStatus
        let outcome = ExecOutcome(
            stats: launched.stats.snapshot, commandStatus: status, allowViolations: allowViolations,
            firstUntrusted: untrusted.record, overlayState: overlay.state, baseline: launched.baselineComparison)
        FileHandle.standardError.write(Data(outcome.lines.map { $0 + "\n" }.joined().utf8))
        if let stepSummaryPath { appendStepSummary(launched, outcome: outcome, to: stepSummaryPath) }
        throw ExitCode(outcome.status)
    }

    /// The variable GitHub Actions sets to the file a step appends its Markdown summary to.
    static let stepSummaryVariable = "GITHUB_STEP_SUMMARY"

    /// `$GITHUB_STEP_SUMMARY` when set and not empty.
    static func stepSummaryPath(_ environment: [String: String]) -> String? {
        guard let path = environment[stepSummaryVariable], !path.isEmpty else { return nil }
        return path
    }

    /// Appends the session's Markdown summary (violations, fixes, minimal dictionary) to `path`; a failure is
    /// printed, never fatal (the exit status stays the command's verdict).
    func appendStepSummary(_ launched: LaunchedProxy, outcome: ExecOutcome, to path: String) {
        guard let report = launched.report else { return }
        report.setIgnored(launched.services.settings.hostFilter.ignored)
        let markdown = StepSummaryWriter.markdown(
            report.document(), exitStatus: outcome.status, baseline: outcome.baseline)
        do {
            try StepSummaryWriter.append(markdown, to: path)
        } catch {
            FileHandle.standardError.write(
                Data("ats-proxy: error: cannot append the step summary to \(path): \(error)\n".utf8))
        }
    }

    /// How the command is started: through `trust-overlay-exec` when the overlay can be set up, else
    /// directly; `state` is the value of ATS_PROXY_TRUST_OVERLAY. Prints a note (or fails, with
    /// `--trust-overlay require`) when the overlay is wanted but not possible.
    func prepareOverlay(bundle: String) -> (launcher: [String]?, state: String) {
        #if os(Linux)
            guard trustOverlay != .off else { return (nil, "off") }
            let targets = trustOverlayPath.isEmpty ? TrustOverlay.systemBundlePaths() : trustOverlayPath
            guard !targets.isEmpty, let me = Self.ownExecutable() else { return (nil, "unavailable") }
            let launcher = [me, "trust-overlay-exec", "--bundle", bundle] + targets.flatMap { ["--target", $0] }
            let probe = Self.probe(launcher)
            if probe.ok { return (launcher, "active") }
            let caArgument = options.ca.caDir.map { " --ca-dir \($0)" } ?? ""
            var lines = [
                "ats-proxy: note: cannot show the proxy CA at \(targets.joined(separator: ", ")) to the command (\(probe.reason)); clients that read only the system bundle (URLSession on Linux) will refuse the proxy's certificate. Instead:"
            ]
            lines += TrustOverlay.alternatives(caDirectoryArgument: caArgument, root: geteuid() == 0).map { "  \($0)" }
            FileHandle.standardError.write(Data((lines.joined(separator: "\n") + "\n").utf8))
            if trustOverlay == .require {
                try? FileManager.default.removeItem(atPath: bundle)
                exitWithError(CLIError.configuration("--trust-overlay require: the overlay cannot be set up"))
            }
            return (nil, "unavailable")
        #else
            return (nil, "off")
        #endif
    }

    /// Runs the launcher in probe mode: whether the namespace can be set up here, and why not.
    static func probe(_ launcher: [String]) -> (ok: Bool, reason: String) {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ats-proxy-probe-\(getpid())-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let process: ChildProcess
        do {
            process = try ChildProcess(
                executable: launcher[0], arguments: Array(launcher.dropFirst()) + ["--probe"],
                environment: ProcessInfo.processInfo.environment, standardOutput: .null,
                standardError: .file(scratch.path))
        } catch {
            return (false, "\(error)")
        }
        let status = process.waitUntilExit().shellStatus
        let text = FileManager.default.contents(atPath: scratch.path) ?? Data()
        let reason = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return (status == 0, reason.isEmpty ? "status \(status)" : reason)
    }

    /// This executable's path (`/proc/self/exe` on Linux), to start the overlay launcher.
    static func ownExecutable() -> String? {
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        if FileManager.default.isExecutableFile(atPath: path) { return path }
        return Bundle.main.executablePath
    }

    /// `name` as a path, or found in PATH; nil when it does not exist or is not executable.
    static func resolve(_ name: String) -> String? {
        let fileManager = FileManager.default
        if name.contains("/") { return fileManager.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if fileManager.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// A PEM bundle of the system roots plus the proxy CA, so other TLS keeps working.
    static func writeBundle(caPath: String) throws -> String {
        var bundle = Data()
        for system in ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"] {
            if let data = FileManager.default.contents(atPath: system) {
                bundle.append(data)
                break
            }
        }
        guard let ca = FileManager.default.contents(atPath: caPath) else {
            throw CLIError.configuration("\(caPath): cannot read the proxy CA")
        }
        bundle.append(Data("\n".utf8))
        bundle.append(ca)
        let path = NSTemporaryDirectory() + "ats-proxy-bundle-\(getpid()).pem"
        guard FileManager.default.createFile(atPath: path, contents: bundle, attributes: [.posixPermissions: 0o644])
        else {
            throw CLIError.configuration("\(path): cannot write the CA bundle")
        }
        return path
    }
}

/// The first request whose client refused the proxy's certificate, kept for exec's closing line.
final class FirstUntrustedRecord: Sendable {
    private let first = Mutex<RequestRecord?>(nil)

    /// Keeps `record` when it is the first client-trust failure.
    func offer(_ record: RequestRecord) {
        guard record.result == .clientUntrustedCA else { return }
        first.withLock { if $0 == nil { $0 = record } }
    }

    var record: RequestRecord? { first.withLock { $0 } }
}
