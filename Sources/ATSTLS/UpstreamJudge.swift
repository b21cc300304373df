import ATSPolicy
internal import COpenSSL
import Foundation

/// A certificate-trust problem, in ATS's terms (reference §3.1, §3.2, §3.4).
public enum TrustProblem: Sendable, Hashable {
    /// The server sent no certificate.
    case noCertificate
    /// A certificate of the chain has expired.
    case expired(depth: Int, notAfter: Date)
    /// A certificate of the chain is not valid yet.
    case notYetValid(depth: Int, notBefore: Date)
    /// The leaf is self-signed and not a trusted anchor.
    case selfSignedLeaf
    /// The chain ends in a self-signed root that is not trusted.
    case untrustedRoot(subject: String)
    /// No certificate for an issuer: an intermediate is missing or the root is unknown.
    case issuerNotFound(depth: Int, issuer: String)
    /// The host is not in the SAN (`commonNameOnly`: only the CN names it, which iOS 13+ ignores).
    case hostnameMismatch(names: [String], commonNameOnly: Bool)
    /// A key below the minimum size.
    case weakKey(depth: Int, key: KeyAlgorithm, minimumBits: Int)
    /// A signature hash below the minimum.
    case weakSignatureHash(depth: Int, hash: SignatureHash, minimum: SignatureHash)
    /// The leaf has no serverAuth EKU (`present`: an EKU extension exists without serverAuth).
    case missingServerAuthEKU(present: Bool)
    /// The leaf's lifetime exceeds the cap.
    case validityTooLong(days: Int, maximumDays: Int, anchors: ValidityCap.Anchors)
    /// The SCTs miss Apple's CT policy where CT is required (`validSCTs`: how many count).
    case certificateTransparency(validSCTs: Int, required: Int, shortfall: CTShortfall = .tooFewSCTs)
    /// A signature in the chain does not verify.
    case badSignature(depth: Int)
    /// Any other verification error (OpenSSL's text).
    case other(String)
}

/// Whether Certificate Transparency applied to one handshake, and its outcome.
public enum CTStatus: Sendable, Hashable {
    /// CT does not apply (a user-installed root, a certificate before the CT date, an older OS).
    case notRequired
    /// CT applies (a system-rooted chain) but no current log list is loaded: nothing was checked.
    case notEvaluated
    /// Apple's policy is met.
    case complies(CTPolicyResult)
    /// Apple's policy is not met.
    case fails(CTPolicyResult)

    /// What the log, report and HAR say about CT for this handshake (nil when it does not apply).
    public var text: String? {
        switch self {
        case .notRequired:
            nil
        case .notEvaluated:
            Self.notEvaluatedText
        case .complies(let result):
            "complies (\(result.path == .delivered ? "TLS-extension/OCSP SCTs" : "embedded SCTs"), \(result.counted) counted)"
        case .fails(let result):
            "fails (\(result.counted) of \(result.required) SCTs count)"
        }
    }

    /// The sentence for a system-rooted certificate CT could not be checked for.
    public static let notEvaluatedText = "CT not evaluated: run `ats-proxy ct update`"
}

/// One way a handshake summary breaks the requirements.
public enum ATSViolation: Sendable, Hashable {
    /// The negotiated version is below the minimum.
    case protocolVersion(negotiated: TLSProtocolVersion, minimum: TLSProtocolVersion)
    /// The negotiated suite is not in the allowed list.
    case cipherSuite(ianaName: String)
    /// The key exchange is not forward secret but forward secrecy is required.
    case notForwardSecret(ianaName: String)
    /// Certificate trust.
    case trust(TrustProblem)
    /// The chain matches none of the NSPinnedDomains identities (`leaf` or CA pins).
    case pinMismatch(leaf: Bool, domains: [String])
}

/// Judges a `HandshakeSummary` against `TLSRequirements` in our own code, because OpenSSL's
/// handshake accepts what Apple refuses (CN-only names, missing EKU, long validity, SHA-224,
/// static RSA). Pure; no I/O.
public struct UpstreamJudge: Sendable {
    public let requirements: TLSRequirements

    public init(requirements: TLSRequirements) { self.requirements = requirements }

    /// Every violation, handshake-level first, then trust, then pins.
    public func violations(of summary: HandshakeSummary) -> [ATSViolation] {
        var found: [ATSViolation] = []
        if summary.version < requirements.minimumVersion {
            found.append(.protocolVersion(negotiated: summary.version, minimum: requirements.minimumVersion))
        }
        if !requirements.cipherSuites.contains(where: { $0.code == summary.cipher.code }) {
            found.append(.cipherSuite(ianaName: summary.cipher.ianaName))
        } else if requirements.forwardSecrecyRequired && !summary.forwardSecret {
            found.append(.notForwardSecret(ianaName: summary.cipher.ianaName))
        }
        found.append(contentsOf: trustProblems(summary).map(ATSViolation.trust))
        if let pins = requirements.pins, let violation = pinViolation(pins, summary) { found.append(violation) }
        return found
    }

