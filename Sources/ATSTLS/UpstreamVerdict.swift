import ATSPolicy
import Foundation

/// The answer for one upstream HTTPS load: allowed, or blocked with the exact error a device
/// reports (NSURLErrorDomain code, stream pair, console lines), the rule in plain words, and the
/// smallest Info.plist change that would allow it. Pure value; text is produced on demand.
public struct UpstreamVerdict: Sendable {
    /// What the emulated app experiences.
    public enum Outcome: Sendable, Hashable {
        /// The load proceeds.
        case allowed
        /// Trust failed, but the app's delegate overrides trust and ATS permits that.
        case allowedByTrustOverride
        /// The load fails with `error`.
        case blocked
    }

    public let outcome: Outcome
    public let url: String
    public let host: String
    /// NSURLErrorDomain code (nil when allowed).
    public let error: NSURLErrorCode?
    /// The `[domain:code]` pair, e.g. 3 and -9802.
    public let streamDomain: Int?
    public let streamCode: Int?
    /// Which trust evaluation logged the failure (nil for handshake and transport failures).
    public let trustEvaluation: TrustPolicy.Kind?
    /// Every requirement the server broke (empty for handshake/transport failures).
    public let violations: [ATSViolation]
    /// Why no summary exists (handshake or transport failure).
    public let attemptFailure: AttemptFailure?
    /// One sentence per problem, in plain words.
    public let reasons: [String]
    /// The smallest Info.plist change that allows the load, or why none can.
    public var fix: String?
    /// What the explanation probe found the server offers (handshake failures only).
    public var serverOffer: ServerOffer?
    /// The enforcement handshake's summary, when the handshake completed.
    public let summary: HandshakeSummary?

    public var isBlocked: Bool { outcome == .blocked }

    /// The stream error (`3:-9802`) a failed verdict carries; nil when allowed or without one.
    public var streamError: StreamError? {
        guard let streamDomain, let streamCode else { return nil }
        return StreamError(domain: streamDomain, code: streamCode)
    }

    /// `[3:-9802]`.
    public var streamPair: String? { streamError.map { "[\($0)]" } }

    /// The rule in plain words (the reasons, joined), with the probe's finding when there is one.
    public var rule: String {
        var parts = reasons
        if let offer = serverOffer, !offer.sentence.isEmpty { parts.append(offer.sentence) }
        return parts.joined(separator: "; ")
    }

    /// The CFNetwork console lines a device prints for this failure (empty when allowed).
    public func consoleLines(platform: Platform, context: ConsoleContext) -> [String] {
        guard outcome == .blocked, let error, let streamDomain, let streamCode else { return [] }
        if streamDomain != 3 {
            return CFNetworkConsole.connectionFailed(
                url: url, host: host, code: error, streamDomain: streamDomain, streamCode: streamCode,
                platform: platform,
                context: context)
        }
        return CFNetworkConsole.secureLoadFailed(
            url: url, host: host, code: error, streamDomain: streamDomain, streamCode: streamCode,
            trust: trustEvaluation,
            platform: platform, context: context)
    }

    /// `Error Domain=NSURLErrorDomain Code=… "…" UserInfo={…}`.
    public func errorText(platform: Platform, context: ConsoleContext) -> String? {
        guard outcome == .blocked, let error else { return nil }
        if streamDomain != 3 {
            return CFNetworkConsole.connectionErrorText(
                code: error, url: url, host: host, platform: platform, context: context, streamDomain: streamDomain,
                streamCode: streamCode)
        }
        return CFNetworkConsole.errorText(
            code: error, url: url, host: host, platform: platform, context: context, streamDomain: streamDomain,
            streamCode: streamCode)
    }

    init(
        outcome: Outcome, url: String, host: String, error: NSURLErrorCode?, streamDomain: Int?, streamCode: Int?,
        trustEvaluation: TrustPolicy.Kind?, violations: [ATSViolation], attemptFailure: AttemptFailure?,
        reasons: [String],
        summary: HandshakeSummary?
    ) {
        self.outcome = outcome
        self.url = url
        self.host = host
        self.error = error
        self.streamDomain = streamDomain
        self.streamCode = streamCode
        self.trustEvaluation = trustEvaluation
        self.violations = violations
        self.attemptFailure = attemptFailure
        self.reasons = reasons
        self.summary = summary
    }

