import Foundation

/// Decides, for one app's ATS configuration, what ATS does with a URL (reference §2.3–2.5).
///
/// Pure and thread-safe: no I/O, no clock. Build one per loaded configuration and call
/// `evaluate` per request.
public struct ATSEvaluator: Sendable {
    public let configuration: ATSConfiguration
    public let options: EvaluationOptions
    private let exceptions: [String: ExceptionDomain]

    public init(configuration: ATSConfiguration, options: EvaluationOptions = EvaluationOptions()) {
        self.configuration = configuration
        self.options = options
        var merged: [String: ExceptionDomain] = [:]
        if options.builtInAppleExceptions {
            for entry in BuiltInExceptions.entries { merged[entry.key] = entry }
        }
        for (key, entry) in configuration.exceptionDomains { merged[key] = entry }
        exceptions = merged
    }

    private var platform: Platform { options.platform }

    /// Why ATS never applies on `platform`: the OS predates ATS (whatever the SDK), or the app was
    /// linked against an SDK that does.
    static func noATSReason(_ platform: Platform) -> String {
        let threshold = PlatformFeature.appTransportSecurity.threshold(for: platform.family)
        let first = "\(platform.family.displayName) \(threshold)"
        if platform.version < threshold {
            return
                "\(platform.family.displayName) \(platform.version) predates ATS (introduced in \(first)), so ATS never applies, whatever SDK the app was linked against."
        }
        return "The app is linked against SDK \(platform.sdk), which predates ATS (\(first) SDK), so ATS never applies."
    }

    /// The decision for `target` loaded by `source`.
    public func evaluate(_ target: RequestTarget, source: RequestSource = .urlsession) -> ATSDecision {
        var steps: [RuleStep] = []
        var justification: [String] = []
        let host = target.host
        let address = target.ipAddress

        guard platform.has(.appTransportSecurity) else {
            steps.append(RuleStep(Self.noATSReason(platform)))
            return finish(
                target, source, atsRequired: false, exception: nil, local: nil, steps: steps,
                justification: justification)
        }

        let match = findException(host: host, address: address, steps: &steps)
        let local = localKind(host: host, address: address)
        let atsRequired = decideATSRequired(
            host: host, match: match, local: local, source: source, steps: &steps, justification: &justification)
        return finish(
            target, source, atsRequired: atsRequired, exception: match, local: local, steps: steps,
            justification: justification)
    }

    // MARK: - Step 1: the exception entry

    private func findException(host: String, address: IPAddress?, steps: inout [RuleStep]) -> ExceptionDomain? {
        let exceptionsPath = KeyPath.ats.appending(ATSKey.exceptionDomains)
        if let address {
            if let exact = exceptions[host], exact.kind != .invalidCIDR {
                steps.append(
                    RuleStep(
                        "NSExceptionDomains has an entry for the address \(host).",
                        keyPath: exceptionsPath.appending(host)))
                if !platform.has(.externalIPAddressesRequireATS) {
                    steps.append(
                        RuleStep(
                            "IP-address exception keys are documented from \(platform.family.displayName) \(PlatformFeature.externalIPAddressesRequireATS.threshold(for: platform.family)); earlier releases matched them as plain strings, which is emulated here."
                        ))
                }
                return exact
            }
            guard platform.has(.externalIPAddressesRequireATS) else { return nil }
            var best: (entry: ExceptionDomain, block: CIDRBlock)?
            for entry in exceptions.values.sorted(by: { $0.key < $1.key }) {
                guard case .cidr(let text) = entry.kind else { continue }
                let block = text.block
                guard block.contains(address) else { continue }
                if best == nil || block.prefixLength >= best!.block.prefixLength { best = (entry, block) }
            }
            if let best {
                steps.append(
                    RuleStep(
                        "NSExceptionDomains → \(best.entry.key) covers \(host) (longest matching prefix, /\(best.block.prefixLength)).",
                        keyPath: exceptionsPath.appending(best.entry.key)))
                return best.entry
            }
            return nil
        }
        if let exact = exceptions[host], exact.kind == .host {
            steps.append(
                RuleStep(
                    "NSExceptionDomains → \(host) matches the host exactly\(exact.isBuiltIn ? " (Apple built-in exception)" : "").",
                    keyPath: exceptionsPath.appending(host)))
            return exact
        }
        var labels = host.split(separator: ".", omittingEmptySubsequences: false)
        var depth = 0
        while labels.count > 1 {
            labels.removeFirst()
            depth += 1
            let parent = labels.joined(separator: ".")
            guard !parent.isEmpty, let entry = exceptions[parent], entry.kind == .host else { continue }
            let keyPath = exceptionsPath.appending(parent)
            guard entry.includesSubdomains else {
                steps.append(
                    RuleStep(
                        "NSExceptionDomains → \(parent) exists but NSIncludesSubdomains is not YES, so it does not cover \(host).",
                        keyPath: keyPath))
                continue
            }
            if options.subdomainDepth == .one && depth > 1 {
                steps.append(
                    RuleStep(
                        "NSExceptionDomains → \(parent) includes subdomains, but \(host) is \(depth) labels below it and --subdomain-depth one allows only one.",
                        keyPath: keyPath))
                continue
            }
            steps.append(
                RuleStep(
                    "NSExceptionDomains → \(parent) covers \(host) through NSIncludesSubdomains = YES (most specific usable entry)\(entry.isBuiltIn ? " (Apple built-in exception)" : "").",
                    keyPath: keyPath.appending(ATSKey.includesSubdomains)))
            return entry
        }
        if let near = exceptions.keys.first(where: { $0.lowercased() == host && $0 != host }) {
            steps.append(
                RuleStep(
                    "NSExceptionDomains → \(near) differs from \(host) only in case; exception keys must be lower case, so it never matches.",
                    keyPath: exceptionsPath.appending(near)))
        }
        return nil
    }

