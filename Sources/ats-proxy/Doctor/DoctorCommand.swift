import ATSTLS
import ArgumentParser
import Foundation

/// `ats-proxy doctor`: checks what a first session runs into, explains each finding and prints its fix.
/// Exit status 0 when nothing is a problem (warnings allowed), 1 when something is, 2 on a usage error.
struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract:
            "Check the set-up (CA, trust, system proxy, port, settings, OpenSSL) and say how to fix each problem.",
        discussion: """
            Checks, without changing anything: the CA (there, key private, not expired or within 30 days of \
            expiry); where it is trusted (Linux system store; macOS keychain and each booted Simulator, through \
            security, xcrun and sqlite3 on PATH); a system proxy left behind by a crashed --system-proxy run; \
            whether the listen address is free; the settings file and ATS_PROXY_* variables; the cached CT log \
            list; OpenSSL's version and whether it offers the post-quantum group X25519MLKEM768. The CA \
            directory and listen address come from --ca-dir/--listen, else the settings a run would use.
            """)

    /// The checks, in the order they are printed.
    static let checks: [any DoctorCheck] = [
        CACheck(), LinuxSystemTrustCheck(), KeychainTrustCheck(), SimulatorTrustCheck(), SavedSystemProxyCheck(),
        ListenPortCheck(), SettingsCheck(), CTLogListCheck(), OpenSSLCheck(),
    ]

    @Option(name: .long, help: "Output format: text or json.")
    var format: ExplainCommand.OutputFormat = .text

    @Option(name: .long, help: "The CA directory to check (default: the one a run would use).")
    var caDir: String?

    @Option(name: .long, help: "An address the proxy will listen on, HOST:PORT (repeatable; default: a run's).")
    var listen: [String] = []

    @Option(
        name: .long, help: "The settings file to check (default: $ATS_PROXY_SETTINGS, else ./ats-proxy.json/.yaml).")
    var settings: String?

    @Option(name: .long, help: "Linux: the trust anchor directory to look in (default: the distribution's).")
    var anchorDir: String?

    func run() throws {
        let report = DoctorReport(findings: Self.checks.flatMap { $0.run(context()) })
        switch format {
        case .text: print(report.text)
        case .json: print(try report.json())
        }
        if !report.healthy { throw ExitCode(report.exitStatus) }
    }

    /// What the checks look at: the options, else what the settings a run would use say (when they load:
    /// ``SettingsCheck`` reports them when they do not), else the defaults.
    func context() -> DoctorContext {
        let environment = ProcessInfo.processInfo.environment
        let workingDirectory = FileManager.default.currentDirectoryPath
        let settingsArguments = settings.map { ["--settings", $0] } ?? []
        let resolved =
            (try? SettingsResolver(
                arguments: settingsArguments, environment: environment, workingDirectory: workingDirectory
            ).resolve(scopes: [.proxy, .ca]).settings) ?? []
        /// The values a run would get for `name` from the environment or the settings file.
        func configured(_ name: String) -> [String] {
            resolved.filter { $0.key.name == name }.flatMap(\.arguments).map {
                String($0.dropFirst("--\(name)=".count))
            }
        }
        let caDirectory =
            (caDir ?? configured("ca-dir").first).map {
                CertificateAuthority.resolveDirectory(
                    explicit: $0, environment: environment, workingDirectory: workingDirectory)
            } ?? CADirectoryLocator(environment: environment, workingDirectory: workingDirectory).userDirectory
        let configuredListen = configured("listen")
        return DoctorContext(
            environment: environment, workingDirectory: workingDirectory, caDirectory: caDirectory,
            listen: !listen.isEmpty ? listen : configuredListen.isEmpty ? ["127.0.0.1:8080"] : configuredListen,
            settingsArguments: settingsArguments, anchorDirectory: anchorDir, now: Date())
    }
}
