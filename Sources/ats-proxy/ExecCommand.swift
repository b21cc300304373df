import ATSProxyCore
import ATSProxyIO
import ArgumentParser
import Foundation

/// `ats-proxy exec [options] -- COMMAND ARGS…`: runs a command (a test suite, a script) with its
/// HTTP and HTTPS traffic going through a private ats-proxy on a free loopback port, then exits
/// with the command's status, or 3 when the command passed but ATS violations were seen.
struct ExecCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run a command through ats-proxy and fail it on ATS violations.",
        discussion: """
            The command gets HTTP_PROXY/HTTPS_PROXY (and lower-case forms) pointing at the proxy, \
            NO_PROXY cleared, and SSL_CERT_FILE, CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE and \
            NODE_EXTRA_CA_CERTS naming a bundle of the system roots plus the proxy's CA.

            Exit status: the command's; 3 if it succeeded but ATS violations were seen (unless \
            --allow-violations); 127 if it cannot be started.

            Example: ats-proxy exec --config Info.plist -- swift test
            """)

    @OptionGroup var options: ProxyOptions

    @Flag(name: .long, help: "Keep the command's exit status even when ATS violations were seen.")
    var allowViolations = false

    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).")
    var command: [String] = []

    mutating func validate() throws {
        // Everything after `exec` is captured for the command, so help must be caught here.
        if let first = command.first, ["--help", "-h"].contains(first) { throw CleanExit.helpRequest(self) }
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
        let launched: LaunchedProxy
        let bundle: String
        do {
            launched = try options.launch(listenOverride: ["127.0.0.1:0"])
            bundle = try Self.writeBundle(caPath: launched.caPath)
        } catch {
            exitWithError(error)
        }
        let proxyURL = "http://\(launched.bound[0])"
        var environment = ProcessInfo.processInfo.environment
        for key in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"] {
            environment[key] = proxyURL
        }
        for key in ["NO_PROXY", "no_proxy"] { environment.removeValue(forKey: key) }
        for key in ["SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"] {
            environment[key] = bundle
        }
        // Not ATS_PROXY_CA_CERT: that variable sets --ca-cert for an ats-proxy the command might run.
        environment["ATS_PROXY_CA_CERTIFICATE"] = launched.caPath
        environment["ATS_PROXY_URL"] = proxyURL

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = Array(command.dropFirst())
        process.environment = environment
        do {
            try process.run()
        } catch {
            FileHandle.standardError.write(
                Data("ats-proxy: error: cannot start '\(command[0])': \(error.localizedDescription)\n".utf8))
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
        launched.log.flush()
        launched.writeReport()
        try? FileManager.default.removeItem(atPath: bundle)

        let stats = launched.stats.snapshot
        var status = process.terminationStatus
        if process.terminationReason == .uncaughtSignal { status = 128 + status }
        let summary = "ats-proxy: \(stats.requests) requests, \(stats.violations) ATS violations, \(stats.hosts) hosts"
        if status == 0 && stats.violations > 0 && !allowViolations {
            FileHandle.standardError.write(
                Data("\(summary); exiting 3 (use --allow-violations to keep the command's status)\n".utf8))
            throw ExitCode(3)
        }
        FileHandle.standardError.write(Data("\(summary)\n".utf8))
        throw ExitCode(status)
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
