import ATSPolicy
internal import COpenSSL
internal import COpenSSLShims

/// Which side of the handshake a context or connection plays.
public enum TLSRole: Sendable, Hashable {
    /// The proxy towards an upstream server (or a test client).
    case client
    /// The proxy towards the app (or a test fixture server).
    case server
}

extension TLSProtocolVersion {
    /// OpenSSL's constant (TLS1_VERSION …).
    var openSSLValue: Int32 {
        switch self {
        case .tls10: TLS1_VERSION
        case .tls11: TLS1_1_VERSION
        case .tls12: TLS1_2_VERSION
        case .tls13: TLS1_3_VERSION
        }
    }

    init?(openSSLValue: Int32) {
        switch openSSLValue {
        case TLS1_VERSION: self = .tls10
        case TLS1_1_VERSION: self = .tls11
        case TLS1_2_VERSION: self = .tls12
        case TLS1_3_VERSION: self = .tls13
        default: return nil
        }
    }
}

/// Owns one `SSL_CTX`. Configure it with the `set…`/`use…` methods before the first connection is
/// made; afterwards it is only read (OpenSSL allows concurrent `SSL_new` from a configured
/// context), which is what makes the `@unchecked Sendable` sound. `deinit` frees it.
public final class TLSContext: @unchecked Sendable {
    let pointer: OpaquePointer
    public let role: TLSRole
    /// Kept alive for the servername callback (server contexts that mint per SNI).
    var sniProvider: SNICertificateProvider?
    /// The ALPN selection hook of a server context.
    var alpnSelector: (@Sendable ([String]) -> String?)?
    /// Bytes of the client ALPN list (length-prefixed) of a client context.
    private(set) var alpnWire: [UInt8] = []
    /// Server role: TLS 1.3 connections send one session ticket with their first application bytes.
    private(set) var defersSessionTicket = false
    /// Where handshake secrets go (`logKeys(to:)`); nil: no key log, and no callback is installed.
    var keyLog: TLSKeyLog?