    // MARK: - Step 2: is the host local?

    private func localKind(host: String, address: IPAddress?) -> LocalHostKind? {
        if let address {
            let checked = address.mappedIPv4 ?? address
            if options.localNetworks.contains(where: { $0.contains(checked) }) { return .localAddress }
            return platform.has(.externalIPAddressesRequireATS) ? nil : .anyAddress
        }
        var name = host
        if name.hasSuffix(".") { name.removeLast() }
        if !name.isEmpty, !name.contains(".") { return .unqualifiedName }
        if name.hasSuffix(".local") { return .dotLocal }
        return nil
    }

    // MARK: - Step 3: atsRequired (reference §2.3 step 2)

    private func decideATSRequired(
        host: String, match: ExceptionDomain?, local: LocalHostKind?, source: RequestSource, steps: inout [RuleStep],
        justification: inout [String]
    ) -> Bool {
        let config = configuration
        let atsPath = KeyPath.ats
        let fineGrained = platform.has(.fineGrainedGlobalKeys)

        if let match {
            if match.allowsInsecureHTTPLoads {
                justification.append(ATSKey.exceptionAllowsInsecureHTTPLoads)
                steps.append(
                    RuleStep(
                        "The entry sets NSExceptionAllowsInsecureHTTPLoads = YES, so ATS is not required for this host.",
                        keyPath: KeyPath.ats.appending(ATSKey.exceptionDomains).appending(match.key).appending(
                            ATSKey.exceptionAllowsInsecureHTTPLoads)))
                return false
            }
            steps.append(
                RuleStep(
                    "The entry replaces the global settings for this host and does not allow insecure HTTP loads, so ATS is required\(config.allowsArbitraryLoads.isYes ? " (NSAllowsArbitraryLoads does not apply to hosts with their own entry)" : "").",
                    keyPath: KeyPath.ats.appending(ATSKey.exceptionDomains).appending(match.key)))
            return true
        }

        guard fineGrained else {
            if config.fineGrainedKeyPresent {
                steps.append(
                    RuleStep(
                        "\(config.presentFineGrainedKeys.joined(separator: ", ")) did not exist before \(platform.family.displayName) \(PlatformFeature.fineGrainedGlobalKeys.threshold(for: platform.family)) and is ignored."
                    ))
            }
            if config.allowsArbitraryLoads.isYes {
                justification.append(ATSKey.allowsArbitraryLoads)
                steps.append(
                    RuleStep(
                        "NSAllowsArbitraryLoads = YES turns ATS off for hosts without an exception entry.",
                        keyPath: atsPath.appending(ATSKey.allowsArbitraryLoads)))
                return false
            }
            steps.append(
                RuleStep(
                    "On \(platform.family.displayName) \(platform.version) local names and IP addresses are not exempt; NSAllowsArbitraryLoads is not YES, so ATS applies."
                ))
            return true
        }

        if let local {
            let strict = config.allowsLocalNetworking.isExplicitNo && options.explicitLocalNetworkingNoIsStrict
            if !strict {
                let reason: String
                switch local {
                case .unqualifiedName, .dotLocal, .localAddress:
                    reason =
                        config.allowsLocalNetworking.isYes
                        ? "NSAllowsLocalNetworking = YES exempts it" : "ATS exempts local hosts by default"
                case .anyAddress:
                    reason =
                        "ATS exempts every IP address on this OS and SDK (external IPs need ATS only from \(platform.family.displayName) \(PlatformFeature.externalIPAddressesRequireATS.threshold(for: platform.family)) with the same SDK)"
                }
                steps.append(
                    RuleStep(
                        "The host is \(article(local.rawValue)); \(reason).",
                        keyPath: config.allowsLocalNetworking.isYes
                            ? atsPath.appending(ATSKey.allowsLocalNetworking) : nil))
                return false
            }
            steps.append(
                RuleStep(
                    "The host is \(article(local.rawValue)), but NSAllowsLocalNetworking = NO is explicit, which removes the local exemption.",
                    keyPath: atsPath.appending(ATSKey.allowsLocalNetworking)))
        }

        if source == .media && config.allowsArbitraryLoadsForMedia.isYes {
            justification.append(ATSKey.allowsArbitraryLoadsForMedia)
            steps.append(
                RuleStep(
                    "The load comes from AVFoundation and NSAllowsArbitraryLoadsForMedia = YES lifts ATS for media.",
                    keyPath: atsPath.appending(ATSKey.allowsArbitraryLoadsForMedia)))
            return false
        }
        if source == .webkit && config.allowsArbitraryLoadsInWebContent.isYes {
            justification.append(ATSKey.allowsArbitraryLoadsInWebContent)
            steps.append(
                RuleStep(
                    "The load comes from a web view and NSAllowsArbitraryLoadsInWebContent = YES lifts ATS for web content.",
                    keyPath: atsPath.appending(ATSKey.allowsArbitraryLoadsInWebContent)))
            return false
        }
        if config.fineGrainedKeyPresent {
            if config.allowsArbitraryLoads.isYes {
                steps.append(
                    RuleStep(
                        "NSAllowsArbitraryLoads = YES is ignored because \(config.presentFineGrainedKeys.joined(separator: " and ")) \(config.presentFineGrainedKeys.count == 1 ? "is" : "are") present (any value cancels it on \(platform.family.displayName) \(PlatformFeature.fineGrainedGlobalKeys.threshold(for: platform.family))+).",
                        keyPath: atsPath.appending(ATSKey.allowsArbitraryLoads)))
            }
            let exemptions = [
                config.allowsArbitraryLoadsForMedia.isYes ? "AVFoundation media" : nil,
                config.allowsArbitraryLoadsInWebContent.isYes ? "web views" : nil,
            ].compactMap { $0 }
            let sourceNote =
                exemptions.isEmpty
                ? ""
                : " (the fine-grained exemptions cover \(exemptions.joined(separator: " and ")), not \(source.displayName) loads)"
            steps.append(RuleStep("No key exempts this load, so ATS is required\(sourceNote)."))
            return true
        }
        if config.allowsArbitraryLoads.isYes {
            justification.append(ATSKey.allowsArbitraryLoads)
            steps.append(
                RuleStep(
                    "NSAllowsArbitraryLoads = YES turns ATS off for hosts without an exception entry.",
                    keyPath: atsPath.appending(ATSKey.allowsArbitraryLoads)))
            return false
        }
        if local == nil, IPAddress(parsing: host) != nil {
            steps.append(
                RuleStep(
                    "The host is an external IP address (outside --local-network); apps linked with the \(platform.family.displayName) \(PlatformFeature.externalIPAddressesRequireATS.threshold(for: platform.family)) SDK or later need ATS for those."
                ))
        }
        steps.append(
            RuleStep(
                config.allowsArbitraryLoads.isExplicitNo
                    ? "NSAllowsArbitraryLoads = NO, so ATS is required (the default)."
                    : "No exception entry, not a local host, and NSAllowsArbitraryLoads is not set, so ATS is required (the default)."
            ))
        return true
    }

