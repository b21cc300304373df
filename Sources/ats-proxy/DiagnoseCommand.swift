import ATSAppTrust
import ATSDiagnose
import ATSPolicy
import ATSProxyCore
import ATSProxyIO
import ATSReport
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
            Exit status: 0 when the default ATS configuration passes, 1 otherwise, 2 on usage errors. With \
            --from-report, every https host whose TLS failed in the session is checked, and the status is 1 \
            when any of them fails.

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

    @Option(name: .long, help: "Check every https host whose TLS failed in this session report (report.json).")
    var fromReport: String?

    @Option(name: .long, help: "Output format: text or json.")
    var format: ExplainCommand.OutputFormat = .text

    @Argument(help: "The https:// URL to test (or --from-report).")
    var url: String?

    func validate() throws {
        try UnknownOptionCheck.check(against: Self.self)
        guard (url == nil) != (fromReport == nil) else {
            throw ValidationError("give either an https:// URL or --from-report report.json")
        }
        if let url {
            let target: RequestTarget
            do {
                target = try RequestTarget(parsing: url)
            } catch {
                throw ValidationError(error.description)
            }
            guard target.scheme == .https else {
                throw ValidationError("diagnose needs an https:// URL, got '\(url)'")
            }
        }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        guard !(tlsDiagnostics && profile == .systemServices) else {
            throw ValidationError("--tls-diagnostics and --profile system-services exclude each other")
        }
        if tlsDiagnostics || profile == .systemServices {
            guard fromReport == nil, format == .text else {
                throw ValidationError(
                    "--tls-diagnostics and --profile system-services take one URL and print text (not --from-report or --format json)"
                )
            }
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
        if tlsDiagnostics || profile == .systemServices {
            // One handshake's report (nscurl --tls-diagnostics, or the system-services profile); errors exit inside.
            let single = singleHandshake(url ?? "")
            FileHandle.standardOutput.write(Data(single.text.utf8))
            if !single.passed { throw ExitCode(1) }
            return
        }
        let urls: [String]
        do {
            urls = try fromReport.map { try Self.failedHTTPSURLs(VerifyCommand.loadReport($0)) } ?? [url ?? ""]
        } catch {
            exitWithError(error)
        }
        var reports: [(url: String, report: DiagnosticsReport, afText: String)] = []
        for url in urls {
            let (report, afText) = diagnose(url)
            reports.append((url, report, afText))
        }
        switch format {
        case .text:
            var text = ""
            for (url, report, afText) in reports {
                if fromReport != nil { text += "== \(url)\n" }
                text += report.text + afText
            }
            if fromReport != nil, reports.isEmpty { text = "no https host failed its TLS in \(fromReport ?? "")\n" }
            FileHandle.standardOutput.write(Data(text.utf8))
        case .json:
            let documents = reports.map { DiagnosisDocument(url: $0.url, report: $0.report) }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data = fromReport == nil ? try encoder.encode(documents[0]) : try encoder.encode(documents)
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        }
        if reports.contains(where: { !$0.report.defaultPassed }) { throw ExitCode(1) }
    }

    /// The distinct `https://host:port/` origins of a report's loads whose TLS failed (ATS, trust or handshake).
    static func failedHTTPSURLs(_ document: SessionReportDocument) -> [String] {
        var urls: [String] = []
        for host in document.hosts {
            for verdict in host.verdicts where SessionVerifier.isTLSFailure(verdict.code) {
                guard let target = try? RequestTarget(parsing: verdict.exampleURL), target.scheme == .https else {
                    continue
                }
                let origin =
                    "https://\(RequestTarget.uriHost(target.host))\(target.port == 443 ? "" : ":\(target.port)")/"
                if !urls.contains(origin) { urls.append(origin) }
            }
        }
        return urls
    }

    /// The pieces every diagnosis of `url` shares: target, options, trust, the TLS checker, the transport.
    private struct Prepared {
        var target: RequestTarget
        var options: EvaluationOptions
        var trust: TrustStore
        var checker: UpstreamChecker
        var transport: UpstreamProbeTransport
        /// The CT log list's banner line (where it came from, how old it is).
        var ctLine: String
    }

    /// Builds `Prepared` for `url` from the command's options; throws the errors `exitWithError` reports.
    private func prepare(_ url: String) throws -> Prepared {
        let target = try RequestTarget(parsing: url)
        var overrides = ResolverOverrides()
        for entry in resolve { try overrides.addResolve(entry) }
        let options = try policy.evaluationOptions()
        let trust = try TrustStore(extraAnchorFiles: upstreamCa)
        let ct = try CTLogSelection.resolve(explicitFile: ctLogList, ca: ca, maximumAgeDays: ctMaxAge)
        let checker = UpstreamChecker(
            client: UpstreamTLSClient(
                trust: trust, ctLogs: ct.store,
                groups: GroupOffer(wanted: KeyExchangeGroup.offered(on: options.platform))
            ))
        let transport = UpstreamProbeTransport(
            host: target.host, port: UInt16(target.port), overrides: overrides, timeout: timeout)
        return Prepared(
            target: target, options: options, trust: trust, checker: checker, transport: transport,
            ctLine: ct.bannerLine)
    }

    /// `--tls-diagnostics` or `--profile system-services`: one handshake's report and whether it passed.
    private func singleHandshake(_ url: String) -> (text: String, passed: Bool) {
        do {
            let prepared = try prepare(url)
            if tlsDiagnostics {
                return TLSDiagnostics(checker: prepared.checker, options: prepared.options).run(
                    prepared.target, transport: prepared.transport)
            }
            return try SystemServicesDiagnostics(checker: prepared.checker, profile: policy.systemServicesProfile())
                .run(
                    prepared.target, transport: prepared.transport)
        } catch {
            exitWithError(error)
        }
    }

    /// nscurl's diagnostics for `url` and the text after them (the CT list line, the `--af-policy` section).
    func diagnose(_ url: String) -> (DiagnosticsReport, String) {
        let report: DiagnosticsReport
        let afText: String
        let ctLine: String
        do {
            let prepared = try prepare(url)
            ctLine = prepared.ctLine
            var appPolicy: PolicyContext?
            if policy.config != nil {
                let loaded = try policy.loadSource()
                let snapshot = PolicyStore.Snapshot(
                    loaded: loaded, parseOptions: policy.parseOptions, options: prepared.options)
                appPolicy = PolicyContext(configuration: snapshot.evaluator.configuration, options: prepared.options)
            }
            let uuid = UUID()
            let diagnostics = ATSDiagnostics(
                checker: prepared.checker, options: prepared.options,
                contextFor: {
                    ConsoleContext(processName: "nscurl", pid: Int(getpid()), taskUUID: uuid, taskNumber: $0)
                })
            report = diagnostics.run(
                prepared.target, verbose: verbose, appPolicy: appPolicy, transport: prepared.transport)
            afText = try appPinningText(
                host: prepared.target.host, trust: prepared.trust, client: prepared.checker.client,
                transport: prepared.transport)
        } catch {
            exitWithError(error)
        }
        return (report, "\n" + ctLine + "\n" + afText)
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

/// `diagnose --format json`: one URL's diagnostics as data.
struct DiagnosisDocument: Encodable {
    /// One of nscurl's loads.
    struct Test: Encodable {
        var section: String
        var name: String
        /// `PASS` or `FAIL`.
        var result: String
        /// `-1200 [3:-9836]` for a failure.
        var code: String?
        /// Why it failed.
        var reason: String?
    }

    var url: String
    /// Whether the default ATS configuration passed.
    var defaultPassed: Bool
    var tests: [Test]

    init(url: String, report: DiagnosticsReport) {
        self.url = url
        defaultPassed = report.defaultPassed
        tests = report.results.map { row, verdict in
            Test(
                section: row.section, name: row.name, result: verdict.isBlocked ? "FAIL" : "PASS",
                code: verdict.isBlocked
                    ? verdict.error.map { "\($0.rawValue)" + (verdict.streamPair.map { " \($0)" } ?? "") } : nil,
                reason: verdict.isBlocked ? verdict.rule : nil)
        }
    }
}