    public init(role: TLSRole) throws {
        guard let context = SSL_CTX_new(role == .client ? TLS_client_method() : TLS_server_method()) else {
            throw OpenSSLError("SSL_CTX_new")
        }
        pointer = context
        self.role = role
        // RELEASE_BUFFERS frees the ~34 KiB of record buffers while a connection is idle: an
        // intercepted connection holds two engines, and idle connections dominate proxy memory.
        _ = ats_SSL_CTX_set_mode(
            context,
            Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS))
        _ = SSL_CTX_set_options(context, ats_SSL_OP_NO_COMPRESSION | ats_SSL_OP_NO_RENEGOTIATION)
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
    }

    deinit { SSL_CTX_free(pointer) }

    /// Server role: OpenSSL issues `count` TLS 1.3 tickets when the handshake completes, and the engine
    /// holds their records back until it has other bytes for the peer (the first response), so that they
    /// cost no write and no client wake-up of their own. TLS 1.2 tickets belong to the handshake and are
    /// sent at once.
    public func deferSessionTickets(count: Int) {
        _ = SSL_CTX_set_num_tickets(pointer, count)
        defersSessionTicket = true
    }

    /// Lowest and highest protocol versions.
    public func setVersions(minimum: TLSProtocolVersion, maximum: TLSProtocolVersion) throws {
        try check(ats_SSL_CTX_set_min_proto_version(pointer, minimum.openSSLValue), "set minimum TLS version")
        try check(ats_SSL_CTX_set_max_proto_version(pointer, maximum.openSSLValue), "set maximum TLS version")
    }

    /// OpenSSL security level (0 = anything goes; 2 = the compiled-in default).
    public func setSecurityLevel(_ level: Int) { SSL_CTX_set_security_level(pointer, Int32(level)) }

    /// The TLS ≤ 1.2 cipher list (OpenSSL names, colon-separated).
    public func setCipherList(_ list: String) throws {
        try check(SSL_CTX_set_cipher_list(pointer, list), "set cipher list \(list)")
    }

    /// The TLS 1.3 suites (colon-separated); an empty string disables TLS 1.3 suites.
    public func setTLS13Suites(_ list: String) throws {
        try check(SSL_CTX_set_ciphersuites(pointer, list), "set TLS 1.3 suites \(list)")
    }

    /// Supported groups, e.g. "X25519:P-256:P-384".
    public func setGroups(_ list: String) throws {
        try check(ats_SSL_CTX_set1_groups_list(pointer, list), "set groups \(list)")
    }

    /// Whether the OpenSSL linked at run time knows the group `name` (OpenSSL's list spelling, e.g.
    /// "X25519MLKEM768"): it tries to set a one-group list on a scratch client context and reports whether
    /// OpenSSL accepted it. Never a build-time assumption: the same binary offers the hybrid group once it
    /// runs against an OpenSSL (3.5+) that provides it. A name with a separator in it is refused.
    public static func supportsGroup(_ name: String) -> Bool {
        guard !name.isEmpty, !name.contains(":"), let context = SSL_CTX_new(TLS_client_method()) else { return false }
        defer { SSL_CTX_free(context) }
        let accepted = ats_SSL_CTX_set1_groups_list(context, name) == 1
        ERR_clear_error()
        return accepted
    }

    /// Server role: never negotiate the extended master secret (RFC 7627) at TLS 1.2 and below, as old servers
    /// do (fixtures for the system-services profile).
    public func disableExtendedMasterSecret() {
        _ = SSL_CTX_set_options(pointer, ats_SSL_OP_NO_EXTENDED_MASTER_SECRET)
    }

    /// Server role: every handshake is a full one. No session tickets are issued and no sessions are cached, so a
    /// client can never resume and skip the certificate (challenge contexts, where the certificate is the test).
    public func disableSessionResumption() {
        _ = SSL_CTX_set_options(pointer, ats_SSL_OP_NO_TICKET)
        _ = SSL_CTX_set_num_tickets(pointer, 0)
        _ = ats_SSL_CTX_set_session_cache_mode(pointer, Int(SSL_SESS_CACHE_OFF))
    }

    /// Lets a server context negotiate finite-field DHE with built-in parameters (fixture servers).
    public func enableAutomaticDHParameters() { _ = ats_SSL_CTX_set_dh_auto(pointer, 1) }

    /// Sets the raw SSL_CTX options (e.g. server cipher preference for fixtures).
    public func preferServerCiphers() { _ = SSL_CTX_set_options(pointer, ats_SSL_OP_CIPHER_SERVER_PREFERENCE) }

    /// The certificate, key and extra chain a server context presents to every client.
    public func useCertificate(_ certificate: Certificate, key: PrivateKey, chain: [Certificate] = []) throws {
        try check(SSL_CTX_use_certificate(pointer, certificate.pointer), "SSL_CTX_use_certificate")
        try check(SSL_CTX_use_PrivateKey(pointer, key.pointer), "SSL_CTX_use_PrivateKey")
        for extra in chain { try check(ats_SSL_CTX_add1_chain_cert(pointer, extra.pointer), "add chain certificate") }
    }

    /// Protocols a client context offers in ALPN, in preference order.
    public func setClientALPN(_ protocols: [String]) throws {
        let wire = Self.alpnWire(protocols)
        alpnWire = wire
        // SSL_CTX_set_alpn_protos returns 0 on success (pitfall 18).
        guard SSL_CTX_set_alpn_protos(pointer, wire, UInt32(wire.count)) == 0 else {
            throw OpenSSLError("SSL_CTX_set_alpn_protos")
        }
    }

    /// The ALPN protocol list in wire format: each name prefixed with its length.
    static func alpnWire(_ protocols: [String]) -> [UInt8] {
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        return wire
    }

    /// Installs the server-side ALPN hook: it gets the client's offered protocols and returns
    /// the one to use, or nil to proceed without ALPN.
    public func setALPNSelector(_ selector: @escaping @Sendable ([String]) -> String?) {
        alpnSelector = selector
        SSL_CTX_set_alpn_select_cb(
            pointer,
            { _, out, outLength, input, inputLength, arg in
                guard let arg, let input, let out, let outLength else { return SSL_TLSEXT_ERR_NOACK }
                let context = Unmanaged<TLSContext>.fromOpaque(arg).takeUnretainedValue()
                guard let selector = context.alpnSelector else { return SSL_TLSEXT_ERR_NOACK }
                var offered: [(name: String, offset: Int)] = []
                var index = 0
                let count = Int(inputLength)
                while index < count {
                    let length = Int(input[index])
                    guard index + 1 + length <= count else { break }
                    let name = String(
                        decoding: UnsafeBufferPointer(start: input + index + 1, count: length), as: UTF8.self)
                    offered.append((name, index))
                    index += 1 + length
                }
                guard let chosen = selector(offered.map(\.name)),
                    let match = offered.first(where: { $0.name == chosen })
                else { return SSL_TLSEXT_ERR_NOACK }
                out.pointee = input + match.offset + 1
                outLength.pointee = input[match.offset]
                return SSL_TLSEXT_ERR_OK
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Installs the servername callback: for every ClientHello it asks `provider` for the
    /// certificate to serve (for the SNI name, or the connection's fallback host without SNI).
    public func setSNIProvider(_ provider: SNICertificateProvider) {
        sniProvider = provider
        _ = ats_SSL_CTX_set_tlsext_servername_arg(pointer, Unmanaged.passUnretained(self).toOpaque())
        _ = ats_SSL_CTX_set_tlsext_servername_callback(pointer) { ssl, alert, arg in
            guard let ssl, let arg else { return SSL_TLSEXT_ERR_ALERT_FATAL }
            let context = Unmanaged<TLSContext>.fromOpaque(arg).takeUnretainedValue()
            guard let provider = context.sniProvider else { return SSL_TLSEXT_ERR_ALERT_FATAL }
            var name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }
            if name == nil, let owner = SSL_get_ex_data(ssl, 0) {
                name = Unmanaged<TLSConnection>.fromOpaque(owner).takeUnretainedValue().fallbackServerName
            }
            guard let name, let leaf = try? provider.leaf(for: name) else {
                alert?.pointee = SSL_AD_UNRECOGNIZED_NAME
                return SSL_TLSEXT_ERR_ALERT_FATAL
            }
            // Certificates live in per-key-type slots: clear before installing (pitfall 13).
            SSL_certs_clear(ssl)
            guard SSL_use_certificate(ssl, leaf.certificate.pointer) == 1,
                SSL_use_PrivateKey(ssl, leaf.key.pointer) == 1
            else {
                alert?.pointee = SSL_AD_INTERNAL_ERROR
                return SSL_TLSEXT_ERR_ALERT_FATAL
            }
            for extra in leaf.chain { _ = ats_SSL_add1_chain_cert(ssl, extra.pointer) }
            if let owner = SSL_get_ex_data(ssl, 0) {
                Unmanaged<TLSConnection>.fromOpaque(owner).takeUnretainedValue().servedName = name
            }
            return SSL_TLSEXT_ERR_OK
        }
    }
}

/// Supplies the leaf a server context serves for a name (the proxy's leaf cache, or a test's
/// fixed certificate). Called on the handshaking thread; must be thread-safe.
public protocol SNICertificateProvider: AnyObject, Sendable {
    /// The leaf (with its key and chain) to serve for `name`; a throw fails the handshake with internal_error.
    func leaf(for name: String) throws -> MintedLeaf
}

extension LeafCertificateCache: SNICertificateProvider {}

/// The client-facing TLS context of the proxy: TLS 1.2 and 1.3, ECDHE suites only, a leaf per
/// SNI name from the leaf cache (the CONNECT host without SNI), and an ALPN hook the caller
/// chooses (default: prefer h2, then http/1.1, among what the proxy enables).
public final class ServerTLSContext: Sendable {
    public let context: TLSContext
    public let leaves: LeafCertificateCache

    /// The default selection: the first of `supported` that the client offers.
    public static func preferring(_ supported: [String]) -> @Sendable ([String]) -> String? {
        { offered in supported.first { offered.contains($0) } }
    }

    /// - Parameter keyLog: where the client-side handshakes' secrets go (`--keylog`); nil for none.
    public init(
        leaves: LeafCertificateCache,
        alpn: @escaping @Sendable ([String]) -> String? = ServerTLSContext.preferring(["h2", "http/1.1"]),
        keyLog: TLSKeyLog? = nil
    ) throws {
        let context = try TLSContext(role: .server)
        try context.setVersions(minimum: .tls12, maximum: .tls13)
        try context.setCipherList(
            "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:"
                + "ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA")
        try context.setTLS13Suites("TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256")
        _ = ats_SSL_CTX_set_session_cache_mode(context.pointer, Int(SSL_SESS_CACHE_SERVER))
        // Resumption for clients that come back: TLS 1.3 tickets are stateless (nothing cached
        // here); one per handshake instead of OpenSSL's two halves the ticket work, and it rides
        // with the first response instead of costing a write of its own.
        context.deferSessionTickets(count: 1)
        context.setSNIProvider(leaves)
        context.setALPNSelector(alpn)
        if let keyLog { context.logKeys(to: keyLog) }
        self.context = context
        self.leaves = leaves
    }

    /// A server-side engine for one accepted client. `connectHost` is the CONNECT target, used
    /// when the ClientHello carries no SNI.
    public func makeConnection(connectHost: String) throws -> TLSConnection {
        try TLSConnection(context: context, serverName: nil, fallbackServerName: connectHost)
    }
}
