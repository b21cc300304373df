import ATSAppTrust
import ATSDiagnose
import ATSPolicy
import ATSProxyCore
import ATSProxyIO
import ATSReport
import ATSTLS
import ATSWeb
import ArgumentParser
import Foundation

/// Every option of a running proxy, shared by `run` and `exec`, and the code that starts one.
struct ProxyOptions: ParsableArguments {
    @OptionGroup var policy: PolicyOptions

    @OptionGroup var ca: CAOptions

    @OptionGroup var systemProxyOptions: SystemProxyOptions

    @OptionGroup(title: "Watching a session") var observe: ObservationOptions

    @OptionGroup(title: "CI") var ci: CIOptions

    @Option(name: .long, help: "Address to listen on, HOST:PORT or [IPv6]:PORT (repeatable).")
    var listen: [String] = ["127.0.0.1:8080"]

    @Option(
        name: .customLong("allow-client"),
        help: "CIDR allowed to connect to a non-loopback listener (repeatable; default: private and link-local ranges)."
    )
    var allowClients: [String] = []

    @Flag(
        name: .long,
        help:
            "Let clients on other machines reach this machine's own services (localhost, loopback, its own addresses); refused by default."
    )
    var allowLocalTargets = false

    @Option(name: .long, help: "Connections beyond this get 503.")
    var maxConnections = 10_000

    @Option(name: .long, help: "enforce (block what ATS blocks) or report (log violations, let traffic through).")
    var mode: EnforcementMode = .enforce

    @Option(name: .long, help: "block (403 with -1022) or upgrade (fetch the https:// URL instead).")
    var cleartext: CleartextHandling = .block

