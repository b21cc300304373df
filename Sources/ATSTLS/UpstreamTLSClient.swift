import ATSPolicy
internal import COpenSSL
internal import COpenSSLShims
import Foundation
import Synchronization

/// Builds upstream (client) TLS engines whose ClientHello looks like Apple's for a decision:
/// exactly the versions and suites `TLSRequirements` allows, SNI, ALPN h2/http1.1, and security
/// level 0 only when the requirements allow TLS below 1.2 or weaker algorithms. Certificate checks
/// are not delegated to OpenSSL's handshake (it accepts CN-only names, missing EKU, long validity,
/// SHA-224); `summarize` verifies against `trust` and `UpstreamJudge` decides.
///
/// Enforcement engines resume sessions from `sessions` (see `UpstreamSessionCache` for why the
/// judgement stays correct); probe engines never do. OpenSSL's own chain verification during the
/// handshake is skipped: it would build and check the chain against an empty store only for the
/// summary to verify it again against `trust`.
///
/// Thread-safe: contexts are cached per configuration behind a `Mutex` and only read afterwards.
public final class UpstreamTLSClient: Sendable {
    public let trust: TrustStore
    public let ctLogs: CTLogStore?
    /// ALPN offered upstream.
    public let alpn: [String]
    /// Resumable sessions of enforcement handshakes; nil disables resumption.
    public let sessions: UpstreamSessionCache?
    /// Where every upstream handshake's secrets go (`--keylog`); nil for none.
    public let keyLog: TLSKeyLog?
    /// The key-exchange groups every ClientHello offers, in order (see `GroupOffer`).
    public let groupOffer: GroupOffer
    private let contexts = Mutex<[String: TLSContext]>([:])

    /// `groups`: what the engines offer; the default is the classical list every modelled platform offers.
    public init(
        trust: TrustStore, ctLogs: CTLogStore? = nil, alpn: [String] = ["h2", "http/1.1"],
        sessions: UpstreamSessionCache? = UpstreamSessionCache(), keyLog: TLSKeyLog? = nil,
        groups: GroupOffer = GroupOffer(wanted: KeyExchangeGroup.offered(on: Platform(parsing: "ios:18.0")!))
    ) {
        self.keyLog = keyLog
        self.trust = trust
        self.ctLogs = ctLogs
        self.alpn = alpn
        self.sessions = sessions
        self.groupOffer = groups
    }

    /// What a context offers.
    struct Offer: Hashable {
        var minimum: TLSProtocolVersion
        var maximum: TLSProtocolVersion
        var cipherList: String
        var tls13Suites: String
        var securityLevel: Int

        var key: String { "\(minimum)|\(maximum)|\(cipherList)|\(tls13Suites)|\(securityLevel)" }
    }

    /// Whether the requirements allow something OpenSSL's default level 2 refuses.
    static func needsLevelZero(_ requirements: TLSRequirements) -> Bool {
        requirements.minimumVersion < .tls12 || requirements.minimumRSAKeyBits < 2048
            || requirements.minimumSignatureHash < .sha224
            || (requirements.minimumECKeyBits > 0 && requirements.minimumECKeyBits < 224)
    }

    static func offer(for requirements: TLSRequirements) -> Offer {
        var maximum = requirements.maximumVersion
        let tls13 = requirements.openSSLTLS13Suites
        if tls13.isEmpty && maximum == .tls13 { maximum = .tls12 }
        return Offer(
            minimum: requirements.minimumVersion, maximum: max(maximum, requirements.minimumVersion),
            cipherList: requirements.openSSLCipherList, tls13Suites: tls13,
            securityLevel: needsLevelZero(requirements) ? 0 : 2)
    }

    func context(for offer: Offer) throws -> TLSContext {
        if let cached = contexts.withLock({ $0[offer.key] }) { return cached }
        let context = try TLSContext(role: .client)
        context.setSecurityLevel(offer.securityLevel)
        try context.setVersions(minimum: offer.minimum, maximum: offer.maximum)
        if offer.cipherList.isEmpty {
            // Only TLS 1.3 is possible; an empty 1.2 list is not accepted, so keep a harmless one.
            try context.setCipherList("ECDHE-ECDSA-AES128-GCM-SHA256")
        } else {
            try context.setCipherList(offer.cipherList)
        }
        try context.setTLS13Suites(offer.tls13Suites)
        try context.setGroups(groupOffer.openSSLList)
        try context.setClientALPN(alpn)
        // Collect SCTs from the TLS extension and OCSP too (validation is ours: pitfall 16).
        _ = SSL_CTX_enable_ct(context.pointer, Int32(SSL_CT_VALIDATION_PERMISSIVE))
        ERR_clear_error()
        // The chain is verified once, by the summary against `trust`; OpenSSL's own pass would
        // decode, build and reject it against the context's empty store first.
        SSL_CTX_set_cert_verify_callback(context.pointer, { _, _ in 1 }, nil)
        // Sessions go to the new-session callback (TLS 1.3 tickets arrive after the handshake),
        // never into OpenSSL's internal client cache.
        _ = ats_SSL_CTX_set_session_cache_mode(
            context.pointer, Int(SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL))
        SSL_CTX_sess_set_new_cb(context.pointer) { ssl, session in
            guard let ssl, let session, let owner = SSL_get_ex_data(ssl, 0) else { return 0 }
            Unmanaged<TLSConnection>.fromOpaque(owner).takeUnretainedValue().sessionIssued(session)
            return 0
        }
        if let keyLog { context.logKeys(to: keyLog) }
        contexts.withLock { $0[offer.key] = context }
        return context
    }

