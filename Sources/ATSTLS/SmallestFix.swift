import ATSPolicy
import Foundation

/// The smallest Info.plist change that lets a blocked HTTPS load through, or why none can: one
/// computation shared by `diagnose` (through ATSDiagnose's `UpstreamChecker`), the proxy's log lines, its
/// 502/504 bodies and `X-ATS-Fix` headers, and so the session report, which reads the fix from
/// the request records.
///
/// Candidates (an exception's minimum TLS version, the forward-secrecy waiver, insecure HTTP
/// loads, and a delegate that overrides trust) are tried smallest first: each changes the app's
/// configuration, and the load passes when the handshake summary, judged again under the changed
/// requirements, has no violation. When there is no summary (the server refused the handshake),
/// `retry` performs a new handshake under the changed requirements; without it (the proxy, which
/// cannot hold a client while it probes) the answer says what is known and names `diagnose`.
/// Pure apart from `retry`.
public struct SmallestFix: Sendable {
    public let policy: PolicyContext

    public init(policy: PolicyContext) {
        self.policy = policy
    }

    /// One candidate change to the host's exception entry.
    struct Change: Hashable {
        var minimumTLS: TLSProtocolVersion?
        var noForwardSecrecy = false
        var insecureHTTP = false
        var trustOverride = false

        var size: Int {
            (minimumTLS == nil ? 0 : 1) + (noForwardSecrecy ? 1 : 0) + (insecureHTTP ? 1 : 0) + (trustOverride ? 1 : 0)
        }
    }

    /// The fix text for a blocked `verdict` of `target`.
    public func text(
        for verdict: UpstreamVerdict, target: RequestTarget, retry: ((TLSRequirements) -> Bool)?
    ) -> String {
        let decision = policy.decide(target)
        if let pin = verdict.violations.first(where: { if case .pinMismatch = $0 { true } else { false } }),
            case .pinMismatch(let leaf, let domains) = pin
        {
            let digest =
                (leaf ? verdict.summary?.leaf?.spkiSHA256 : verdict.summary?.builtChain.dropFirst().first?.spkiSHA256)?
                .base64EncodedString() ?? "?"
            return
                "add { \(ATSKey.spkiSHA256) = \"\(digest)\" } to \(leaf ? ATSKey.pinnedLeafIdentities : ATSKey.pinnedCAIdentities) of \(ATSKey.pinnedDomains) → \(domains.joined(separator: ", ")) (exception keys cannot relax a pin)"
        }
        if case .transport(let failure) = verdict.attemptFailure {
            switch failure {
            case .noResponse, .requestStalled:
                return "no Info.plist change is involved: ATS allowed the connection; the exchange stalled after it"
            case .nameNotResolved, .refused, .timedOut, .reset, .other:
                break
            }
            return "no Info.plist change can allow this: the connection fails before TLS"
        }
        let key = decision.exceptionKey ?? target.host
        let serverMust = Self.serverRequirement(verdict)
        var unverifiable = false
        for change in candidates(verdict, decision: decision) {
            let requirements = changedRequirements(change, key: key, target: target)
            let passes: Bool
            if let summary = verdict.summary {
                passes = !UpstreamVerdict.judging(
                    summary, requirements: requirements, url: target.url, host: target.host
                )
                .isBlocked
            } else if Self.isHandshakeFailure(verdict) || !decision.requirements.isSatisfiable {
                guard let retry else {
                    unverifiable = true
                    break
                }
                passes = retry(requirements)
            } else {
                passes = false
            }
            guard passes else { continue }
            let text = describe(change, key: key, host: target.host)
            return change.trustOverride ? text + "; otherwise the server must \(serverMust)" : text
        }
        if unverifiable, let hint = hint(verdict, decision: decision, key: key, target: target) { return hint }
        return "no Info.plist change can allow this; the server must \(serverMust)"
    }