    // MARK: - Outcome

    private func finish(
        _ target: RequestTarget, _ source: RequestSource, atsRequired: Bool, exception: ExceptionDomain?,
        local: LocalHostKind?, steps: [RuleStep], justification: [String]
    ) -> ATSDecision {
        var steps = steps
        var justification = justification
        let requirements = buildRequirements(
            host: target.host, atsRequired: atsRequired, exception: exception, steps: &steps,
            justification: &justification, reportSteps: target.scheme == .https)
        let outcome: ATSDecision.Outcome
        var fix: String?
        switch target.scheme {
        case .http:
            if atsRequired {
                outcome = .cleartextBlocked
                steps.append(
                    RuleStep(
                        "Cleartext http:// to a host where ATS is required is blocked (NSURLErrorDomain -1022) before any byte is sent."
                    ))
                fix = cleartextFix(host: target.host, exception: exception, local: local)
            } else {
                outcome = .cleartextAllowed
                steps.append(RuleStep("Cleartext http:// is allowed."))
            }
        case .https:
            outcome = .https
            if requirements.atsGoverned {
                steps.append(
                    RuleStep(
                        "HTTPS must meet the ATS requirements: \(requirements.minimumVersion.displayName)+, \(requirements.forwardSecrecyRequired ? "forward-secret ECDHE suites" : "static-RSA suites allowed"), \(requirements.trust.kind == .ats ? "ATS trust (no override)" : "default trust (the app may override)")."
                    ))
            } else {
                steps.append(
                    RuleStep(
                        "HTTPS is not governed by ATS: only default server-trust evaluation applies, and the app may override it."
                    ))
            }
            if !requirements.isSatisfiable {
                steps.append(
                    RuleStep(
                        "No TLS version satisfies both the minimum \(requirements.minimumVersion.displayName) and \(platform.family.displayName) \(platform.version)'s maximum \(requirements.maximumVersion.displayName): every connection fails."
                    ))
            }
        }
        var seen = Set<String>()
        justification = justification.filter { seen.insert($0).inserted }
        return ATSDecision(
            target: target,
            .init(
                source: source, platform: platform, outcome: outcome, atsRequired: atsRequired,
                requirements: requirements, exceptionKey: exception?.key, localHost: local, ruleChain: steps, fix: fix,
                justificationKeys: justification))
    }