    /// An engine for the enforcement handshake of `requirements` towards `host` (SNI unless an IP)
    /// on `port`. It offers the session cached for (offer, host, port) if there is one.
    /// `alpn` replaces the client's ALPN list for this connection (an HTTP/1.1 Upgrade request offers
    /// `http/1.1` only, as CFNetwork's WebSocket tasks do).
    public func makeConnection(
        requirements: TLSRequirements, host: String, port: Int? = nil, alpn: [String]? = nil
    ) throws -> TLSConnection {
        let context = try context(for: Self.offer(for: requirements))
        let connection = try TLSConnection(context: context, serverName: host)
        if let alpn {
            let wire = TLSContext.alpnWire(alpn)
            // SSL_set_alpn_protos returns 0 on success.
            guard SSL_set_alpn_protos(connection.ssl, wire, UInt32(wire.count)) == 0 else {
                throw OpenSSLError("SSL_set_alpn_protos")
            }
        }
        guard let sessions else { return connection }
        // Contexts are cached for the client's life, one per offer: the context's identity stands
        // for the offer (a short key; every engine holds its own).
        let key = UpstreamSessionCache.key(offer: ObjectIdentifier(context), host: host, port: port)
        connection.sessionCache = sessions
        connection.sessionKey = key
        if let cached = sessions.lookup(key), SSL_set_session(connection.ssl, cached.pointer) == 1 {
            connection.offeredSession = cached
        }
        return connection
    }

    /// An engine for a permissive explanation probe: level 0, exactly `version`, and the given
    /// suites (every suite OpenSSL has when nil).
    public func makeProbeConnection(
        version: TLSProtocolVersion, cipherList: String? = nil, host: String
    ) throws -> TLSConnection {
        let offer = Offer(
            minimum: version, maximum: version, cipherList: cipherList ?? "ALL:COMPLEMENTOFALL:@SECLEVEL=0",
            tls13Suites: "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256", securityLevel: 0)
        return try TLSConnection(context: try context(for: offer), serverName: host)
    }

    /// The summary of an established engine, verified for `host` at `time`. A resumed handshake
    /// reuses the certificate facts of the full handshake behind its session (with that
    /// handshake's time) and reads the rest from the connection.
    public func summarize(_ connection: TLSConnection, host: String, time: Date) -> HandshakeSummary {
        // The offered session is no longer needed either way: drop it rather than keep it (and its
        // peer chain) for the connection's life.
        let offered = connection.offeredSession
        connection.offeredSession = nil
        if connection.resumedSession, let offered {
            let summary = HandshakeSummary.resumed(from: connection, facts: offered.facts)
            connection.adoptSessionFacts(offered.facts)
            return summary
        }
        let summary = HandshakeSummary.read(from: connection, host: host, trust: trust, ctLogs: ctLogs, time: time)
        connection.adoptSessionFacts(summary)
        return summary
    }
}

/// The key-exchange groups upstream handshakes offer: the emulated platform's groups, in its order, less
/// those the OpenSSL linked at run time does not provide (`TLSContext.supportsGroup`, asked once per group
/// when the offer is made). With OpenSSL 3.0 an iOS 26+ emulation therefore offers X25519, P-256, P-384 and
/// P-521 and names X25519MLKEM768 as unavailable; with OpenSSL 3.5+ the hybrid group goes first, as on the
/// device.
public struct GroupOffer: Sendable, Hashable {
    /// What the emulated platform offers, in its order.
    public let wanted: [KeyExchangeGroup]
    /// What the handshakes offer: `wanted` less the unavailable groups (never empty: falls back to X25519
    /// and P-256, which every OpenSSL this project links has).
    public let offered: [KeyExchangeGroup]
    /// Groups of `wanted` the linked OpenSSL does not provide.
    public var unavailable: [KeyExchangeGroup] { wanted.filter { !offered.contains($0) } }

    /// Detects support at run time with `supports` (the real OpenSSL unless a test replaces it).
    public init(
        wanted: [KeyExchangeGroup], supports: (String) -> Bool = { TLSContext.supportsGroup($0) }
    ) {
        self.wanted = wanted
        let available = wanted.filter { supports($0.openSSLListName) }
        offered = available.isEmpty ? [.x25519, .secp256r1] : available
    }

    /// The list for `SSL_CTX_set1_groups_list`, e.g. "X25519:P-256:P-384:P-521".
    public var openSSLList: String { offered.map(\.openSSLListName).joined(separator: ":") }

    /// The banner's line: which groups are offered, which are not and why, and that a server answering
    /// without post-quantum is informational.
    public var bannerLine: String {
        var line = "key exchange: offering \(offered.map(\.rawValue).joined(separator: ", ")) upstream"
        let missing = unavailable
        if !missing.isEmpty {
            line +=
                " (\(missing.map(\.rawValue).joined(separator: ", ")) not offered: the linked \(OpenSSLLibrary.shortVersion) "
                + "does not provide it; OpenSSL 3.5 or later does)"
        }
        if wanted.contains(where: \.isPostQuantum) {
            line += "; a server that answers without post-quantum key exchange is informational, never an ATS failure"
        }
        return line
    }
}
