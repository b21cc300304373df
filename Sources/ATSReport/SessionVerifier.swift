import ATSPolicy
import ATSProxyCore
import ATSTLS
import Foundation

/// Re-decides the loads a session recorded (`report.json`) under a candidate `NSAppTransportSecurity`
/// dictionary: `ats-proxy verify`. Cleartext loads and loads that went through are decided offline with the
/// policy engine (the latter against the TLS facts the session recorded for the host); loads whose TLS failed
/// are checked again against the server with `recheck` (the upstream check `diagnose` runs). Loads no Info.plist
/// decides (network errors, the proxy's own refusals, a client that did not trust the proxy CA) are skipped.
///
/// Pure apart from `recheck`.
public struct SessionVerifier: Sendable {
    /// The verdict on one recorded load.
    public enum Result: String, Sendable, Codable, Equatable {
        /// The candidate lets it through.
        case pass
        /// It still fails (or would now fail) under the candidate.
        case fail
        /// No Info.plist decides it (network error, the proxy's refusal, a set-up failure).
        case skip
    }

    /// One recorded load (one distinct verdict of a host in the report) and what the candidate makes of it.
    public struct Load: Sendable, Codable, Equatable {
        public var url: String
        /// The outcome and code the session recorded.
        public var recorded: LoadOutcome
        public var recordedCode: String?
        public var result: Result
        /// The code it still fails with (nil when it passes or was skipped).
        public var code: String?
        /// Why, in one sentence.
        public var reason: String
        /// True when the server was contacted again (a TLS failure re-checked).
        public var checkedServer: Bool
    }

    /// The whole verification: `ats-proxy verify --format json` writes this.
    public struct Verification: Sendable, Codable, Equatable {
        /// Where the candidate came from (a path, or the session's minimal dictionary).
        public var candidate: String
        public var platform: String
        public var loads: [Load]
        public var passed: Int
        public var failed: Int
        public var skipped: Int
    }

    public let document: SessionReportDocument
    public let configuration: ATSConfiguration
    public let options: EvaluationOptions
    /// The upstream check of an https load under the candidate's policy (`UpstreamChecker.check`).
    public let recheck: @Sendable (RequestTarget, PolicyContext) -> UpstreamVerdict

    public init(
        document: SessionReportDocument, configuration: ATSConfiguration, options: EvaluationOptions,
        recheck: @escaping @Sendable (RequestTarget, PolicyContext) -> UpstreamVerdict
    ) {
        self.document = document
        self.configuration = configuration
        self.options = options
        self.recheck = recheck
    }

    /// The evaluation options the session ran with, read back from the report (the platform and the switches
    /// report.json records).
    public static func options(of document: SessionReportDocument) -> EvaluationOptions? {
        guard let platform = platform(parsing: document.platform) else { return nil }
        var options = EvaluationOptions(platform: platform)
        options.subdomainDepth = SubdomainDepth(rawValue: document.options.subdomainDepth) ?? options.subdomainDepth
        options.builtInAppleExceptions = document.options.builtInAppleExceptions
        options.explicitLocalNetworkingNoIsStrict = document.options.explicitLocalNetworkingNoIsStrict
        options.tls12FloorOn26 = document.options.tls12FloorOn26
        let networks = document.options.localNetworks.compactMap(CIDRBlock.init(parsing:))
        if networks.count == document.options.localNetworks.count { options.localNetworks = networks }
        options.trustOverrideHosts = document.options.trustOverrideHosts
        return options
    }

    /// `iOS 18.0` or `iOS 18.0 (SDK 17.0)`, as `Platform.description` writes it.
    static func platform(parsing text: String) -> Platform? {
        let words = text.split(separator: " ").map(String.init)
        guard words.count >= 2 else { return nil }
        var sdk: String?
        if words.count == 4, words[2] == "(SDK" { sdk = String(words[3].dropLast()) }
        return Platform(parsing: "\(words[0]):\(words[1])", sdk: sdk)
    }

    /// The session's minimal dictionary as a configuration (what `verify` checks when no candidate is given).
    public static func minimalConfiguration(of document: SessionReportDocument) -> ATSConfiguration? {
        PlistFragmentWriter.parse(document.minimalDictionary.plist).map { ATSConfigurationParser().parse($0) }
    }

    /// Every distinct recorded load, re-decided.
    public func verify(candidate: String) -> Verification {
        let policy = PolicyContext(configuration: configuration, options: options)
        var loads: [Load] = []
        for host in document.hosts {
            for verdict in host.verdicts { loads.append(decide(verdict, host: host, policy: policy)) }
        }
        return Verification(
            candidate: candidate, platform: document.platform, loads: loads,
            passed: loads.filter { $0.result == .pass }.count, failed: loads.filter { $0.result == .fail }.count,
            skipped: loads.filter { $0.result == .skip }.count)
    }