    private func cleartextFix(host: String, exception: ExceptionDomain?, local: LocalHostKind?) -> String {
        if let exception {
            return
                "set NSExceptionAllowsInsecureHTTPLoads = YES in NSExceptionDomains → \(exception.key) (App Review asks for a justification), or load the URL over https://"
        }
        if local != nil && configuration.allowsLocalNetworking.isExplicitNo {
            return "set NSAllowsLocalNetworking = YES (or remove the explicit NO), or load the URL over https://"
        }
        if local == nil, let address = IPAddress(parsing: host) {
            _ = address
            return
                "add NSExceptionDomains → \(host) (or a CIDR block containing it) with NSExceptionAllowsInsecureHTTPLoads = YES (App Review asks for a justification), or load the URL over https://"
        }
        return
            "add NSExceptionDomains → \(host) with NSExceptionAllowsInsecureHTTPLoads = YES (App Review asks for a justification), or load the URL over https://"
    }

    // MARK: - TLS requirements (reference §2.3 step 4, §3)

    private func buildRequirements(
        host: String, atsRequired: Bool, exception: ExceptionDomain?, steps: inout [RuleStep],
        justification: inout [String], reportSteps: Bool
    ) -> TLSRequirements {
        let governed = exception != nil || atsRequired
        let maximum: TLSProtocolVersion = platform.has(.tls13) ? .tls13 : .tls12
        let floorOn26 = options.tls12FloorOn26 && platform.has(.tls12AbsoluteFloor)
        var minimum: TLSProtocolVersion = floorOn26 ? .tls12 : .tls10
        var suites = CipherSuite.suites([.tls13, .forwardSecret, .staticRSA], on: platform)
        var unrestricted = true
        var forwardSecrecy = false
        var atsKeySize = false
        let strict = platform.has(.strictServerCertificates)
        let platformRSA = platform.has(.platformRejectsSHA1AndSmallRSA) ? 2048 : 0
        let platformEC = strict ? 256 : 0
        var minimumHash: SignatureHash =
            strict ? .sha224 : (platform.has(.platformRejectsSHA1AndSmallRSA) ? .sha224 : .sha1)
        var trustKind: TrustPolicy.Kind = .standard
        var mayOverride = true
        var niap: NIAPPackage = .none
        var reported: [RuleStep] = []

        if governed {
            minimum = .tls12
            suites = CipherSuite.suites([.tls13, .forwardSecret], on: platform)
            unrestricted = false
            forwardSecrecy = true
            atsKeySize = true
            minimumHash = .sha256
            trustKind = .ats
            mayOverride = false
            if let exception {
                if exception.allowsInsecureHTTPLoads {
                    trustKind = .standard
                    mayOverride = true
                    reported.append(
                        RuleStep(
                            "NSExceptionAllowsInsecureHTTPLoads = YES also lets the app override server trust for HTTPS; the TLS version and cipher minimums still apply."
                        ))
                }
                if !exception.requiresForwardSecrecy {
                    forwardSecrecy = false
                    suites = CipherSuite.suites([.tls13, .forwardSecret, .staticRSA], on: platform)
                    unrestricted = exception.allowsInsecureHTTPLoads
                    if options.forwardSecrecyWaiverSkipsKeySize { atsKeySize = false }
                    reported.append(
                        RuleStep(
                            "NSExceptionRequiresForwardSecrecy = NO adds the static-RSA suites\(options.forwardSecrecyWaiverSkipsKeySize ? " and drops the ATS key-size check" : "").",
                            keyPath: KeyPath.ats.appending(ATSKey.exceptionDomains).appending(exception.key).appending(
                                ATSKey.exceptionRequiresForwardSecrecy)))
                }
                if exception.minimumTLSVersionSpecified {
                    let requested = exception.minimumTLSVersion
                    if requested < .tls12 {
                        justification.append(ATSKey.exceptionMinimumTLSVersion)
                        if floorOn26 {
                            reported.append(
                                RuleStep(
                                    "NSExceptionMinimumTLSVersion = \(requested) is not honoured on \(platform) (\(platform.family.displayName) 26 and later); TLS 1.2 remains the minimum (switch: --tls-floor-26 off)."
                                ))
                        } else {
                            minimum = requested
                            reported.append(
                                RuleStep(
                                    "NSExceptionMinimumTLSVersion = \(requested) lowers the minimum to \(requested.displayName).",
                                    keyPath: KeyPath.ats.appending(ATSKey.exceptionDomains).appending(exception.key)
                                        .appending(ATSKey.exceptionMinimumTLSVersion)))
                        }
                    } else {
                        minimum = requested
                        if requested > .tls12 {
                            reported.append(
                                RuleStep(
                                    "NSExceptionMinimumTLSVersion = \(requested) raises the minimum to \(requested.displayName).",
                                    keyPath: KeyPath.ats.appending(ATSKey.exceptionDomains).appending(exception.key)
                                        .appending(ATSKey.exceptionMinimumTLSVersion)))
                        }
                    }
                }
            }
            if platform.has(.niapTLSPackage) {
                niap = exception?.niapPackage ?? configuration.niapPackage
                if niap.isRestrictive {
                    suites = suites.filter { $0.group == .tls13 || $0.isECDHEAESGCM }
                    reported.append(
                        RuleStep(
                            "NIAP \(niap.rawValue) mode: TLS 1.2 offers only ECDHE with AES-GCM, and Extended Master Secret is required."
                        ))
                }
            }
        }
        if reportSteps { steps.append(contentsOf: reported) }

        let minimumRSA = atsKeySize ? max(2048, platformRSA) : platformRSA
        let minimumEC = atsKeySize ? 256 : platformEC
        var caps: [ValidityCap] = []
        if strict {
            caps = [
                ValidityCap(
                    anchors: .system, notBeforeOnOrAfter: TrustDates.systemCap825, maximumDays: 825, slackSeconds: 3600),
                ValidityCap(
                    anchors: .system, notBeforeOnOrAfter: TrustDates.systemCap398, maximumDays: 398, slackSeconds: 0),
                ValidityCap(
                    anchors: .userInstalled, notBeforeOnOrAfter: TrustDates.iOS13Rules, maximumDays: 825,
                    slackSeconds: 3600),
            ]
        }
        let ctKeyHonoured: Bool
        switch options.requiresCTKey {
        case .always: ctKeyHonoured = true
        case .never: ctKeyHonoured = false
        case .beforePlatformCT: ctKeyHonoured = !platform.has(.platformCertificateTransparency)
        }
        let ct = CTRequirement(
            systemRootsIssuedOnOrAfter: platform.has(.platformCertificateTransparency) ? TrustDates.ctRequired : nil,
            allChains: governed && ctKeyHonoured && (exception?.requiresCertificateTransparency ?? false))

        return TLSRequirements(
            .init(
                atsGoverned: governed, minimumVersion: minimum, maximumVersion: maximum, cipherSuites: suites,
                cipherListUnrestricted: unrestricted, forwardSecrecyRequired: forwardSecrecy,
                minimumRSAKeyBits: minimumRSA,
                minimumECKeyBits: minimumEC, atsKeySizeCheck: atsKeySize, minimumSignatureHash: minimumHash,
                trust: TrustPolicy(
                    kind: trustKind, appMayOverride: mayOverride, appOverrides: options.appOverridesTrust(for: host)),
                requireSubjectAltName: strict, requireServerAuthEKUIssuedAfter: strict ? TrustDates.iOS13Rules : nil,
                validityCaps: caps, certificateTransparency: ct, pins: pins(for: host), niap: niap))
    }