    /// Every candidate change, smallest first, delegate routes last.
    private func candidates(_ verdict: UpstreamVerdict, decision: ATSDecision) -> [Change] {
        var versions: [TLSProtocolVersion] = []
        if let offered = verdict.serverOffer?.highestVersion, offered < decision.requirements.minimumVersion {
            versions.append(offered)
        }
        for case .protocolVersion(let negotiated, _) in verdict.violations where !versions.contains(negotiated) {
            versions.append(negotiated)
        }
        var candidates: [Change] = []
        for override in [false, true] {
            for http in [false, true] where !override || http {
                for pfs in [false, true] {
                    for version in [nil] + versions.map(Optional.some) {
                        candidates.append(
                            Change(
                                minimumTLS: version, noForwardSecrecy: pfs, insecureHTTP: http, trustOverride: override)
                        )
                    }
                }
            }
        }
        candidates = candidates.filter { $0.size > 0 }
        candidates.sort { ($0.trustOverride ? 1 : 0, $0.size) < ($1.trustOverride ? 1 : 0, $1.size) }
        return candidates
    }

    /// The requirements for `target` once `change` is made to the exception entry `key`.
    private func changedRequirements(_ change: Change, key: String, target: RequestTarget) -> TLSRequirements {
        var configuration = policy.configuration
        var entry = configuration.exceptionDomains[key] ?? ExceptionDomain(key: key)
        if let version = change.minimumTLS {
            entry.minimumTLSVersion = version
            entry.minimumTLSVersionSpecified = true
        }
        if change.noForwardSecrecy { entry.requiresForwardSecrecy = false }
        if change.insecureHTTP { entry.allowsInsecureHTTPLoads = true }
        configuration.exceptionDomains[key] = entry
        var options = policy.options
        if change.trustOverride { options.trustOverrideHosts.append(target.host) }
        return PolicyContext(configuration: configuration, options: options).decide(target).requirements
    }

    private static func isHandshakeFailure(_ verdict: UpstreamVerdict) -> Bool {
        if case .handshake = verdict.attemptFailure { return true }
        return false
    }

    /// What can be said without another handshake when the server refused this one.
    private func hint(_ verdict: UpstreamVerdict, decision: ATSDecision, key: String, target: RequestTarget)
        -> String?
    {
        let diagnose = "'ats-proxy diagnose \(target.url)' with the app's --config finds out and checks the change"
        let entry = "\(ATSKey.exceptionDomains) → \(key)"
        guard case .handshake(let failure) = verdict.attemptFailure else {
            // The policy asks for a TLS version the platform does not have.
            return "lower or remove \(ATSKey.exceptionMinimumTLSVersion) in \(entry) (\(verdict.rule))"
        }
        switch failure.reason {
        case .receivedAlert(70), .noCommonVersion:
            guard decision.requirements.minimumVersion > .tls10 else { return nil }
            return
                "the server refused \(decision.requirements.minimumVersion.displayName) and later; if it supports an older version, set \(ATSKey.exceptionMinimumTLSVersion) in \(entry) to that version (\(diagnose))"
        case .receivedAlert(40), .noCommonCipher:
            guard decision.requirements.forwardSecrecyRequired else { return nil }
            return
                "the server refused every forward-secret cipher suite; if it has static-RSA suites, set \(ATSKey.exceptionRequiresForwardSecrecy) to NO in \(entry) (\(diagnose))"
        case .receivedAlert, .notTLS, .closedWithoutAlert, .resetDuringHandshake, .badCertificate, .other:
            return nil
        }
    }

    func describe(_ change: Change, key: String, host: String) -> String {
        var keys: [String] = []
        if let version = change.minimumTLS { keys.append("\(ATSKey.exceptionMinimumTLSVersion) = \(version.rawValue)") }
        if change.noForwardSecrecy { keys.append("\(ATSKey.exceptionRequiresForwardSecrecy) = NO") }
        if change.insecureHTTP { keys.append("\(ATSKey.exceptionAllowsInsecureHTTPLoads) = YES") }
        let existing = policy.configuration.exceptionDomains[key] != nil
        let where_ =
            existing
            ? "add \(englishList(keys)) to \(ATSKey.exceptionDomains) → \(key)"
            : "add \(ATSKey.exceptionDomains) → \(key) with \(englishList(keys))"
        let review = change.insecureHTTP || (change.minimumTLS.map { $0 < .tls12 } ?? false)
        var text = where_ + (review ? "; App Review will ask for a justification" : "")
        if change.trustOverride {
            text =
                "no Info.plist change alone can allow this: only an app whose URLSession delegate accepts this server's trust can load it, and ATS permits that only after you \(where_) (emulate the delegate with --trust-override \(host))"
        }
        return text
    }