    // MARK: - Building verdicts

    /// The verdict for a completed handshake: judges `summary` against `requirements`.
    public static func judging(
        _ summary: HandshakeSummary, requirements: TLSRequirements, url: String, host: String
    ) -> UpstreamVerdict {
        let violations = UpstreamJudge(requirements: requirements).violations(of: summary)
        let reasons = violations.map { Self.sentence($0, requirements: requirements, summary: summary) }
        func blocked(_ code: NSURLErrorCode, _ stream: Int, trust: TrustPolicy.Kind?) -> UpstreamVerdict {
            UpstreamVerdict(
                outcome: .blocked, url: url, host: host, error: code, streamDomain: 3, streamCode: stream,
                trustEvaluation: trust, violations: violations, attemptFailure: nil, reasons: reasons, summary: summary)
        }
        for violation in violations {
            switch violation {
            case .protocolVersion:
                return blocked(.secureConnectionFailed, -9836, trust: nil)
            case .cipherSuite, .notForwardSecret:
                return blocked(.secureConnectionFailed, -9824, trust: nil)
            case .trust, .pinMismatch:
                continue
            }
        }
        if violations.contains(where: { if case .pinMismatch = $0 { true } else { false } }) {
            return blocked(.secureConnectionFailed, -9802, trust: .ats)
        }
        let problems = violations.compactMap { violation -> TrustProblem? in
            if case .trust(let problem) = violation { return problem }
            return nil
        }
        guard let first = problems.first else {
            return UpstreamVerdict(
                outcome: .allowed, url: url, host: host, error: nil, streamDomain: nil, streamCode: nil,
                trustEvaluation: nil,
                violations: [], attemptFailure: nil, reasons: [], summary: summary)
        }
        if requirements.trust.appOverrides {
            return UpstreamVerdict(
                outcome: .allowedByTrustOverride, url: url, host: host, error: nil, streamDomain: nil, streamCode: nil,
                trustEvaluation: requirements.trust.kind, violations: violations, attemptFailure: nil, reasons: reasons,
                summary: summary)
        }
        switch requirements.trust.kind {
        case .ats:
            return blocked(.secureConnectionFailed, -9802, trust: .ats)
        case .standard:
            let (code, stream) = standardTrustCode(first)
            return blocked(code, stream, trust: .standard)
        }
    }

    /// Default-trust (non-ATS) codes of reference §4.3. Documented defaults where the reference is
    /// uncertain: not-yet-valid is -1201 [3:-9815]; a self-signed leaf or a missing issuer is
    /// -1202 [3:-9813] ("no root", as vector 58 shows); everything else is -1202 [3:-9807].
    static func standardTrustCode(_ problem: TrustProblem) -> (NSURLErrorCode, Int) {
        switch problem {
        case .hostnameMismatch: (.serverCertificateUntrusted, -9843)
        case .expired: (.serverCertificateHasBadDate, -9814)
        case .notYetValid: (.serverCertificateHasBadDate, -9815)
        case .selfSignedLeaf, .issuerNotFound: (.serverCertificateUntrusted, -9813)
        case .noCertificate, .untrustedRoot, .weakKey, .weakSignatureHash, .missingServerAuthEKU, .validityTooLong,
            .certificateTransparency, .badSignature, .other:
            (.serverCertificateUntrusted, -9807)
        }
    }