    // MARK: - Pins (reference §1.3)

    /// Pins from every NSPinnedDomains entry that matches: exact (case-insensitive, trailing dot
    /// ignored) or one label below an entry with NSIncludesSubdomains = true.
    public func pins(for host: String) -> PinRequirement? {
        let normalized = PinnedDomain.normalize(host)
        var parent: String?
        if let dot = normalized.firstIndex(of: ".") { parent = String(normalized[normalized.index(after: dot)...]) }
        var domains: [String] = []
        var leaf: [Data]?
        var ca: [Data]?
        for entry in configuration.pinnedDomains.values.sorted(by: { $0.key < $1.key }) where entry.isPinning {
            let key = entry.normalizedKey
            guard key == normalized || (entry.includesSubdomains && key == parent) else { continue }
            domains.append(entry.key)
            if let list = entry.leafIdentities { leaf = (leaf ?? []) + list.digests }
            if let list = entry.caIdentities { ca = (ca ?? []) + list.digests }
        }
        guard !domains.isEmpty else { return nil }
        return PinRequirement(domains: domains, leafSPKISHA256: leaf, caSPKISHA256: ca)
    }
}

/// Apple's own exceptions, registered before the app's dictionary (reference §2.3 notes).
enum BuiltInExceptions {
    static let entries: [ExceptionDomain] = {
        func entry(_ key: String, tls: TLSProtocolVersion, pfs: Bool) -> ExceptionDomain {
            var domain = ExceptionDomain(key: key)
            domain.includesSubdomains = true
            domain.allowsInsecureHTTPLoads = true
            domain.minimumTLSVersion = tls
            domain.minimumTLSVersionSpecified = true
            domain.requiresForwardSecrecy = pfs
            domain.isBuiltIn = true
            return domain
        }
        var setup = entry("setup.icloud.com", tls: .tls12, pfs: true)
        setup.includesSubdomains = false
        return [
            entry("apple.com", tls: .tls12, pfs: false),
            entry("ls.apple.com", tls: .tls10, pfs: true),
            entry("gs.apple.com", tls: .tls10, pfs: true),
            entry("geo.apple.com", tls: .tls10, pfs: true),
            entry("is.autonavi.com", tls: .tls10, pfs: true),
            entry("apple-mapkit.com", tls: .tls10, pfs: true),
            setup,
        ]
    }()
}
