import ATSTLS

/// Which chain a verdict is about; the advice of a failure depends on it.
public enum AFChainRole: Sendable, Hashable {
    /// The chain the real server presents: would the app accept the production server?
    case real
    /// The chain the proxy mints for the host with its CA: does interception break the app?
    case interception
}

/// Why a trust evaluation (`AFServerTrustIsValid`) failed: the problems the verifier found.
public struct AFTrustFailure: Sendable, Hashable, CustomStringConvertible {
    /// Every problem, in the verifier's order.
    public let issues: [VerificationIssue]

    public init(issues: [VerificationIssue]) { self.issues = issues }

    /// The kinds of problem found.
    public var kinds: Set<VerificationIssueKind> { Set(issues.map(\.kind)) }

    /// The problems in words, e.g. "expired (depth 0); host name mismatch (depth 0)".
    public var description: String {
        guard !issues.isEmpty else { return "the evaluation failed" }
        return issues.map { "\(Self.words($0.kind, text: $0.text)) (depth \($0.depth))" }.joined(separator: "; ")
    }

    static func words(_ kind: VerificationIssueKind, text: String) -> String {
        switch kind {
        case .expired: "expired"
        case .notYetValid: "not yet valid"
        case .hostNameMismatch: "host name mismatch"
        case .untrustedAnchor: "no trusted anchor (\(text))"
        case .badSignature: "bad signature"
        case .invalidPurpose: "not valid for a TLS server"
        case .other: text
        }
    }
}

/// Why `evaluateServerTrust:forDomain:` returned YES.
public enum AFAcceptance: Sendable, Hashable {
    /// None mode, AC = YES, VD = NO: returned YES without evaluating anything.
    case withoutValidation
    /// None mode: the chain evaluated against the system's (and user-installed) anchors.
    case trustedChain(nameChecked: Bool)
    /// Certificate mode: the chain evaluated against the pinned anchors and holds the pinned certificate found
    /// first walking from the top of the evaluated chain (`depth` 0 = leaf).
    case pinnedCertificate(depth: Int)
    /// PublicKey mode: the certificates at these depths of the chain carry a pinned public key;
    /// `trustChecked` is false when AC = YES skipped the trust evaluation.
    case pinnedPublicKey(depths: [Int], trustChecked: Bool)
}

/// Why `evaluateServerTrust:forDomain:` returned NO.
public enum AFRefusal: Sendable, Hashable {
    /// AC = YES and VD = YES without pinning (mode None, or no pinned certificate): refused before any evaluation.
    case domainValidationNeedsPinning
    /// The evaluation against the system's (and user-installed) anchors failed (AC = NO).
    case chainNotTrusted(AFTrustFailure)
    /// Certificate mode: the evaluation with the pinned certificates as the only anchors failed.
    case pinnedAnchorsRejectChain(AFTrustFailure)
    /// Certificate mode: the evaluated chain holds none of the pinned certificates byte for byte.
    case noPinnedCertificateInChain
    /// PublicKey mode: no public key of the chain equals a pinned certificate's key.
    case noPinnedPublicKeyInChain
}

/// What AFNetworking decides for one chain: accepted (`YES`) or refused (`NO`), with the reason.
public enum AFVerdict: Sendable, Hashable {
    case accepted(AFAcceptance)
    case refused(AFRefusal)

    /// Whether the app goes on with the connection.
    public var isAccepted: Bool {
        switch self {
        case .accepted: true
        case .refused: false
        }
    }

    /// "ACCEPT" or "REFUSE".
    public var word: String { isAccepted ? "ACCEPT" : "REFUSE" }

    /// One line: what the verdict means for the app, with advice for a failure on `role`'s chain for `host`.
    public func meaning(for role: AFChainRole, host: String) -> String {
        switch self {
        case .accepted(let acceptance):
            return Self.meaning(acceptance, role: role)
        case .refused(let refusal):
            return Self.meaning(refusal, role: role, host: host)
        }
    }

    static func meaning(_ acceptance: AFAcceptance, role: AFChainRole) -> String {
        switch acceptance {
        case .withoutValidation:
            switch role {
            case .real:
                return
                    "accepted without any validation: the app would accept a forged server just as well (any man in the middle)"
            case .interception:
                return "accepted without any validation: interception works, and so would any attacker's"
            }
        case .trustedChain(let nameChecked):
            return nameChecked
                ? "the chain leads to a trusted root, is within its validity dates and names the host"
                : "the chain leads to a trusted root and is within its validity dates (the host name is not checked)"
        case .pinnedCertificate(let depth):
            return
                "the chain evaluates with the pinned certificates as anchors and holds a pinned certificate at depth \(depth)"
        case .pinnedPublicKey(let depths, let trustChecked):
            let at = depths.map(String.init).joined(separator: ", ")
            return trustChecked
                ? "the chain is trusted and carries a pinned public key (depth \(at))"
                : "the chain carries a pinned public key (depth \(at)); trust, validity dates and host name are not checked (allowInvalidCertificates = YES)"
        }
    }

    static func meaning(_ refusal: AFRefusal, role: AFChainRole, host: String) -> String {
        let bypass = "interception breaks this app; run with --passthrough \(host) or test with the real chain"
        switch refusal {
        case .domainValidationNeedsPinning:
            return
                "AFNetworking refuses every server under this policy (allowInvalidCertificates = YES with validatesDomainName = YES needs pinned certificates in PublicKey or Certificate mode); it logs \"In order to validate a domain name for self signed certificates, you MUST use pinning.\""
        case .chainNotTrusted(let failure):
            switch role {
            case .real:
                return
                    "the server's chain fails the app's trust evaluation (\(failure)): the app would refuse the production server"
            case .interception:
                return
                    "the interception chain fails the app's trust evaluation (\(failure)): install and trust the proxy's CA on the device, or run with --passthrough \(host)"
            }
        case .pinnedAnchorsRejectChain(let failure):
            switch role {
            case .real:
                return
                    "with the pinned certificates as its only anchors the server's chain fails evaluation (\(failure)): the app would refuse the production server; pin a certificate of this chain"
            case .interception:
                return
                    "the interception chain does not evaluate against the app's pinned certificates (\(failure)): \(bypass)"
            }
        case .noPinnedCertificateInChain:
            switch role {
            case .real:
                return
                    "the server's chain holds none of the pinned certificates: the app would refuse the production server"
            case .interception: return "the interception chain holds none of the pinned certificates: \(bypass)"
            }
        case .noPinnedPublicKeyInChain:
            switch role {
            case .real:
                return
                    "the app's pinned public keys match no certificate of the server's real chain: the app would refuse the production server (a rotated key or an out-of-date pin)"
            case .interception:
                return "the app's pinned public keys match no certificate of the interception chain: \(bypass)"
            }
        }
    }
}