    @Option(
        name: .long,
        help:
            "refuse or relay: what a CONNECT tunnel gets whose client speaks neither TLS nor HTTP inside (relayed raw only when ATS allows cleartext to the host; recorded either way)."
    )
    var tunnelUnknown: TunnelUnknownHandling = .refuse

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Require these credentials from every proxy client: Proxy-Authorization: Basic on HTTP (407 without them), username/password on SOCKS5. The onboarding site and /proxy.pac stay open. Prefer ATS_PROXY_PROXY_AUTH or the settings file: other users can read command lines.",
            valueName: "USER:PASSWORD"))
    var proxyAuth: String?

    @Option(name: .long, help: "Request source: auto (from User-Agent), urlsession, webkit or media.")
    var source: SourceOption = .auto

    @Option(name: .long, help: "Port the https:// twin is fetched from with --cleartext upgrade.")
    var upgradePort = 443

    @Option(name: .long, help: "Host tunnelled without interception (repeatable; leading dot = suffix).")
    var passthrough: [String] = []

    @Flag(name: .long, help: "Intercept NSPinnedDomains hosts too (default: tunnel them after a probe).")
    var interceptPinned = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Test the app's own trust evaluation: present deliberately unacceptable TLS on some connections to hosts matching HOST_PATTERN (a regular expression for the whole host) and record whether the client goes on (repeatable). A refused handshake is a pass; a request through it is a finding, answered 502 and never forwarded (exec, and run with --fail-on-violations, then exit 5). KINDS: wrong-host, self-signed, untrusted-ca, expired, not-yet-valid, sha1, rsa1024, no-san, overlong-validity, tls1.0, tls1.1, static-rsa, or all (default), certificates, handshakes.",
            valueName: "HOST_PATTERN[=KIND,…]"))
    var challenge: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "With --challenge: one new connection in N to a challenged host is challenged, the others get the normal leaf (1 = every connection).",
            valueName: "N"))
    var challengeEvery = ChallengeRotation.defaultEvery

    @Option(
        name: .customLong("af-policy"),
        help: ArgumentHelp(
            "The app's AFNetworking AFSecurityPolicy for matching hosts: every new upstream chain of such a host is judged as AFNetworking would judge it, and so is the chain the proxy presents instead (repeatable).",
            valueName: "HOST_PATTERN=MODE[,pins=DIR][,allow-invalid][,no-domain-check]"))
    var afPolicy: [String] = []

    @Option(
        name: .long,
        help:
            "Regular expression searched in host:port; matching traffic is tunnelled or forwarded untouched, not judged or counted (repeatable)."
    )
    var ignoreHosts: [String] = []

    @Option(
        name: .long,
        help: "Regular expression searched in host:port; only matching hosts are intercepted and judged (repeatable).")
    var allowHosts: [String] = []

    @Flag(
        name: .long,
        help:
            "Also ignore the background services of operating systems and browsers (Apple, Google, Mozilla, Microsoft)."
    )
    var ignoreBackground = false

    @Option(
        name: .long,
        help:
            "Regular expression searched in host:port; matching hosts (MDM, enrolment, app distribution, software update) are also judged by the iOS/macOS 27 system-services profile, apart from the app's verdict (repeatable)."
    )
    var systemServicesHosts: [String] = []

    @Option(
        name: .long,
        help:
            "Go out through this HTTP proxy: http://[user:pass@]host:port. Every upstream connection is a CONNECT tunnel through it; ATS judges the origin's TLS inside. Credentials may instead come from ATS_PROXY_UPSTREAM_PROXY_AUTH=user:pass."
    )
    var upstreamProxy: UpstreamProxy?

    @Option(
        name: .long,
        help: "HTTP/2 in ALPN: on (clients and origins, default), client, upstream or off (HTTP/1.1 only).")
    var http2: HTTP2Setting = .on

    @Option(name: .long, help: "CFNETWORK_DIAGNOSTICS level 0-3.")
    var diagnostics = 1

    @Option(name: .long, help: "Log format: text or json.")
    var logFormat: ProxyLogSink.Format = .text

    @Option(name: .long, help: "Append the log to this file instead of stderr.")
    var logFile: String?

    @Flag(name: .long, help: "Log Authorization, Cookie and Set-Cookie values (redacted by default).")
    var logSecrets = false

    @Option(name: .long, help: "Resolve HOST:PORT to ADDR (curl syntax, repeatable).")
    var resolve: [String] = []

    @Option(name: .long, help: "Extra /etc/hosts-format file for name resolution (repeatable).")
    var hostsFile: [String] = []

    @Option(name: .long, help: "Extra trust anchor PEM file for upstream servers (repeatable).")
    var upstreamCa: [String] = []

    @Option(
        name: .long,
        help:
            "Certificate Transparency log list (Apple's JSON or OpenSSL's format) for system-rooted chains (default: the list 'ats-proxy ct update' cached)."
    )
    var ctLogList: String?

    @Option(name: .long, help: "Days after which the cached CT log list counts as none (CT is then not evaluated).")
    var ctMaxAge: Int = CTLogListCache.defaultMaximumAgeDays

    @Option(name: .long, help: "Seconds to receive a request head.")
    var headerTimeout: Double = 30

    @Option(name: .long, help: "Seconds an idle keep-alive client connection is kept.")
    var idleTimeout: Double = 60

    @Option(name: .long, help: "Seconds an exchange may go without progress (stalled origin or request body).")
    var exchangeTimeout: Double = 60

    @Option(name: .long, help: "Seconds to connect upstream.")
    var connectTimeout: Double = 15

    @Option(name: .long, help: "Event loops (default: one per core).")
    var loops: Int?

    @Option(
        name: .customLong("event-loop"),
        help: ArgumentHelp(
            "Event loop backend: epoll (a poller thread per loop; kqueue on Darwin) or dispatch (Dispatch sources on a serial queue per loop).",
            discussion:
                "Default: \(EventLoopBackend.platformDefault). On Linux, dispatch spends about 1.6 times the CPU per proxied request that epoll does."
        ))
    var eventLoop: EventLoopBackend = .platformDefault

    @Option(name: .long, help: "Write report.json, report.html and junit.xml here at exit and on SIGUSR1.")
    var report: String?

    @Flag(
        name: .long,
        help:
            "Exit with status 3 at the end of a run that saw ATS violations (4: a client refused the proxy CA; 5: a client accepted a forged server of --challenge)."
    )
    var failOnViolations = false

    @Flag(name: .long, help: "No live status line on a terminal.")
    var quiet = false

    @Option(name: .long, help: "Seconds in-flight requests get to finish on SIGINT/SIGTERM.")
    var gracePeriod: Double = 10

    @Option(
        name: .long,
        help: "Seconds an idle upstream connection is kept for reuse by later clients (0: close at once).")
    var upstreamIdleTimeout: Double = 30

    func validate() throws {
        guard (0...3).contains(diagnostics) else { throw ValidationError("--diagnostics must be 0, 1, 2 or 3") }
        for text in listen where ListenAddress(parsing: text) == nil {
            throw ValidationError("--listen '\(text)' is not HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080)")
        }
        for value in [headerTimeout, idleTimeout, exchangeTimeout, connectTimeout, gracePeriod] where value <= 0 {
            throw ValidationError("timeouts must be positive")
        }
        guard upstreamIdleTimeout >= 0 else { throw ValidationError("--upstream-idle-timeout must not be negative") }
        _ = try makeHostFilter()
        _ = try makeSystemServices()
        _ = try makeChallengeRotation()
        _ = try makePinningPolicies()
    }

    /// The rotation of `--challenge` and `--challenge-every` (nil without `--challenge`; a bad `--challenge-every` is
    /// an error either way, so that a settings file's mistake shows before it is used).
    func makeChallengeRotation() throws -> ChallengeRotation? {
        do {
            let every = try ChallengeSpec.parseEvery(String(challengeEvery))
            guard !challenge.isEmpty else { return nil }
            return ChallengeRotation(specs: try challenge.map { try ChallengeSpec(parsing: $0) }, every: every)
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// The policies of `--af-policy`, with their pins loaded.
    func makePinningPolicies() throws -> [AFPolicySpec] {
        do {
            return try afPolicy.map { try AFPolicySpec(parsing: $0) }
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// What `--challenge` and `--af-policy` need while the proxy runs (nil when neither is given).
    func makeAppTrust(
        authority: CertificateAuthority, leaves: LeafCertificateCache, keyLog: TLSKeyLog?
    ) throws -> AppTrustServices? {
        let rotation = try makeChallengeRotation()
        let policies = try makePinningPolicies()
        guard rotation != nil || !policies.isEmpty else { return nil }
        // Challenged connections offer http/1.1 only: the request that makes a finding is read by the session
        // itself, whatever protocol the client prefers.
        let contexts = try rotation.map { _ in
            try ChallengeTLSContexts(
                certificates: try ChallengeCertificates(authority: authority),
                alpn: ServerTLSContext.preferring(["http/1.1"]), keyLog: keyLog)
        }
        return AppTrustServices(
            challenges: rotation, challengeContexts: contexts, pinningPolicies: policies,
            realTrust: try TrustStore(systemRoots: true, extraAnchorFiles: upstreamCa),
            interceptionTrust: try TrustStore(
                systemRoots: true, extraAnchorFiles: upstreamCa, extraAnchors: [authority.certificate]),
            leaves: leaves)
    }

    /// The host filter of `--ignore-hosts`, `--allow-hosts` and `--ignore-background`.
    func makeHostFilter() throws -> HostFilter {
        guard allowHosts.isEmpty || (ignoreHosts.isEmpty && !ignoreBackground) else {
            throw ValidationError("--ignore-hosts and --allow-hosts exclude each other (--ignore-background ignores)")
        }
        let allow = !allowHosts.isEmpty
        do {
            return allow
                ? try HostFilter(mode: .allow, patterns: allowHosts)
                : try HostFilter(
                    mode: .ignore, patterns: ignoreHosts + (ignoreBackground ? HostFilter.backgroundServices : []))
        } catch {
            throw ValidationError("\(allow ? "--allow-hosts" : "--ignore-hosts"): \(error)")
        }
    }

    /// `--system-services-hosts` with the profile of the emulated platform (nil without the option).
    func makeSystemServices() throws -> SystemServicesSetting? {
        guard !systemServicesHosts.isEmpty else { return nil }
        do {
            return SystemServicesSetting(
                hosts: try HostFilter(mode: .allow, patterns: systemServicesHosts),
                profile: try policy.systemServicesProfile())
        } catch let error as HostFilter.PatternError {
            throw ValidationError("--system-services-hosts: \(error)")
        }
    }

    /// Builds and starts a proxy; `listenOverride` replaces `--listen` (exec uses a free port). `needsReport`
    /// keeps a session report even without `--report` (exec's step summary reads it).
    func launch(
        listenOverride: [String]? = nil, observer: (@Sendable (RequestRecord) -> Void)? = nil,
        needsReport: Bool = false
    ) throws -> LaunchedProxy {
        IOSystem.ignoreSIGPIPE()
        if let report { try SessionReport.checkWritable(directory: report) }
        let loaded = try policy.loadSource()
        let snapshot = try makeSnapshot(loaded)
        let observation = try SessionObservation.make(observe, allowSecrets: logSecrets)
        let baseline = try ci.loadBaseline()
        let ledger = baseline.map { _ in ViolationLedger() }
        let sessionReport =
            report != nil || needsReport ? SessionReport(snapshot: snapshot, source: loaded) : nil
        let flows = observation?.store
        let metrics = observation?.metrics
        let stats = SessionStats()
        let observer: @Sendable (RequestRecord) -> Void = { record in
            stats.record(record)
            sessionReport?.record(record)
            flows?.record(record)
            metrics?.record(record)
            ledger?.record(record)
            observer?(record)
        }
        let log = try ProxyLogSink(
            format: logFormat, level: DiagnosticsLevel(rawValue: diagnostics) ?? .summary, allowSecrets: logSecrets,
            path: logFile, observer: observer)
        let (authority, caPath, caNote) = try loadAuthority()
        let leaves = try LeafCertificateCache(authority: authority)
        let clientH2 = http2.offersToClients
        let upstreamH2 = http2.offersToOrigins
        let serverTLS = try ServerTLSContext(
            leaves: leaves, alpn: ServerTLSContext.preferring(clientH2 ? ["h2", "http/1.1"] : ["http/1.1"]),
            keyLog: observation?.keyLog)
        let trust = try TrustStore(systemRoots: true, extraAnchorFiles: upstreamCa)
        let ct = try CTLogSelection.resolve(explicitFile: ctLogList, ca: ca, maximumAgeDays: ctMaxAge)
        let upstreamTLS = UpstreamTLSClient(
            trust: trust, ctLogs: ct.store, alpn: upstreamH2 ? ["h2", "http/1.1"] : ["http/1.1"],
            keyLog: observation?.keyLog,
            groups: GroupOffer(wanted: KeyExchangeGroup.offered(on: snapshot.evaluator.options.platform)))
        var settings = ProxySettings()
        settings.mode = mode
        settings.cleartext = cleartext
        settings.tunnelUnknown = tunnelUnknown
        if let proxyAuth {
            guard let credentials = ProxyCredentials(parsing: proxyAuth) else {
                throw CLIError.usage(
                    "--proxy-auth must be USER:PASSWORD (a non-empty user; each part at most 255 bytes)")
            }
            settings.proxyCredentials = credentials
        }
        settings.source = source.setting
        settings.passthroughHosts = passthrough
        settings.passthroughPinnedDomains = !interceptPinned
        settings.hostFilter = try makeHostFilter()
        settings.systemServices = try makeSystemServices()
        settings.processName = loaded.processName ?? "App"
        settings.headerTimeout = headerTimeout
        settings.idleTimeout = idleTimeout
        settings.exchangeTimeout = exchangeTimeout
        settings.connectTimeout = connectTimeout
        // Without a pool, an idle client's upstream handed back after the linger would just be closed: keep it.
        if Int(upstreamIdleTimeout * 1000) == 0 { settings.upstreamLinger = 0 }
        settings.upgradePort = upgradePort
        settings.detailedRecords = observe.keepsFlows
        settings.captureBodyLimit = observe.captureBodyLimit
        let addresses = (listenOverride ?? listen).compactMap(ListenAddress.init(parsing:))
        settings.selfAuthorities = AuthorityBook(Self.selfAuthorities(addresses))
        settings.localTargets = LocalTargetPolicy(
            allowsRemoteClients: allowLocalTargets,
            ownAddresses: Set(NetworkInterfaces.allAddresses() + addresses.map(\.address.ip)))
        var onboarding = try OnboardingSite(
            certificate: authority.certificate, proxyAddresses: Self.reachableAddresses(addresses),
            lanAddresses: NetworkInterfaces.lanIPv4Addresses().map(\.description))
        let webAutoConfig = WebAutoConfig(autoConfig: ProxyAutoConfig(filter: settings.hostFilter))
        var resolverOverrides = ResolverOverrides()
        for entry in resolve { try resolverOverrides.addResolve(entry) }
        for file in hostsFile { try resolverOverrides.addHostsFile(path: file) }
        if let observation {
            try observation.startWeb(
                report: sessionReport, makeReport: { SessionReport(snapshot: snapshot, source: loaded) },
                ignored: { [hostFilter = settings.hostFilter] in hostFilter.ignored },
                title: "\(loaded.summary) · \(snapshot.evaluator.options.platform) · \(mode)",
                caPEM: onboarding.caPEM, allowList: allowClients.isEmpty ? nil : ClientAllowList(parsing: allowClients),
                backend: eventLoop, autoConfig: webAutoConfig,
                recheck: Self.recheck(upstreamTLS, overrides: resolverOverrides, timeout: connectTimeout))
            onboarding.flowsURL = observation.webURL
        }
        let services = ProxyServices(
            policy: PolicyStore(snapshot), settings: settings, serverTLS: serverTLS, upstreamTLS: upstreamTLS,
            processID: Int(getpid()), onboarding: onboarding,
            appTrust: try makeAppTrust(authority: authority, leaves: leaves, keyLog: observation?.keyLog),
            // TLS to the proxy itself: the same leaves, HTTP/1.1 only, its keys in --keylog like the other legs.
            proxyTLS: try ServerTLSContext(
                leaves: leaves, alpn: ServerTLSContext.preferring(["http/1.1"]), keyLog: observation?.keyLog))
        var configuration = ProxyServer.Configuration(listen: addresses)
        configuration.maxConnections = maxConnections
        configuration.connectTimeout = .milliseconds(Int(connectTimeout * 1000))
        configuration.upstreamIdleTimeout = .milliseconds(Int(upstreamIdleTimeout * 1000))
        configuration.upstreamProxy = try upstreamProxyWithCredentials(ProcessInfo.processInfo.environment)
        if !allowClients.isEmpty {
            guard let list = ClientAllowList(parsing: allowClients) else {
                throw CLIError.usage("--allow-client needs CIDR blocks such as 192.168.0.0/16")
            }
            configuration.allowList = list
        }
        let group = EventLoopGroup(loopCount: loops ?? IOSystem.coreCount, backend: eventLoop)
        let server = ProxyServer(
            services: services, configuration: configuration, group: group,
            resolver: Resolver(overrides: resolverOverrides), log: log)
        let bound = try server.start()
        webAutoConfig.setListeners(bound)
        metrics?.setConnectionCount { server.liveConnections }
        try systemProxyOptions.engage(bound: bound)
        let boundAddresses = bound.map(ListenAddress.init)
        settings.selfAuthorities.insert(contentsOf: Self.selfAuthorities(boundAddresses))
        // A wildcard listener is also reachable at the machine's LAN addresses.
        settings.selfAuthorities.insert(contentsOf: Self.reachableAddresses(boundAddresses))
        return LaunchedProxy(
            server: server, services: services, log: log, bound: bound, caPath: caPath, caNote: caNote,
            authority: authority,
            loaded: loaded, snapshot: snapshot, stats: stats, report: sessionReport, reportDirectory: report,
            observation: observation, ctLine: ct.bannerLine, baseline: baseline, ledger: ledger)
    }

    /// The page's verify action's check of a TLS failure: the proxy's own upstream TLS client and name overrides,
    /// on a connection of its own (as `ats-proxy verify` checks).
    static func recheck(
        _ client: UpstreamTLSClient, overrides: ResolverOverrides, timeout: Double
    ) -> @Sendable (RequestTarget, PolicyContext) -> UpstreamVerdict {
        let checker = UpstreamChecker(client: client)
        return { target, policy in
            let transport = UpstreamProbeTransport(
                host: target.host, port: UInt16(target.port), overrides: overrides, timeout: timeout)
            return checker.check(target, policy: policy, transport: transport)
        }
    }

    /// The environment variable with `user:password` for an upstream proxy whose URL carries none.
    static let upstreamProxyAuthVariable = "ATS_PROXY_UPSTREAM_PROXY_AUTH"

    /// `--upstream-proxy` with credentials from `ATS_PROXY_UPSTREAM_PROXY_AUTH` when its URL has none
    /// (the URL's own win); nil without the option. A malformed variable is a usage error naming it.
    func upstreamProxyWithCredentials(_ environment: [String: String]) throws -> UpstreamProxy? {
        guard var proxy = upstreamProxy else { return nil }
        if proxy.credentials == nil, let text = environment[Self.upstreamProxyAuthVariable], !text.isEmpty {
            guard let credentials = UpstreamProxy.Credentials(colonSeparated: text) else {
                throw CLIError.usage("\(Self.upstreamProxyAuthVariable) must be user:password")
            }
            proxy.credentials = credentials
        }
        return proxy
    }

    func makeSnapshot(_ loaded: LoadedInfoPlist) throws -> PolicyStore.Snapshot {
        PolicyStore.Snapshot(loaded: loaded, parseOptions: policy.parseOptions, options: try policy.evaluationOptions())
    }

    /// The CA (created on first use), its certificate's path, and what the banner says about it.
    func loadAuthority() throws -> (CertificateAuthority, String, CAStartNote) {
        let (authority, created, legacyNote) = try ca.loadOrCreate()
        let path =
            try authority.certificatePath
            ?? (try ca.directory as NSString).appendingPathComponent(CertificateAuthority.certificateFileName)
        return (authority, path, CAStartNote(created: created, legacy: legacyNote))
    }

    /// Addresses a client can type: a wildcard listener becomes the machine's LAN addresses.
    static func reachableAddresses(_ addresses: [ListenAddress]) -> [String] {
        var result: [String] = []
        for address in addresses {
            if address.address.isWildcard {
                let lan = NetworkInterfaces.lanIPv4Addresses().map { "\($0):\(address.address.port)" }
                result += lan.isEmpty ? ["127.0.0.1:\(address.address.port)"] : lan
            } else {
                result.append(address.description)
            }
        }
        return result
    }

    static func selfAuthorities(_ addresses: [ListenAddress]) -> Set<String> {
        var result = Set<String>()
        for address in addresses {
            let port = address.address.port
            let ip = address.address.ip
            let host = ip.family == .v6 ? "[\(ip)]" : ip.description
            result.insert("\(host):\(port)")
            if address.address.isLoopback || address.address.isWildcard {
                result.insert("localhost:\(port)")
                result.insert("127.0.0.1:\(port)")
                result.insert("[::1]:\(port)")
            }
        }
        return result
    }

    /// The live status line, when stderr is a terminal and --quiet is not given.
    func startStatusLine(_ launched: LaunchedProxy) {
        guard !quiet, isatty(STDERR_FILENO) == 1 else { return }
        let stats = launched.stats
        launched.log.enableStatusLine { stats.snapshot.line }
    }

    func printBanner(_ launched: LaunchedProxy) {
        let bound = launched.bound
        let caPath = launched.caPath
        let loaded = launched.loaded
        let snapshot = launched.snapshot
        let authorityCertificate = launched.authority.certificate
        var lines: [String] = []
        switch mode {
        case .enforce: lines.append("ats-proxy \(ATSProxyVersion.text): enforcing ATS for \(loaded.summary)")
        case .report:
            lines.append(
                "ats-proxy \(ATSProxyVersion.text): report mode (ATS violations are let through and logged) for \(loaded.summary)"
            )
        }
        let platform = snapshot.evaluator.options.platform
        lines.append(
            "  platform \(Self.platformLabel(platform)), mode \(mode.rawValue), cleartext \(cleartext.rawValue)")
        for address in bound { lines.append("  listening on \(address)") }
        lines += launched.observation?.bannerLines ?? []
        lines.append("  event loops: \(loops ?? IOSystem.coreCount) (\(eventLoop))")
        lines.append("  \(launched.services.upstreamTLS.groupOffer.bannerLine)")
        if let systemServices = launched.services.settings.systemServices {
            lines.append(
                "  system services: \(systemServices.hosts.patterns.joined(separator: ", ")) also judged as \(systemServices.profile.platform) system processes require (reported apart from the app's verdict)"
            )
        }
        lines += BannerInputs.lines()
        if let lintLine = lintSummary(loaded, platform: snapshot.evaluator.options.platform) {
            lines.append("  \(lintLine)")
        }
        if let ctLine = launched.ctLine { lines.append("  \(ctLine)") }
        lines.append("  CA certificate: \(caPath)")
        if launched.caNote.created {
            lines.append("  new CA created just now: install and trust it on each device (onboarding page below)")
        }
        if let legacy = launched.caNote.legacy { lines.append("  \(legacy)") }
        let details = CertificateDetails(authorityCertificate)
        let daysLeft = Int(details.notAfter.timeIntervalSinceNow / 86400)
        if daysLeft < 30 {
            lines.append(
                "  warning: the CA expires in \(max(0, daysLeft)) days; create a new one with 'ats-proxy ca init' in a fresh --ca-dir"
            )
        }
        if bound.contains(where: { !$0.isLoopback }) {
            let allowed =
                allowClients.isEmpty ? ClientAllowList.privateAndLinkLocal : ClientAllowList(parsing: allowClients)
            lines.append(
                "  clients allowed from: \(allowed?.description ?? allowClients.joined(separator: ", "))"
                    + (allowClients.isEmpty ? " (the default; --allow-client to change)" : ""))
            let reachable = Self.reachableAddresses(bound.map(ListenAddress.init)).filter { !$0.hasPrefix("127.") }
            if reachable.isEmpty {
                lines.append(
                    "  no LAN address found on this machine: devices cannot reach the proxy until it has one")
            } else {
                lines.append("  devices on this network: set the Wi-Fi HTTP proxy to Manual:")
                for address in reachable {
                    let parts = address.split(separator: ":")
                    lines.append("    Server \(parts.dropLast().joined(separator: ":"))  Port \(parts.last ?? "")")
                }
                lines.append(
                    "  or to Automatic (direct again when the proxy stops; Configure Proxy › Automatic › URL):")
                for address in reachable {
                    lines.append("    URL http://\(address)\(ProxyAutoConfig.path)")
                }
                lines.append("  then open http://\(OnboardingSite.host)/ on the device to install and trust the CA")
            }
        } else {
            lines.append(
                "  onboarding: http://\(OnboardingSite.host)/ through the proxy, or http://\(bound.first.map(\.description) ?? "")/"
            )
            if let first = bound.first { lines.append("  PAC file: http://\(first)\(ProxyAutoConfig.path)") }
        }
        if let first = bound.first {
            lines.append("  try: curl -x http://\(first) --cacert \(caPath) https://example.com/")
        }
        FileHandle.standardError.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    }

    /// The emulated platform as the banner and `settings show` name it: the default says that it is the default
    /// and the newest system modelled.
    static func platformLabel(_ platform: Platform) -> String {
        platform.isDefault
            ? "\(platform) (the default: the newest \(platform.family.displayName) modelled; --platform for older)"
            : "\(platform)"
    }

    /// One line when `lint` finds errors or warnings in the loaded Info.plist, else nil.
    func lintSummary(_ loaded: LoadedInfoPlist, platform: Platform) -> String? {
        let report = ATSLinter(source: loaded, parseOptions: policy.parseOptions, platform: platform).lint()
        let errors = report.count(.error)
        let warnings = report.count(.warning)
        guard errors + warnings > 0 else { return nil }
        let counts = [(errors, "error"), (warnings, "warning")].filter { $0.0 > 0 }
            .map { "\($0.0) \($0.1)\($0.0 == 1 ? "" : "s")" }.joined(separator: " and ")
        let command = policy.config.map { "ats-proxy lint --config \($0)" } ?? "ats-proxy lint"
        return "lint: \(counts) in this Info.plist's ATS keys; '\(command)' lists them"
    }

    /// SIGINT/SIGTERM drain and exit (writing the report), SIGHUP reloads the policy, SIGUSR1
    /// writes the report now.
    func installSignals(_ launched: LaunchedProxy) {
        let server = launched.server
        let services = launched.services
        let log = launched.log
        let watcher = SignalWatcher()
        let grace = Duration.milliseconds(Int(gracePeriod * 1000))
        let shutdown = GracefulShutdown(
            gracePeriod: grace, stopAccepting: { server.drain() }, inFlight: { server.liveConnections },
            onFinished: { [failOnViolations] drained in
                server.closeRemaining()
                log.note(drained ? "stopped" : "stopped with connections still open after the grace period")
                log.stopStatusLine()
                log.flush()
                launched.writeReport()
                let stats = launched.stats.snapshot
                var lines = SessionStats.summaryLines(
                    stats, reportDirectory: launched.reportDirectory,
                    ignored: launched.services.settings.hostFilter.ignored)
                let comparison = launched.baselineComparison
                lines += comparison?.lines ?? []
                // As for exec: a client that refused the proxy CA (4) makes the verdicts untrustworthy, and wins
                // over a client that accepted a forged server (5), which wins over violations (3).
                var status: Int32 = 0
                if failOnViolations && stats.clientUntrustedCA > 0 {
                    status = 4
                    lines.append(
                        "ats-proxy: exiting 4: \(SessionStats.clientUntrustedCALine) (--fail-on-violations)")
                } else if failOnViolations && stats.challengeFindings > 0 {
                    status = ExecCommand.challengeFindingStatus
                    lines.append(
                        "ats-proxy: exiting \(ExecCommand.challengeFindingStatus): the client accepted \(stats.challengeFindings) forged server(s) (--challenge, --fail-on-violations)"
                    )
                } else if failOnViolations && (comparison?.new.count ?? stats.violations) > 0 {
                    status = 3
                    lines.append(
                        comparison == nil
                            ? "ats-proxy: exiting 3: ATS violations were seen (--fail-on-violations)"
                            : "ats-proxy: exiting 3: ATS violations the baseline does not list were seen (--fail-on-violations)"
                    )
                }
                FileHandle.standardError.write(Data((lines.joined(separator: "\n") + "\n").utf8))
                Foundation.exit(status)
            })
        let reloadPolicy = policy
        watcher.watch(SIGINT) {
            log.note("stopping: no new connections, in-flight requests have \(Int(self.gracePeriod)) s")
            shutdown.begin()
        }
        watcher.watch(SIGTERM) { shutdown.begin() }
        watcher.watch(SIGHUP) {
            do {
                let loaded = try reloadPolicy.loadSource()
                let snapshot = PolicyStore.Snapshot(
                    loaded: loaded, parseOptions: reloadPolicy.parseOptions,
                    options: try reloadPolicy.evaluationOptions())
                let evaluator = snapshot.evaluator
                services.policy.replace(with: snapshot)
                launched.report?.updatePolicy(
                    SessionReport.Policy(
                        configuration: evaluator.configuration, options: evaluator.options,
                        sourceSummary: loaded.summary, source: loaded))
                log.note("reloaded \(loaded.summary)")
            } catch {
                log.note("reload failed, keeping the previous policy: \(error)")
            }
        }
        watcher.watch(SIGUSR1) { launched.writeReport() }
        SignalRetainer.shared.keep(watcher, shutdown)
    }
}

extension EnforcementMode: ExpressibleByArgument {}
extension UpstreamProxy: ExpressibleByArgument {
    /// Parses `--upstream-proxy` (`UpstreamProxy.init(parsing:)`).
    public init?(argument: String) {
        guard let parsed = try? UpstreamProxy(parsing: argument) else { return nil }
        self = parsed
    }
}
extension EventLoopBackend: ExpressibleByArgument {}
extension CleartextHandling: ExpressibleByArgument {}
extension TunnelUnknownHandling: ExpressibleByArgument {}
extension ProxyLogSink.Format: ExpressibleByArgument {}

/// What happened to the CA at start, for the banner.
struct CAStartNote {
    /// The CA was created by this run (devices must be told to trust it).
    let created: Bool
    /// A line about a CA found in the legacy `certs/` directory, if any.
    let legacy: String?
}

/// Keeps the signal watcher and shutdown alive for the life of the process.
final class SignalRetainer: @unchecked Sendable {
    static let shared = SignalRetainer()
    private var objects: [AnyObject] = []
    private let lock = NSLock()

    func keep(_ items: AnyObject...) {
        lock.lock()
        objects.append(contentsOf: items)
        lock.unlock()
    }
}

/// A started proxy and what the commands around it need.
struct LaunchedProxy {
    let server: ProxyServer
    let services: ProxyServices
    let log: ProxyLogSink
    let bound: [SocketAddress]
    let caPath: String
    let caNote: CAStartNote
    let authority: CertificateAuthority
    let loaded: LoadedInfoPlist
    let snapshot: PolicyStore.Snapshot
    let stats: SessionStats
    let report: SessionReport?
    let reportDirectory: String?
    /// The web view, HAR and key log (nil when none was asked for).
    var observation: SessionObservation? = nil
    /// The banner's line about the CT log list (`CTLogSelection.bannerLine`).
    var ctLine: String? = nil
    /// `--baseline`: the earlier run's violations, and the distinct violations of this one (both nil without it).
    var baseline: ViolationBaseline? = nil
    var ledger: ViolationLedger? = nil

    /// This session's violations against `--baseline` so far (nil without it).
    var baselineComparison: BaselineComparison? {
        guard let baseline, let ledger else { return nil }
        return BaselineComparison(baseline: baseline, seen: ledger.violations)
    }

    /// Writes the session report (when --report was given) and the HAR (when --har was given);
    /// failures are logged, not fatal.
    func writeReport() {
        observation?.writeHAR()
        guard let report, let reportDirectory else { return }
        report.setIgnored(services.settings.hostFilter.ignored)
        log.flush()
        do {
            try report.write(to: reportDirectory)
            FileHandle.standardError.write(Data("ats-proxy: report written to \(reportDirectory)\n".utf8))
        } catch {
            FileHandle.standardError.write(Data("ats-proxy: error: cannot write the report: \(error)\n".utf8))
        }
    }
}

/// `ats-proxy [run] --config Info.plist`: the proxy itself. Listens (loopback by default),
/// decides every request with the app's ATS policy, intercepts HTTPS with minted leaves, and logs
/// CFNetwork-style diagnostics. SIGINT/SIGTERM drain and exit; SIGHUP reloads the Info.plist.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the proxy (the default command).",
        discussion: """
            Point a client at it with the CA certificate the banner names, e.g.:
              curl -x http://127.0.0.1:8080 --cacert CA.pem https://example.com/

            At exit (SIGINT/SIGTERM) it prints a summary: requests, hosts, violations by rule and \
            where the report is. Exit status: 0; with --fail-on-violations 3 when ATS violations were \
            seen (with --baseline: violations the baseline does not list), 4 when a client refused the \
            proxy CA, 5 when a client accepted a forged server of --challenge (4 wins over 5, 5 over 3); 2 on \
            bad options, settings or configuration.
            """)

    @OptionGroup var options: ProxyOptions

    func run() throws {
        let launched: LaunchedProxy
        do {
            launched = try options.launch()
        } catch {
            exitWithError(error)
        }
        options.printBanner(launched)
        options.startStatusLine(launched)
        options.installSignals(launched)
        dispatchMain()
    }
}