    /// The verdict for a handshake or transport failure (reference §4.3). Documented defaults:
    /// close without alert is -9816; bytes that are not TLS are -9800 (errSSLProtocol); an
    /// unparseable certificate is -9808; a reset during the handshake is -9806 (errSSLClosedAbort);
    /// POSIX pairs use Darwin errno values (61, 60, 54).
    public static func failed(
        _ failure: AttemptFailure, requirements: TLSRequirements, url: String, host: String
    ) -> UpstreamVerdict {
        let code: NSURLErrorCode
        let domain: Int
        let stream: Int
        let reason: String
        switch failure {
        case .transport(let transport):
            switch transport {
            case .nameNotResolved:
                (code, domain, stream) = (.cannotFindHost, 12, 8)
                reason = "the host name \(host) could not be resolved"
            case .refused:
                (code, domain, stream) = (.cannotConnectToHost, 1, 61)
                reason = "the server refused the TCP connection"
            case .timedOut:
                (code, domain, stream) = (.timedOut, 1, 60)
                reason = "the server did not complete the connection or TLS handshake before the timeout"
            case .noResponse:
                (code, domain, stream) = (.timedOut, 1, 60)
                reason = "the connection to the server was open, but no response head arrived before the timeout"
            case .requestStalled(let bytes):
                (code, domain, stream) = (.timedOut, 1, 60)
                reason =
                    "the request body stopped moving before the timeout: \(bytes) bytes of it had arrived from the client (the client stopped sending, or the server stopped reading; the connection was open)"
            case .reset:
                (code, domain, stream) = (.networkConnectionLost, 1, 54)
                reason = "the server reset the connection"
            case .other(let text):
                (code, domain, stream) = (.cannotConnectToHost, 1, 65)
                reason = "the connection failed: \(text)"
            }
        case .handshake(let tls):
            (code, domain) = (.secureConnectionFailed, 3)
            let allowed =
                requirements.minimumVersion == requirements.maximumVersion
                ? requirements.minimumVersion.displayName
                : "\(requirements.minimumVersion.displayName)–\(requirements.maximumVersion.displayName)"
            switch tls.reason {
            case .receivedAlert(70), .noCommonVersion:
                stream = -9836
                reason = "the server accepts none of the TLS versions this host allows (\(allowed))"
            case .receivedAlert(40), .noCommonCipher:
                stream = -9824
                reason = "the server accepts none of the cipher suites this host allows (handshake_failure)"
            case .receivedAlert(let alert):
                stream = Self.alertCode(alert)
                reason = "the server aborted the handshake with a fatal \(TLSAlert.name(alert)) alert"
            case .closedWithoutAlert:
                stream = -9816
                reason = "the server closed the connection during the TLS handshake without an alert"
            case .resetDuringHandshake:
                stream = -9806
                reason = "the server reset the connection during the TLS handshake"
            case .notTLS:
                stream = -9800
                reason = "the server did not answer with TLS (is it plain HTTP or another protocol on this port?)"
            case .badCertificate:
                stream = -9808
                reason = "the server's certificate could not be parsed"
            case .other:
                stream = -9800
                reason = "the TLS handshake failed: \(tls.description)"
            }
        }
        return UpstreamVerdict(
            outcome: .blocked, url: url, host: host, error: code, streamDomain: domain, streamCode: stream,
            trustEvaluation: nil,
            violations: [], attemptFailure: failure, reasons: [reason], summary: nil)
    }

    /// The verdict when no version can satisfy the requirements (e.g. TLS 1.3 required on an OS
    /// without it): no handshake is attempted; -1200 [3:-9800] as nscurl showed on macOS 10.14.
    public static func unsatisfiable(requirements: TLSRequirements, url: String, host: String) -> UpstreamVerdict {
        UpstreamVerdict(
            outcome: .blocked, url: url, host: host, error: .secureConnectionFailed, streamDomain: 3, streamCode: -9800,
            trustEvaluation: nil, violations: [], attemptFailure: nil,
            reasons: [
                "no TLS version satisfies both the minimum \(requirements.minimumVersion.displayName) and the platform's maximum \(requirements.maximumVersion.displayName)"
            ], summary: nil)
    }

    /// errSSLPeer… codes for received alerts (reference §4.2).
    static func alertCode(_ alert: UInt8) -> Int {
        switch alert {
        case 10: -9819
        case 20: -9820
        case 21: -9821
        case 22: -9822
        case 30: -9823
        case 40: -9824
        case 42: -9825
        case 43: -9826
        case 44: -9827
        case 45: -9828
        case 46: -9829
        case 47: -9830
        case 48: -9831
        case 49: -9832
        case 50: -9833
        case 51: -9834
        case 60: -9835
        case 70: -9836
        case 71: -9837
        case 80: -9838
        case 90: -9839
        case 100: -9840
        case 109: -9861
        case 110: -9855
        case 112: -9865
        case 116: -9863
        default: -9802
        }
    }

    // MARK: - Plain words

