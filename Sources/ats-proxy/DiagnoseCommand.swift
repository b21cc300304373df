import ATSDiagnose
import ATSPolicy
import ATSProxyCore
import ATSProxyIO
import ATSTLS
import ArgumentParser
import Foundation

/// `ats-proxy diagnose URL`: the Linux equivalent of `nscurl --ats-diagnostics`, plus one reason
/// per FAIL and, with --config, the app policy's verdict and smallest change.
/// Exit status: 0 when the default ATS configuration passes, 1 otherwise, 2 on usage errors.
struct DiagnoseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diagnose", abstract: "Run nscurl-style ATS diagnostics against a server.",
        discussion: """
            Exit status: 0 when the default ATS configuration passes, 1 otherwise, 2 on usage errors.

            Examples:
              ats-proxy diagnose https://api.example.com/
              ats-proxy diagnose --resolve test.example:8443:127.0.0.1 \\
                --upstream-ca root.pem https://test.example:8443/
            """)

    @OptionGroup var policy: PolicyOptions

    @Flag(name: .long, help: "Print each ATS dictionary and the error of each failed load.")
    var verbose = false

    @Option(name: .long, help: "HOST:PORT:ADDR, as curl's --resolve (repeatable).")
    var resolve: [String] = []

    @Option(
        name: .long,
        help: "Extra trusted root for upstream servers, PEM or DER (repeatable); acts like a user-installed root.")
    var upstreamCa: [String] = []

    @Option(name: .long, help: "CT log list in OpenSSL's format (enables CT checks for system-rooted chains).")
    var ctLogList: String?

    @Option(name: .long, help: "Seconds allowed for each connection and handshake.")
    var timeout: Double = 10

    @Argument(help: "The https:// URL to test.")
    var url: String

    func validate() throws {
        try UnknownOptionCheck.check(Array(CommandLine.arguments.dropFirst()), against: Self.self)
        let target: RequestTarget
        do {
            target = try RequestTarget(parsing: url)
        } catch {
            throw ValidationError(error.description)
        }
        guard target.scheme == .https else { throw ValidationError("diagnose needs an https:// URL, got '\(url)'") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        var overrides = ResolverOverrides()
        for entry in resolve {
            do {
                try overrides.addResolve(entry)
            } catch {
                throw ValidationError("--resolve: \(error)")
            }
        }
    }

    func run() throws {
        let report: DiagnosticsReport
        do {
            let target = try RequestTarget(parsing: url)
            var overrides = ResolverOverrides()
            for entry in resolve { try overrides.addResolve(entry) }
            let options = try policy.evaluationOptions()
            let trust = try TrustStore(extraAnchorFiles: upstreamCa)
            let logs = try ctLogList.map { try CTLogStore(file: $0) } ?? CTLogStore(logs: CTLogStore.embeddedLogs)
            let checker = UpstreamChecker(client: UpstreamTLSClient(trust: trust, ctLogs: logs))
            var appPolicy: PolicyContext?
            if policy.config != nil {
                let loaded = try policy.loadSource()
                let snapshot = PolicyStore.Snapshot(loaded: loaded, parseOptions: policy.parseOptions, options: options)
                appPolicy = PolicyContext(configuration: snapshot.evaluator.configuration, options: options)
            }
            let transport = UpstreamProbeTransport(
                host: target.host, port: UInt16(target.port), overrides: overrides, timeout: timeout)
            let uuid = UUID()
            let diagnostics = ATSDiagnostics(
                checker: checker, options: options,
                contextFor: {
                    ConsoleContext(processName: "nscurl", pid: Int(getpid()), taskUUID: uuid, taskNumber: $0)
                })
            report = diagnostics.run(target, verbose: verbose, appPolicy: appPolicy, transport: transport)
        } catch {
            exitWithError(error)
        }
        FileHandle.standardOutput.write(Data(report.text.utf8))
        if !report.defaultPassed { throw ExitCode(1) }
    }
}