    /// One recorded load under `policy`.
    func decide(_ verdict: VerdictSummary, host: HostReport, policy: PolicyContext) -> Load {
        var load = Load(
            url: verdict.exampleURL, recorded: verdict.outcome, recordedCode: verdict.code, result: .skip, code: nil,
            reason: "", checkedServer: false)
        if let reason = Self.notAnATSDecision(verdict) {
            load.reason = reason
            return load
        }
        guard let target = try? RequestTarget(parsing: verdict.exampleURL) else {
            load.reason = "not an http or https URL the policy can judge"
            return load
        }
        let decision = policy.decide(target)
        if target.scheme == .http {
            if decision.isBlocked {
                load.result = .fail
                load.code = "\(NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue)"
                load.reason = "cleartext is still blocked: \(decision.ruleSummary)"
            } else {
                load.result = .pass
                load.reason = "cleartext allowed: \(decision.ruleSummary)"
            }
            return load
        }
        if Self.isTLSFailure(verdict.code) {
            let checked = recheck(target, policy)
            load.checkedServer = true
            if checked.isBlocked {
                load.result = .fail
                load.code = checked.error.map { "\($0.rawValue)" + (checked.streamPair.map { " \($0)" } ?? "") }
                load.reason = checked.rule + (checked.fix.map { "; fix: \($0)" } ?? "")
            } else {
                load.result = .pass
                load.reason = "the server's TLS now meets the requirements (checked again)"
            }
            return load
        }
        // It went through: does what the server negotiated still meet the candidate's requirements?
        let requirements = decision.requirements
        let versions = host.tls.compactMap { $0.version.flatMap(TLSProtocolVersion.init(plistString:)) }
        if let lowest = versions.min(), requirements.atsGoverned, lowest < requirements.minimumVersion {
            load.result = .fail
            load.code = "-1200 [3:-9836]"
            load.reason =
                "the candidate requires \(requirements.minimumVersion.rawValue) or later; the server negotiated \(lowest.rawValue)"
            return load
        }
        if requirements.atsGoverned, requirements.forwardSecrecyRequired,
            host.tls.contains(where: { $0.keyExchange == "RSA" })
        {
            load.result = .fail
            load.code = "-1200 [3:-9824]"
            load.reason = "the candidate requires forward secrecy; the server chose static-RSA key exchange"
            return load
        }
        load.result = .pass
        load.reason = "went through, and the recorded TLS facts meet the candidate's requirements"
        return load
    }

    /// Why no Info.plist decides `verdict`, or nil when one does.
    static func notAnATSDecision(_ verdict: VerdictSummary) -> String? {
        switch verdict.outcome {
        case .networkError:
            return "network error \(verdict.code ?? ""): the network failed, not the policy".replacingOccurrences(
                of: "  ", with: " ")
        case .passthrough: return "a passthrough tunnel: the proxy did not judge it"
        case .ignored: return "left alone by the host filter"
        case .challengePassed, .challengeFinding: return "a --challenge connection: the app's trust, not ATS"
        case .blocked where verdict.result == RequestRecord.Result.refused.rawValue:
            return "refused by the proxy itself (\(verdict.rule))"
        case .failed where verdict.result == RequestRecord.Result.clientUntrustedCA.rawValue:
            return "the client did not trust the proxy CA: a set-up failure, not an ATS verdict"
        case .allowed, .allowedByException, .blocked, .failed, .reported:
            return nil
        }
    }

    /// Whether `code` (`-1200 [3:-9836]`) is a TLS or trust failure.
    public static func isTLSFailure(_ code: String?) -> Bool {
        guard let number = code?.split(separator: " ").first.flatMap({ Int($0) }) else { return false }
        return (-1206 ... -1200).contains(number)
    }

    /// The verification as text: one line per load, then the totals.
    public static func text(_ verification: Verification) -> String {
        var lines = ["Verifying \(verification.loads.count) recorded loads against \(verification.candidate)"]
        lines.append("  platform \(verification.platform)")
        for load in verification.loads {
            let word: String
            switch load.result {
            case .pass: word = "PASS"
            case .fail: word = "FAIL"
            case .skip: word = "SKIP"
            }
            let before = load.recorded.rawValue + (load.recordedCode.map { " \($0)" } ?? "")
            let after = load.code.map { " → \($0)" } ?? ""
            lines.append("\(word)  \(load.url)  (was \(before)\(after)): \(load.reason)")
        }
        lines.append(
            "\(verification.passed) pass, \(verification.failed) still fail, \(verification.skipped) not decided by the Info.plist"
        )
        return lines.joined(separator: "\n") + "\n"
    }
}