    static func sentence(_ violation: ATSViolation, requirements: TLSRequirements, summary: HandshakeSummary) -> String
    {
        switch violation {
        case .protocolVersion(let negotiated, let minimum):
            return "the server negotiated \(negotiated.displayName); this host requires \(minimum.displayName) or later"
        case .cipherSuite(let name):
            return "the server chose \(name), which is not in the cipher suite list ATS allows for this host"
        case .notForwardSecret(let name):
            return
                "the server chose \(name), a static-RSA suite without forward secrecy; ATS requires ECDHE key exchange"
        case .pinMismatch(let leaf, let domains):
            let key = leaf ? ATSKey.pinnedLeafIdentities : ATSKey.pinnedCAIdentities
            return
                "the certificate chain matches none of the \(key) of \(ATSKey.pinnedDomains) → \(domains.joined(separator: ", "))"
        case .trust(let problem):
            return trustSentence(problem, requirements: requirements, summary: summary)
        }
    }

    /// Why the certificate misses Apple's CT policy, in plain words.
    static func ctSentence(valid: Int, required: Int, shortfall: CTShortfall) -> String {
        let policy = "Certificate Transparency is required (Apple's CT policy)"
        switch shortfall {
        case .tooFewSCTs:
            return
                "\(policy) but \(valid) SCT\(valid == 1 ? "" : "s") from approved logs count\(valid == 1 ? "s" : "") (\(required) needed)"
        case .operatorDiversity:
            return
                "\(policy) but too many SCTs come from one log operator: \(valid) count after the per-operator limit (\(required) needed)"
        case .noRFC6962Log:
            return "\(policy) but no counted SCT comes from an RFC 6962 log (only static-ct-api logs)"
        case .noCurrentlyApprovedLog:
            return "\(policy) but no embedded SCT comes from a currently approved log (only from retired logs)"
        }
    }

    static func trustSentence(_ problem: TrustProblem, requirements: TLSRequirements, summary: HandshakeSummary)
        -> String
    {
        let formatter = ISO8601DateFormatter()
        func which(_ depth: Int) -> String {
            depth == 0 ? "the server certificate" : "certificate \(depth) of the chain"
        }
        switch problem {
        case .noCertificate:
            return "the server sent no certificate"
        case .expired(let depth, let notAfter):
            return "\(which(depth)) expired on \(formatter.string(from: notAfter))"
        case .notYetValid(let depth, let notBefore):
            return "\(which(depth)) is not valid until \(formatter.string(from: notBefore))"
        case .selfSignedLeaf:
            return "the server certificate is self-signed and not a trusted root"
        case .untrustedRoot(let subject):
            return
                "the chain ends in the root \(subject), which is not trusted (install it on the device; here: --upstream-ca FILE)"
        case .issuerNotFound(let depth, let issuer):
            return
                "\(which(depth)) was issued by \(issuer), which the server did not send and no trusted root provides (a missing intermediate or an unknown root)"
        case .hostnameMismatch(let names, let commonNameOnly):
            if commonNameOnly {
                return
                    "\(summary.host) appears only in the certificate's common name; \(PlatformFeature.strictServerCertificates.since) and later require it in the Subject Alternative Name"
            }
            return
                "the certificate is for \(names.isEmpty ? "no DNS name" : names.joined(separator: ", ")), not \(summary.host)"
        case .weakKey(let depth, let key, let minimumBits):
            // "an RSA 1024-bit key", "an EC 224-bit key": the article follows the letters as they are spoken.
            let spoken = "\(key)"
            let article = spoken.hasPrefix("RSA") || spoken.hasPrefix("EC") ? "an" : "a"
            return "\(which(depth)) has \(article) \(key)-bit key; at least \(minimumBits) bits are required"
        case .weakSignatureHash(let depth, let hash, let minimum):
            return "\(which(depth)) is signed with \(hash.rawValue); \(minimum.rawValue) or stronger is required"
        case .missingServerAuthEKU(let present):
            return present
                ? "the server certificate's extended key usage does not include serverAuth"
                : "the server certificate has no extended key usage extension; certificates issued after 2019-07-01 need serverAuth"
        case .validityTooLong(let days, let maximumDays, let anchors):
            return
                "the server certificate is valid for \(days) days; certificates from \(anchors == .system ? "system-trusted" : "user-installed") roots may be valid for at most \(maximumDays)"
        case .certificateTransparency(let valid, let required, let shortfall):
            return ctSentence(valid: valid, required: required, shortfall: shortfall)
        case .badSignature(let depth):
            return "the signature on \(which(depth)) does not verify"
        case .other(let text):
            return "certificate verification failed: \(text)"
        }
    }
}
