import ATSPolicy
import ATSTLS

/// The client-facing TLS contexts of challenge mode: one server `TLSContext` per challenge kind, each
/// serving, for the SNI name (or the CONNECT host without SNI), the leaf `ChallengeCertificates`
/// mints for that kind. Built once, then only read (like `ServerTLSContext`), so safe to share.
///
/// What each context negotiates:
/// - certificate kinds: what the proxy's normal context negotiates (TLS 1.2 and 1.3, ECDHE suites),
///   plus the ECDHE-RSA suites the rsa1024 leaf needs. At the default security level 2
///   `SSL_use_certificate` refuses to serve a SHA-1-signed leaf ("ca md too weak", also at level 1)
///   or an RSA-1024 one ("ee key too small"), so the sha1 context runs at level 0 and the rsa1024
///   context at level 1 (toolchain notes, pitfall 14);
/// - tls1.0 / tls1.1: that version only, ECDHE-RSA and RSA AES-CBC-SHA suites, level 0 (OpenSSL 3
///   refuses TLS 1.0/1.1 above level 0: "legacy sigalg disallowed or unsupported");
/// - static-rsa: TLS 1.2 only, RSA key exchange suites only (AES-GCM and AES-CBC); these need no lower
///   level (OpenSSL 3.0 negotiates them at its default level 2).
///
/// None of them issues session tickets or caches sessions: a resumed handshake sends no certificate,
/// so every challenge must be a full handshake. (Tickets of the normal context cannot be resumed here
/// either: every `SSL_CTX` has ticket keys of its own.)
public final class ChallengeTLSContexts: Sendable {
    /// Where the leaves come from.
    public let certificates: ChallengeCertificates
    private let contexts: [ChallengeKind: TLSContext]

    /// The TLS 1.2 suites of the certificate kinds: the normal context's ECDHE-ECDSA suites and their
    /// ECDHE-RSA twins.
    static let certificateKindCiphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:"
        + "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305:"
        + "ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES256-SHA:ECDHE-RSA-AES128-SHA"
    /// TLS 1.0 and 1.1 have no GCM: CBC with SHA-1 MACs, forward-secret first.
    static let legacyVersionCiphers = "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:AES128-SHA:AES256-SHA"
    /// RSA key exchange only: the suites ATS allows when `NSExceptionRequiresForwardSecrecy` is NO.
    static let staticRSACiphers =
        "AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA256:AES256-SHA256:AES128-SHA:AES256-SHA"
    static let tls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

    /// - Parameters:
    ///   - certificates: mints the leaves (holds the proxy's CA).
    ///   - alpn: the ALPN choice, as for `ServerTLSContext` (a challenge that the client accepts
    ///     should look like the normal server up to the certificate). The handshake kinds never
    ///     choose h2, which their versions and suites do not allow.
    ///   - keyLog: where the handshakes' secrets go (`--keylog`); nil for none.
    public init(
        certificates: ChallengeCertificates,
        alpn: @escaping @Sendable ([String]) -> String? = ServerTLSContext.preferring(["h2", "http/1.1"]),
        keyLog: TLSKeyLog? = nil
    ) throws {
        var contexts: [ChallengeKind: TLSContext] = [:]
        for kind in ChallengeKind.allCases {
            let context = try TLSContext(role: .server)
            try Self.configure(context, for: kind)
            context.setSNIProvider(ChallengeLeafProvider(kind: kind, certificates: certificates))
            switch kind.category {
            case .certificate: context.setALPNSelector(alpn)
            case .handshake:
                // HTTP/2 forbids TLS below 1.2 and RSA key exchange (RFC 9113 §9.2): a client offered h2
                // there may give up after the handshake, which would pass for a refusal.
                context.setALPNSelector { offered in alpn(offered.filter { $0 != "h2" }) }
            }
            if let keyLog { context.logKeys(to: keyLog) }
            contexts[kind] = context
        }
        self.certificates = certificates
        self.contexts = contexts
    }

    /// Versions, suites, security level and session handling of the context serving `kind`.
    private static func configure(_ context: TLSContext, for kind: ChallengeKind) throws {
        switch kind {
        case .wrongHost, .selfSigned, .untrustedCA, .expired, .notYetValid, .noSAN, .overlongValidity:
            try context.setVersions(minimum: .tls12, maximum: .tls13)
            try context.setCipherList(certificateKindCiphers)
            try context.setTLS13Suites(tls13Suites)
        case .sha1Signature, .rsa1024:
            // At level 2 OpenSSL will not serve these leaves ("ca md too weak", "ee key too small");
            // RSA-1024 (80 bits) is enough for level 1, a SHA-1 signature (63 bits) only for level 0.
            context.setSecurityLevel(kind == .rsa1024 ? 1 : 0)
            try context.setVersions(minimum: .tls12, maximum: .tls13)
            try context.setCipherList(certificateKindCiphers)
            try context.setTLS13Suites(tls13Suites)
        case .tls10Only, .tls11Only:
            context.setSecurityLevel(0)
            let version: TLSProtocolVersion = kind == .tls10Only ? .tls10 : .tls11
            try context.setVersions(minimum: version, maximum: version)
            try context.setCipherList(legacyVersionCiphers)
        case .staticRSAOnly:
            try context.setVersions(minimum: .tls12, maximum: .tls12)
            try context.setCipherList(staticRSACiphers)
        }
        context.disableSessionResumption()
    }

    /// The server context that serves `kind`.
    public func context(for kind: ChallengeKind) -> TLSContext {
        guard let context = contexts[kind] else { preconditionFailure("no challenge context for \(kind)") }
        return context
    }

    /// A server-side engine for one accepted client that is to be challenged with `kind`.
    /// `connectHost` is the CONNECT target, used when the ClientHello carries no SNI.
    public func makeConnection(connectHost: String, kind: ChallengeKind) throws -> TLSConnection {
        try TLSConnection(context: context(for: kind), serverName: nil, fallbackServerName: connectHost)
    }
}

/// The servername callback's source for one challenge context: the kind's leaf for the name.
final class ChallengeLeafProvider: SNICertificateProvider {
    let kind: ChallengeKind
    let certificates: ChallengeCertificates

    init(kind: ChallengeKind, certificates: ChallengeCertificates) {
        self.kind = kind
        self.certificates = certificates
    }

    func leaf(for name: String) throws -> MintedLeaf { try certificates.leaf(for: name, kind: kind) }
}
