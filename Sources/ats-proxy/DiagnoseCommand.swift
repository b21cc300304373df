import ATSAppTrust
import ATSDiagnose
import ATSPolicy
import ATSProxyCore
import ATSProxyIO
import ATSTLS
import ArgumentParser
import Foundation

/// Values of `--profile` for `diagnose` and `explain`.
enum DiagnosticsProfile: String, ExpressibleByArgument, CaseIterable {
    /// The app's ATS (the default).
    case app
    /// What iOS/macOS 27 system processes require (Apple support article 126655).
    case systemServices = "system-services"
}

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
              ats-proxy diagnose --af-policy 'api\\.example\\.com=public-key,pins=pins/' \\
                https://api.example.com/

            --af-policy HOST_PATTERN=MODE[,pins=DIR][,allow-invalid][,no-domain-check] (repeatable) \
            describes the app's AFNetworking AFSecurityPolicy for the hosts whose whole name matches \
            HOST_PATTERN (MODE: none, public-key or certificate; DIR: the .cer files the app bundles). \
            The first matching policy is evaluated as AFNetworking does against the server's real chain \
            and against the chain the proxy's CA mints for the host (the CA of --ca-dir/--ca-cert, or a \
            throwaway one when none exists yet); the verdicts do not change the exit status.
            """)

    @OptionGroup var policy: PolicyOptions

    @Flag(name: .long, help: "Print each ATS dictionary and the error of each failed load.")
    var verbose = false

    @Flag(
        name: .long,
        help:
            "Instead of the ATS rows: one handshake, then the negotiated version, key-exchange group and cipher suite, as nscurl --tls-diagnostics prints them."
    )
    var tlsDiagnostics = false

    @Option(
        name: .long,
        help:
            "app (the ATS rows, default) or system-services (what iOS/macOS 27 system processes require: MDM, enrolment, app and profile installation, software update)."
    )
    var profile: DiagnosticsProfile = .app

    @Option(name: .long, help: "HOST:PORT:ADDR, as curl's --resolve (repeatable).")
    var resolve: [String] = []

    @Option(
        name: .long,
        help: "Extra trusted root for upstream servers, PEM or DER (repeatable); acts like a user-installed root.")
    var upstreamCa: [String] = []

    @Option(
        name: .long,
        help:
            "CT log list, Apple's JSON or OpenSSL's format, for system-rooted chains (default: the list 'ats-proxy ct update' cached)."
    )
    var ctLogList: String?

    @Option(name: .long, help: "Days after which the cached CT log list counts as none (CT is then not evaluated).")
    var ctMaxAge: Int = CTLogListCache.defaultMaximumAgeDays

    @Option(name: .long, help: "Seconds allowed for each connection and handshake.")
    var timeout: Double = 10

    @Option(
        name: .customLong("af-policy"),
        help: "The app's AFSecurityPolicy: HOST_PATTERN=MODE[,pins=DIR][,allow-invalid][,no-domain-check] (repeatable)."
    )
    var afPolicy: [String] = []

    @OptionGroup var ca: CAOptions

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
        guard !(tlsDiagnostics && profile == .systemServices) else {
            throw ValidationError("--tls-diagnostics and --profile system-services exclude each other")
        }
        for spec in afPolicy {
            do {
                _ = try AFPolicySpec(parsing: spec)
            } catch {
                throw ValidationError("\(error)")
            }
        }
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
        var single: (text: String, passed: Bool)?
        // Errors exit inside (status 2); only ExitCode(1) for a failed default row comes out.
        try runATSRows(single: &single)
        guard let single else { return }
        FileHandle.standardOutput.write(Data(single.text.utf8))
        if !single.passed { throw ExitCode(1) }
    }

    /// The nscurl rows (and `--af-policy`), or with `--tls-diagnostics` / `--profile system-services` the one
    /// handshake's report in `single` (printed by `run`).
    private func runATSRows(single: inout (text: String, passed: Bool)?) throws {
        let report: DiagnosticsReport
        let afText: String
        var ctLine = ""
        do {
            let target = try RequestTarget(parsing: url)
            var overrides = ResolverOverrides()
            for entry in resolve { try overrides.addResolve(entry) }
            let options = try policy.evaluationOptions()
            let trust = try TrustStore(extraAnchorFiles: upstreamCa)
            let ct = try CTLogSelection.resolve(explicitFile: ctLogList, ca: ca, maximumAgeDays: ctMaxAge)
            ctLine = ct.bannerLine
            let checker = UpstreamChecker(
                client: UpstreamTLSClient(
                    trust: trust, ctLogs: ct.store,
                    groups: GroupOffer(wanted: KeyExchangeGroup.offered(on: options.platform))
                ))
            var appPolicy: PolicyContext?
            if policy.config != nil {
                let loaded = try policy.loadSource()
                let snapshot = PolicyStore.Snapshot(loaded: loaded, parseOptions: policy.parseOptions, options: options)
                appPolicy = PolicyContext(configuration: snapshot.evaluator.configuration, options: options)
            }
            let transport = UpstreamProbeTransport(
                host: target.host, port: UInt16(target.port), overrides: overrides, timeout: timeout)
            if tlsDiagnostics || profile == .systemServices {
                single =
                    tlsDiagnostics
                    ? TLSDiagnostics(checker: checker, options: options).run(target, transport: transport)
                    : SystemServicesDiagnostics(checker: checker, profile: try policy.systemServicesProfile()).run(
                        target, transport: transport)
                return
            }
            let uuid = UUID()
            let diagnostics = ATSDiagnostics(
                checker: checker, options: options,
                contextFor: {
                    ConsoleContext(processName: "nscurl", pid: Int(getpid()), taskUUID: uuid, taskNumber: $0)
                })
            report = diagnostics.run(target, verbose: verbose, appPolicy: appPolicy, transport: transport)
            afText = try appPinningText(host: target.host, trust: trust, client: checker.client, transport: transport)
        } catch {
            exitWithError(error)
        }
        FileHandle.standardOutput.write(Data((report.text + "\n" + ctLine + "\n" + afText).utf8))
        if !report.defaultPassed { throw ExitCode(1) }
    }

    /// The `--af-policy` section: the first policy matching `host`, judged on the real chain (fetched over
    /// `transport`) and on the chain the proxy's CA mints for `host`. Empty without `--af-policy`.
    private func appPinningText(
        host: String, trust: TrustStore, client: UpstreamTLSClient, transport: any HandshakeTransport
    ) throws -> String {
        guard !afPolicy.isEmpty else { return "" }
        let specs = try afPolicy.map { try AFPolicySpec(parsing: $0) }
        guard let spec = AFPolicySpec.first(specs, matching: host) else {
            return "\n" + AFPolicyReport.policyLines(nil, host: host).joined(separator: "\n") + "\n"
        }
        let now = Date()
        let real = AFChainFetcher.presentedChain(host: host, client: client, transport: transport).map { chain in
            AFTrustEvaluator(systemTrust: trust).evaluate(spec.policy, chain: chain, domain: host, at: now)
        }
        var note: String?
        let authority: CertificateAuthority
        do {
            authority = try ca.loadExisting()
        } catch let error as CertificateAuthorityError
            where ca.caCert == nil && !FileManager.default.fileExists(atPath: error.path)
        {
            authority = try CertificateAuthority.generate(keyType: ca.caKeyType, now: now)
            note =
                "(no proxy CA at \(error.path) yet: the interception chain is minted by a throwaway CA of the same shape)"
        }
        let interception: Result<AFVerdict, AFChainUnavailable>
        do {
            let chain = try AFInterceptionChain.mint(host: host, authority: authority, now: now)
            let deviceTrust = try AFInterceptionChain.deviceTrust(extraAnchorFiles: upstreamCa, authority: authority)
            interception = .success(
                AFTrustEvaluator(systemTrust: deviceTrust).evaluate(spec.policy, chain: chain, domain: host, at: now))
        } catch {
            interception = .failure(AFChainUnavailable("the proxy's CA could not mint a chain: \(error)"))
        }
        var lines = AFPolicyReport.verdictLines(spec, host: host, real: real, interception: interception)
        if let note { lines.append(note) }
        return "\n" + lines.joined(separator: "\n") + "\n"
    }
}