    /// Certificate problems, most fundamental first.
    public func trustProblems(_ summary: HandshakeSummary) -> [TrustProblem] {
        guard let leaf = summary.leaf else { return [.noCertificate] }
        var problems: [TrustProblem] = []
        let chain = summary.builtChain.isEmpty ? summary.presentedChain : summary.builtChain
        for issue in summary.verificationIssues {
            let problem: TrustProblem?
            switch issue.code {
            case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
                problem = .selfSignedLeaf
            case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
                problem = .untrustedRoot(subject: chain.last?.subject ?? "")
            case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
                X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
                let depth = min(issue.depth, chain.count - 1)
                problem = .issuerNotFound(depth: issue.depth, issuer: depth >= 0 ? chain[depth].issuer : "")
            case X509_V_ERR_CERT_HAS_EXPIRED:
                problem = .expired(
                    depth: issue.depth, notAfter: issue.depth < chain.count ? chain[issue.depth].notAfter : .distantPast
                )
            case X509_V_ERR_CERT_NOT_YET_VALID:
                problem = .notYetValid(
                    depth: issue.depth,
                    notBefore: issue.depth < chain.count ? chain[issue.depth].notBefore : .distantFuture)
            case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
                let commonNameMatches = leaf.commonName.map { Self.nameMatches($0, summary.host) } ?? false
                if !requirements.requireSubjectAltName && commonNameMatches && leaf.dnsNames.isEmpty {
                    problem = nil  // before iOS 13 the CN still counts when there is no SAN
                } else {
                    problem = .hostnameMismatch(
                        names: leaf.dnsNames + leaf.ipAddresses,
                        commonNameOnly: commonNameMatches && leaf.dnsNames.isEmpty)
                }
            case X509_V_ERR_CERT_SIGNATURE_FAILURE:
                problem = .badSignature(depth: issue.depth)
            case X509_V_ERR_INVALID_PURPOSE:
                problem = issue.depth == 0 ? .missingServerAuthEKU(present: true) : .other(issue.text)
            case X509_V_ERR_EE_KEY_TOO_SMALL, X509_V_ERR_CA_KEY_TOO_SMALL, X509_V_ERR_CA_MD_TOO_WEAK:
                problem = nil  // judged below against the emulated platform's minimums
            default:
                problem = .other(issue.text)
            }
            if let problem, !problems.contains(problem) { problems.append(problem) }
        }
        for (depth, certificate) in chain.enumerated() {
            switch certificate.key {
            case .rsa(let bits) where bits < requirements.minimumRSAKeyBits:
                problems.append(
                    .weakKey(depth: depth, key: certificate.key, minimumBits: requirements.minimumRSAKeyBits))
            case .ec(let bits) where bits < requirements.minimumECKeyBits:
                problems.append(
                    .weakKey(depth: depth, key: certificate.key, minimumBits: requirements.minimumECKeyBits))
            case .rsa, .ec, .other:
                break
            }
            if !certificate.isSelfSigned, let hash = certificate.signatureHash, hash < requirements.minimumSignatureHash
            {
                problems.append(
                    .weakSignatureHash(depth: depth, hash: hash, minimum: requirements.minimumSignatureHash))
            }
        }
        if let date = requirements.requireServerAuthEKUIssuedAfter, leaf.notBefore >= date, !leaf.hasExtendedKeyUsage {
            problems.append(.missingServerAuthEKU(present: false))
        }
        let anchors: ValidityCap.Anchors = summary.anchor == .system ? .system : .userInstalled
        let lifetime = leaf.notAfter.timeIntervalSince(leaf.notBefore)
        for cap in requirements.validityCaps where cap.anchors == anchors && leaf.notBefore >= cap.notBeforeOnOrAfter {
            if lifetime > TimeInterval(cap.maximumDays) * 86400 + TimeInterval(cap.slackSeconds) {
                let problem = TrustProblem.validityTooLong(
                    days: Int((lifetime / 86400).rounded(.down)), maximumDays: cap.maximumDays, anchors: anchors)
                if !problems.contains(where: { if case .validityTooLong = $0 { true } else { false } }) {
                    problems.append(problem)
                }
            }
        }
        if case .fails(let result) = ctStatus(summary), let shortfall = result.shortfall {
            problems.append(
                .certificateTransparency(validSCTs: result.counted, required: result.required, shortfall: shortfall))
        }
        return problems
    }

    /// Whether CT applies to this handshake and, when it does, what Apple's policy says.
    public func ctStatus(_ summary: HandshakeSummary) -> CTStatus {
        guard let leaf = summary.leaf else { return .notRequired }
        let ct = requirements.certificateTransparency
        var required = ct.allChains
        if !required, let date = ct.systemRootsIssuedOnOrAfter, summary.anchor == .system, leaf.notBefore >= date,
            leaf.notAfter > summary.time
        {
            // Without a (fresh) log list SCTs cannot be validated: system-rooted CT is reported, not enforced.
            guard summary.ctLogsAvailable else { return .notEvaluated }
            required = true
        }
        guard required else { return .notRequired }
        let result = AppleCTPolicy.evaluate(
            notBefore: leaf.notBefore, notAfter: leaf.notAfter, scts: summary.scts, at: summary.time)
        return result.complies ? .complies(result) : .fails(result)
    }

    func pinViolation(_ pins: PinRequirement, _ summary: HandshakeSummary) -> ATSViolation? {
        if let leafPins = pins.leafSPKISHA256 {
            guard let leaf = summary.presentedChain.first, leafPins.contains(leaf.spkiSHA256) else {
                return .pinMismatch(leaf: true, domains: pins.domains)
            }
        }
        if let caPins = pins.caSPKISHA256 {
            let chain = summary.builtChain.count > 1 ? summary.builtChain : summary.presentedChain
            guard chain.dropFirst().contains(where: { caPins.contains($0.spkiSHA256) }) else {
                return .pinMismatch(leaf: false, domains: pins.domains)
            }
        }
        return nil
    }

    static func nameMatches(_ pattern: String, _ host: String) -> Bool {
        let pattern = pattern.lowercased()
        let host = host.lowercased()
        if pattern == host { return true }
        if pattern.hasPrefix("*."), let dot = host.firstIndex(of: ".") { return host[dot...] == pattern.dropFirst() }
        return false
    }
}
