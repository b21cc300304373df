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
        guard let leaf = chain.first else { return ChainVerification(issues: [], builtChain: [], anchor: nil) }
        guard let context = X509_STORE_CTX_new(), let untrusted = ats_sk_X509_new_null() else {
            return ChainVerification(
                issues: [VerificationIssue(code: -1, depth: 0, text: "out of memory")], builtChain: [], anchor: nil)
        }
        defer {
            X509_STORE_CTX_free(context)
            ats_sk_X509_free(untrusted)
        }
        for certificate in chain.dropFirst() { _ = ats_sk_X509_push(untrusted, certificate.pointer) }
        guard X509_STORE_CTX_init(context, store, leaf.pointer, untrusted) == 1 else {
            ERR_clear_error()
            return ChainVerification(
                issues: [VerificationIssue(code: -1, depth: 0, text: "cannot initialise verification")], builtChain: [],
                anchor: nil)
        }
        let parameters = X509_STORE_CTX_get0_param(context)
        X509_VERIFY_PARAM_set_time(parameters, time_t(time.timeIntervalSince1970))
        X509_VERIFY_PARAM_set_flags(parameters, UInt(X509_V_FLAG_PARTIAL_CHAIN))
        switch policy {
        case .ssl(let host):
            _ = X509_VERIFY_PARAM_set_purpose(parameters, X509_PURPOSE_SSL_SERVER)
            let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            if LeafCertificateCache.isIPAddress(bareHost) {
                _ = X509_VERIFY_PARAM_set1_ip_asc(parameters, bareHost)
            } else {
                X509_VERIFY_PARAM_set_hostflags(parameters, UInt32(X509_CHECK_FLAG_NEVER_CHECK_SUBJECT))
                _ = X509_VERIFY_PARAM_set1_host(parameters, bareHost, 0)
            }
        case .basicX509:
            break
        }
        let collector = EvaluationIssueCollector()
        _ = X509_STORE_CTX_set_ex_data(context, 0, Unmanaged.passUnretained(collector).toOpaque())
        X509_STORE_CTX_set_verify_cb(context) { ok, context in
            guard ok == 0, let context, let raw = X509_STORE_CTX_get_ex_data(context, 0) else { return ok }
            let collector = Unmanaged<EvaluationIssueCollector>.fromOpaque(raw).takeUnretainedValue()
            let code = X509_STORE_CTX_get_error(context)
            let text = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
            let issue = VerificationIssue(code: code, depth: Int(X509_STORE_CTX_get_error_depth(context)), text: text)
            if !collector.issues.contains(issue) { collector.issues.append(issue) }
            return 1
        }
        _ = X509_verify_cert(context)
        ERR_clear_error()
        var built: [Certificate] = []
        if let stack = X509_STORE_CTX_get0_chain(context) {
            for index in 0..<ats_sk_X509_num(stack) {
                if let x509 = ats_sk_X509_value(stack, index) { built.append(Certificate(retaining: x509)) }
            }
        }
        var anchor: TrustAnchorKind?
        if !collector.issues.contains(where: { $0.kind == .untrustedAnchor }), let top = built.last {
            let extra = Set(extraAnchors.map(\.sha256Fingerprint))
            anchor = extra.contains(top.sha256Fingerprint) ? .userInstalled : .system
        }
        return ChainVerification(issues: collector.issues, builtChain: built, anchor: anchor)
    }
}

/// Collects verify-callback issues; lives on the evaluating thread for one `evaluate` call.
private final class EvaluationIssueCollector {
    var issues: [VerificationIssue] = []
}