    /// What the server must change, in plain words, from the verdict's first trust problem (or
    /// its handshake failure).
    static func serverRequirement(_ verdict: UpstreamVerdict) -> String {
        for case .trust(let problem) in verdict.violations {
            return trustRequirement(problem)
        }
        for violation in verdict.violations {
            switch violation {
            case .protocolVersion(_, let minimum): return "accept \(minimum.displayName) or later"
            case .cipherSuite, .notForwardSecret: return "offer a cipher suite ATS allows (see 'ats-proxy explain')"
            case .trust, .pinMismatch: continue
            }
        }
        if case .handshake(let failure) = verdict.attemptFailure {
            switch failure.reason {
            case .receivedAlert(70), .noCommonVersion: return "accept the TLS versions ATS requires"
            case .receivedAlert(40), .noCommonCipher: return "offer a cipher suite ATS allows (see 'ats-proxy explain')"
            case .notTLS: return "speak TLS on this port"
            case .badCertificate: return "present a certificate the device can parse and trust"
            case .receivedAlert, .closedWithoutAlert, .resetDuringHandshake, .other:
                return "complete a TLS handshake with the requirements 'ats-proxy explain' lists"
            }
        }
        return "meet the requirements 'ats-proxy explain' lists for this host"
    }

    /// The server-side change that cures one trust problem.
    static func trustRequirement(_ problem: TrustProblem) -> String {
        let dates = ISO8601DateFormatter()
        dates.formatOptions = [.withFullDate]
        switch problem {
        case .noCertificate:
            return "present a certificate"
        case .expired(let depth, let notAfter):
            return
                "present a certificate chain that has not expired (the certificate at depth \(depth) expired on \(dates.string(from: notAfter)))"
        case .notYetValid(let depth, let notBefore):
            return
                "present a certificate chain that is already valid (the certificate at depth \(depth) starts on \(dates.string(from: notBefore)))"
        case .selfSignedLeaf:
            return
                "present a certificate issued by a CA the device trusts (this one is self-signed; a test device can instead install and trust it)"
        case .untrustedRoot(let subject):
            return
                "chain to a root the device trusts (\(subject) is not trusted; a test device can install and trust it as a profile)"
        case .issuerNotFound(let depth, let issuer):
            return
                "chain to a root the device trusts and send its intermediate certificates (no certificate was found for \(issuer), the issuer of the certificate at depth \(depth))"
        case .hostnameMismatch(let names, let commonNameOnly):
            return commonNameOnly
                ? "name the host in the certificate's subjectAltName (the common name alone is ignored)"
                : "present a certificate whose subjectAltName names this host (it names \(names.joined(separator: ", ")))"
        case .weakKey(_, _, let minimumBits):
            return "use keys of at least \(minimumBits) bits (RSA) in its chain"
        case .weakSignatureHash(_, let hash, let minimum):
            return "sign its certificates with \(minimum) or stronger (not \(hash))"
        case .missingServerAuthEKU:
            return "include serverAuth in the leaf certificate's extended key usage"
        case .validityTooLong(let days, let maximumDays, _):
            return "use a leaf certificate valid for at most \(maximumDays) days (this one: \(days))"
        case .certificateTransparency(let valid, let required, let shortfall):
            switch shortfall {
            case .tooFewSCTs:
                return "provide at least \(required) Certificate Transparency SCTs from approved logs (\(valid) count)"
            case .operatorDiversity:
                return
                    "provide \(required) SCTs from logs of at least two operators (\(valid) count after the per-operator limit)"
            case .noRFC6962Log:
                return "include an SCT from an RFC 6962 log (not only static-ct-api logs)"
            case .noCurrentlyApprovedLog:
                return "include an embedded SCT from a currently approved log (not only retired ones)"
            }
        case .badSignature(let depth):
            return "present a correctly signed chain (the signature at depth \(depth) does not verify)"
        case .other(let text):
            return "present a certificate chain the device trusts (\(text))"
        }
    }
}
