internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// The Security framework policy a chain is evaluated under, as an app sets it with `SecTrustSetPolicies`.
public enum TrustEvaluationPolicy: Sendable, Hashable {
    /// `SecPolicyCreateSSL(true, host)`: a TLS server chain (serverAuth purpose) whose leaf names `host`
    /// in its Subject Alternative Name.
    case ssl(host: String)
    /// `SecPolicyCreateBasicX509()`: signatures, validity dates and anchors only; no purpose, no name.
    case basicX509
}

/// What one verification issue means, in the terms an app's trust evaluation fails with.
public enum VerificationIssueKind: Sendable, Hashable {
    /// A certificate of the chain is past its notAfter date.
    case expired
    /// A certificate of the chain is before its notBefore date.
    case notYetValid
    /// The leaf does not name the host (SAN DNS name or IP address).
    case hostNameMismatch
    /// The chain ends in no anchor of the store (self-signed leaf, unknown root, missing issuer).
    case untrustedAnchor
    /// A signature of the chain does not verify.
    case badSignature
    /// A certificate is not allowed for a TLS server (extended key usage, basic constraints).
    case invalidPurpose
    /// Anything else OpenSSL reports.
    case other
}

extension VerificationIssue {
    /// The kind of this issue.
    public var kind: VerificationIssueKind {
        switch code {
        case X509_V_ERR_CERT_HAS_EXPIRED: return .expired
        case X509_V_ERR_CERT_NOT_YET_VALID: return .notYetValid
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: return .hostNameMismatch
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
            X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            return .untrustedAnchor
        case X509_V_ERR_CERT_SIGNATURE_FAILURE: return .badSignature
        case X509_V_ERR_INVALID_PURPOSE, X509_V_ERR_INVALID_CA: return .invalidPurpose
        default: return .other
        }
    }
}

extension TrustStore {
    /// Evaluates `chain` (leaf first, as presented) against this store's anchors under `policy` at `time`,
    /// the way `SecTrustEvaluate` does for an app: any anchor of the store ends a chain, a root or not
    /// (an anchor set with `SecTrustSetAnchorCertificates` may be a leaf or an intermediate), and every
    /// problem is collected. Unlike ``verify(chain:host:at:)`` the host name and the serverAuth purpose
    /// are checked only under ``TrustEvaluationPolicy/ssl(host:)``. Thread-safe.
    public func evaluate(chain: [Certificate], policy: TrustEvaluationPolicy, at time: Date) -> ChainVerification {
        var host: String?
        switch policy {
        case .ssl(let name): host = name
        case .basicX509: host = nil
        }
        guard let (issues, built) = runVerification(chain, at: time, serverHost: host, partialChain: true) else {
            return ChainVerification(issues: [], builtChain: [], anchor: nil)
        }
        var anchor: TrustAnchorKind?
        if !issues.contains(where: { $0.kind == .untrustedAnchor }), let top = built.last {
            let extra = Set(extraAnchors.map(\.sha256Fingerprint))
            anchor = extra.contains(top.sha256Fingerprint) ? .userInstalled : .system
        }
        return ChainVerification(issues: issues, builtChain: built, anchor: anchor)
    }
}
