internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// Where a verified chain ends.
public enum TrustAnchorKind: String, Sendable, Hashable, Codable {
    /// A root from the system bundle (/etc/ssl/certs): Apple's "system-trusted" roots.
    case system
    /// A root given with `--upstream-ca`: the equivalent of a user- or MDM-installed root.
    case userInstalled = "user-installed"
}

/// One problem X509_verify_cert found, at a depth of the chain (0 = leaf).
public struct VerificationIssue: Sendable, Hashable, CustomStringConvertible {
    /// OpenSSL's X509_V_ERR_* code.
    public let code: Int32
    public let depth: Int
    /// OpenSSL's text for the code.
    public let text: String

    public var description: String { "depth \(depth): \(text) (X509_V_ERR \(code))" }
}

/// The outcome of verifying a presented chain against the trust store.
public struct ChainVerification: Sendable {
    /// Every problem found (verification continues past each one), in order.
    public let issues: [VerificationIssue]
    /// The chain OpenSSL built, leaf first (may end without a trusted root).
    public let builtChain: [Certificate]
    /// Which kind of root the built chain ends in, if it ends in a trusted one.
    public let anchor: TrustAnchorKind?

    /// Whether OpenSSL found no problem at all.
    public var isValid: Bool { issues.isEmpty }
}

/// The upstream trust anchors: the system bundle plus extra roots (`--upstream-ca FILE`,
/// repeatable), and the verifier the judge uses (all errors collected, SAN-only host check,
/// injectable time). Immutable after creation; `verify` is thread-safe. `deinit` frees the store.
public final class TrustStore: @unchecked Sendable {
    let store: OpaquePointer
    /// The extra (user-installed) roots.
    public let extraAnchors: [Certificate]
    private let extraFingerprints: Set<[UInt8]>
    public let includesSystemRoots: Bool

    /// Loads the system bundle (unless `systemRoots` is false) and every certificate of each file.
    public init(systemRoots: Bool = true, extraAnchorFiles: [String] = [], extraAnchors: [Certificate] = []) throws {
        guard let store = X509_STORE_new() else { throw OpenSSLError("X509_STORE_new") }
        self.store = store
        includesSystemRoots = systemRoots
        if systemRoots {
            _ = X509_STORE_set_default_paths(store)
            ERR_clear_error()
        }
        var anchors = extraAnchors
        for file in extraAnchorFiles {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw CertificateAuthorityError(path: file, problem: "cannot read: \(errnoText())")
            }
            let certificates = (try? Certificate.all(pem: [UInt8](data))) ?? []
            if certificates.isEmpty {
                guard let der = try? Certificate(der: [UInt8](data)) else {
                    throw CertificateAuthorityError(path: file, problem: "no PEM or DER certificate in this file")
                }
                anchors.append(der)
            } else {
                anchors.append(contentsOf: certificates)
            }
        }
        for anchor in anchors { _ = X509_STORE_add_cert(store, anchor.pointer) }
        ERR_clear_error()
        self.extraAnchors = anchors
        extraFingerprints = Set(anchors.map(\.sha256Fingerprint))
    }

    /// Runs OpenSSL's chain verification of `chain` (leaf first) at `time` against the store and collects every
    /// problem once (the callback goes on past each, so all are seen) with the chain it built. `serverHost`: check
    /// the serverAuth purpose and that the leaf's SAN names it (CN never); nil checks neither. `partialChain`: any
    /// anchor of the store ends a chain, a root or not. Nil for an empty chain.
    func runVerification(_ chain: [Certificate], at time: Date, serverHost: String?, partialChain: Bool)
        -> (issues: [VerificationIssue], built: [Certificate])?
    {
        guard let leaf = chain.first else { return nil }
        guard let context = X509_STORE_CTX_new(), let untrusted = ats_sk_X509_new_null() else {
            return ([VerificationIssue(code: -1, depth: 0, text: "out of memory")], [])
        }
        defer {
            X509_STORE_CTX_free(context)
            ats_sk_X509_free(untrusted)
        }
        for certificate in chain.dropFirst() { _ = ats_sk_X509_push(untrusted, certificate.pointer) }
        guard X509_STORE_CTX_init(context, store, leaf.pointer, untrusted) == 1 else {
            ERR_clear_error()
            return ([VerificationIssue(code: -1, depth: 0, text: "cannot initialise verification")], [])
        }
        let parameters = X509_STORE_CTX_get0_param(context)
        X509_VERIFY_PARAM_set_time(parameters, time_t(time.timeIntervalSince1970))
        if partialChain { X509_VERIFY_PARAM_set_flags(parameters, UInt(X509_V_FLAG_PARTIAL_CHAIN)) }
        if let host = serverHost {
            _ = X509_VERIFY_PARAM_set_purpose(parameters, X509_PURPOSE_SSL_SERVER)
            let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            if LeafCertificateCache.isIPAddress(bareHost) {
                _ = X509_VERIFY_PARAM_set1_ip_asc(parameters, bareHost)
            } else {
                X509_VERIFY_PARAM_set_hostflags(parameters, UInt32(X509_CHECK_FLAG_NEVER_CHECK_SUBJECT))
                _ = X509_VERIFY_PARAM_set1_host(parameters, bareHost, 0)
            }
        }
        let collector = IssueCollector()
        _ = X509_STORE_CTX_set_ex_data(context, 0, Unmanaged.passUnretained(collector).toOpaque())
        X509_STORE_CTX_set_verify_cb(context) { ok, context in
            guard ok == 0, let context, let raw = X509_STORE_CTX_get_ex_data(context, 0) else { return ok }
            let collector = Unmanaged<IssueCollector>.fromOpaque(raw).takeUnretainedValue()
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
        return (collector.issues, built)
    }

    deinit { X509_STORE_free(store) }

    /// Verifies `chain` (leaf first, as presented) for `host` at `time`. Host matching uses SAN
    /// only (CN is never consulted, as on iOS 13+); an IP literal is matched against IP SANs.
    public func verify(chain: [Certificate], host: String, at time: Date) -> ChainVerification {
        guard let (issues, built) = runVerification(chain, at: time, serverHost: host, partialChain: false) else {
            return ChainVerification(issues: [], builtChain: [], anchor: nil)
        }
        let unique = issues
        let untrustedRoot = unique.contains {
            $0.code == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT || $0.code == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
                || $0.code == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
                || $0.code == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT
        }
        var anchor: TrustAnchorKind?
        if !untrustedRoot, let root = built.last {
            anchor = extraFingerprints.contains(root.sha256Fingerprint) ? .userInstalled : .system
        }
        return ChainVerification(issues: unique, builtChain: built, anchor: anchor)
    }
}

/// Collects verify-callback issues; lives on the verifying thread for one `verify` call.
private final class IssueCollector {
    var issues: [VerificationIssue] = []
}
