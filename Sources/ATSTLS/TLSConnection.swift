import ATSPolicy
internal import COpenSSL
internal import COpenSSLShims

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a handshake or a record operation failed, classified from OpenSSL's error queue.
public struct TLSFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The classified cause.
    public enum Reason: Sendable, Hashable {
        /// The peer sent a fatal alert with this description number (40 handshake_failure, 70 protocol_version, …).
        case receivedAlert(UInt8)
        /// No protocol version in common (detected locally, e.g. "unsupported protocol").
        case noCommonVersion
        /// No cipher suite in common (detected locally, e.g. "no shared cipher").
        case noCommonCipher
        /// The peer's bytes are not TLS (e.g. an HTTP response or garbage).
        case notTLS
        /// The peer closed the transport without a close_notify or alert.
        case closedWithoutAlert
        /// The transport was reset (TCP RST) in the middle of the handshake.
        case resetDuringHandshake
        /// The peer's certificate could not be parsed, or it sent none.
        case badCertificate
        /// Anything else.
        case other
    }

    public let reason: Reason
    /// The OpenSSL error queue drained at the failure.
    public let errors: [OpenSSLErrorEntry]

    /// A failure with `reason` and the OpenSSL errors seen with it.
    public init(reason: Reason, errors: [OpenSSLErrorEntry]) {
        self.reason = reason
        self.errors = errors
    }

    public var description: String {
        let detail = errors.map(\.text).joined(separator: "; ")
        switch reason {
        case .receivedAlert(let alert): return "peer sent fatal alert \(alert) (\(TLSAlert.name(alert))) \(detail)"
        case .noCommonVersion: return "no common protocol version: \(detail)"
        case .noCommonCipher: return "no common cipher suite: \(detail)"
        case .notTLS: return "peer does not speak TLS: \(detail)"
        case .closedWithoutAlert: return "peer closed the connection without an alert"
        case .resetDuringHandshake: return "peer reset the connection during the handshake"
        case .badCertificate: return "peer certificate unusable: \(detail)"
        case .other: return detail.isEmpty ? "TLS failure" : detail
        }
    }

    static func classify(_ errors: [OpenSSLErrorEntry], transportEOF: Bool) -> TLSFailure {
        for entry in errors where entry.library == ERR_LIB_SSL {
            let reason = entry.reason
            if reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256 {
                return TLSFailure(reason: .receivedAlert(UInt8(reason - SSL_AD_REASON_OFFSET)), errors: errors)
            }
            switch reason {
            case SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_NO_PROTOCOLS_AVAILABLE, SSL_R_VERSION_TOO_LOW,
                SSL_R_UNSUPPORTED_SSL_VERSION:
                return TLSFailure(reason: .noCommonVersion, errors: errors)
            case SSL_R_NO_SHARED_CIPHER, SSL_R_NO_CIPHERS_AVAILABLE, SSL_R_WRONG_CIPHER_RETURNED,
                SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
                return TLSFailure(reason: .noCommonCipher, errors: errors)
            case SSL_R_WRONG_VERSION_NUMBER, SSL_R_PACKET_LENGTH_TOO_LONG, SSL_R_HTTP_REQUEST, SSL_R_UNKNOWN_PROTOCOL,
                SSL_R_RECORD_LENGTH_MISMATCH, SSL_R_LENGTH_MISMATCH, SSL_R_UNEXPECTED_MESSAGE,
                SSL_R_UNEXPECTED_RECORD, SSL_R_BAD_PACKET_LENGTH, SSL_R_ENCRYPTED_LENGTH_TOO_LONG:
                return TLSFailure(reason: .notTLS, errors: errors)
            case SSL_R_UNEXPECTED_EOF_WHILE_READING:
                return TLSFailure(reason: .closedWithoutAlert, errors: errors)
            default:
                continue
            }
        }
        if errors.contains(where: { $0.library == ERR_LIB_ASN1 || $0.library == ERR_LIB_X509 }) {
            return TLSFailure(reason: .badCertificate, errors: errors)
        }
        if transportEOF { return TLSFailure(reason: .closedWithoutAlert, errors: errors) }
        return TLSFailure(reason: .other, errors: errors)
    }
}

/// TLS alert description names (RFC 8446 §6).
public enum TLSAlert {
    public static func name(_ code: UInt8) -> String {
        switch code {
        case 0: "close_notify"
        case 10: "unexpected_message"
        case 20: "bad_record_mac"
        case 22: "record_overflow"
        case 40: "handshake_failure"
        case 42: "bad_certificate"
        case 43: "unsupported_certificate"
        case 44: "certificate_revoked"
        case 45: "certificate_expired"
        case 46: "certificate_unknown"
        case 47: "illegal_parameter"
        case 48: "unknown_ca"
        case 49: "access_denied"
        case 50: "decode_error"
        case 51: "decrypt_error"
        case 70: "protocol_version"
        case 71: "insufficient_security"
        case 80: "internal_error"
        case 86: "inappropriate_fallback"
        case 90: "user_canceled"
        case 109: "missing_extension"
        case 110: "unsupported_extension"
        case 112: "unrecognized_name"
        case 116: "certificate_required"
        case 120: "no_application_protocol"
        default: "alert \(code)"
        }
    }
}

/// The BIO method of the engines: reads come from the engine's `inbound` bytes, writes go to its
/// `outbound` array. The callbacks borrow the engine without retaining it: OpenSSL calls them only
/// from inside the engine's own methods, so the engine is alive for the whole call (and these calls
/// are many per record). Unlike a memory BIO it keeps no buffer of its own (a memory BIO never shrinks:
/// after one bulk transfer an idle connection kept ~85 KiB per direction) and saves a copy each
/// way.
private struct EngineBIO: @unchecked Sendable {
    let pointer: OpaquePointer

    static let method: EngineBIO = {
        guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ats-proxy engine") else {
            fatalError("BIO_meth_new failed")
        }
        _ = BIO_meth_set_write(method) { bio, bytes, count in
            guard let bio, let bytes, let owner = BIO_get_data(bio) else { return -1 }
            return Unmanaged<TLSConnection>.fromOpaque(owner)._withUnsafeGuaranteedRef {
                $0.bioWrite(bio, bytes, Int(count))
            }
        }
        _ = BIO_meth_set_read(method) { bio, buffer, count in
            guard let bio, let buffer, let owner = BIO_get_data(bio) else { return -1 }
            return Unmanaged<TLSConnection>.fromOpaque(owner)._withUnsafeGuaranteedRef {
                $0.bioRead(bio, buffer, Int(count))
            }
        }
        _ = BIO_meth_set_ctrl(method) { bio, command, _, _ in
            guard let bio, let owner = BIO_get_data(bio) else { return 0 }
            return Unmanaged<TLSConnection>.fromOpaque(owner)._withUnsafeGuaranteedRef { $0.bioControl(bio, command) }
        }
        _ = BIO_meth_set_create(method) { bio in
            BIO_set_init(bio, 1)
            return 1
        }
        _ = BIO_meth_set_destroy(method) { bio in
            BIO_set_data(bio, nil)
            return 1
        }
        return EngineBIO(pointer: method)
    }()
}

/// One scratch buffer per thread for `SSL_read` (an engine is used by one thread at a time, and
/// `read` copies out before returning), freed when the thread exits.
enum ReadScratch {
    static let size = 64 * 1024
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        #if canImport(Darwin)
            pthread_key_create(&key) { $0.deallocate() }
        #else
            pthread_key_create(&key) { $0?.deallocate() }
        #endif
        return key
    }()

    /// The calling thread's buffer (`minimum` larger than `size` gets a bigger one, kept).
    static func buffer(minimum: Int) -> UnsafeMutableRawBufferPointer {
        if let raw = pthread_getspecific(key) {
            let stored = raw.load(as: Int.self)
            if stored >= minimum {
                return UnsafeMutableRawBufferPointer(start: raw + MemoryLayout<Int>.stride, count: stored)
            }
            raw.deallocate()
        }
        let capacity = max(size, minimum)
        let raw = UnsafeMutableRawPointer.allocate(byteCount: capacity + MemoryLayout<Int>.stride, alignment: 16)
        raw.storeBytes(of: capacity, as: Int.self)
        pthread_setspecific(key, raw)
        return UnsafeMutableRawBufferPointer(start: raw + MemoryLayout<Int>.stride, count: capacity)
    }
}

/// A sans-io TLS engine: one `SSL` over two memory BIOs. The driver feeds network bytes in with
/// `receive`, takes network bytes out with `takeOutbound`, and calls `handshake`, `read` and
/// `write`; the engine never touches a socket, a clock or a queue.
///
/// Not thread-safe: confine it to one thread or serial queue (in the proxy, its owner's event loop). The context must
/// outlive it (it keeps a strong reference). `deinit` frees the SSL and both BIOs.
public final class TLSConnection {
    /// Where the connection is in its life.
    public enum State: Sendable, Hashable {
        /// Created; no handshake step taken yet.
        case idle
        /// Handshake in progress, waiting for peer bytes.
        case handshaking
        /// Handshake complete; application data flows.
        case established
        /// The peer sent close_notify or the transport ended after the handshake.
        case closed
        /// The handshake or a record failed; `failure` says why.
        case failed
    }

    /// Result of one handshake step.
    public enum HandshakeProgress: Sendable, Hashable {
        /// Send `takeOutbound()` and feed more peer bytes.
        case needsInput
        /// Done (send `takeOutbound()` too: the last flight may be queued; a TLS 1.3 server context that
        /// defers its tickets holds them until the next write instead).
        case complete
        case failed(TLSFailure)
    }

    /// Result of one read.
    public enum ReadResult: Sendable, Hashable {
        /// Decrypted application bytes.
        case data([UInt8])
        /// Nothing decrypted yet; feed more peer bytes.
        case needsInput
        /// The peer closed cleanly (or the transport ended).
        case closed
        case failed(TLSFailure)
    }

    public let context: TLSContext
    let ssl: OpaquePointer
    /// Peer bytes not yet consumed by OpenSSL (from `inboundOffset` on). Released once consumed.
    private var inbound: [UInt8] = []
    private var inboundOffset = 0
    /// Bytes OpenSSL produced for the peer; `takeOutbound` hands the array itself over.
    private var outbound: [UInt8] = []
    /// The name to serve when a ClientHello carries no SNI (server role).
    let fallbackServerName: String?
    /// The SNI name (client role) or the name the served leaf was chosen for (server role).
    public internal(set) var servedName: String?
    public private(set) var state: State = .idle
    public private(set) var failure: TLSFailure?
    private var transportEnded = false
    /// OpenSSL's record buffers were freed and no record operation ran since.
    private var buffersReleased = false
    /// Keep OpenSSL's record buffers between records instead of freeing them whenever the engine
    /// runs dry (the default, which keeps idle connections small). A connection in the middle of
    /// back-to-back exchanges sets it: freeing and allocating ~34 KiB of buffers for every record
    /// cost about 7% of the proxy's CPU per keep-alive request. Clearing it frees the buffers now
    /// (when they hold nothing), so set it back once the connection goes idle.
    public var holdsRecordBuffers = false {
        didSet {
            guard holdsRecordBuffers != oldValue else { return }
            if holdsRecordBuffers {
                _ = ats_SSL_clear_mode(ssl, Int(SSL_MODE_RELEASE_BUFFERS))
            } else {
                _ = ats_SSL_set_mode(ssl, Int(SSL_MODE_RELEASE_BUFFERS))
                if state == .established && nothingToDecrypt { releaseRecordBuffers() }
            }
        }
    }
    /// Server role, TLS 1.3 (see `TLSContext.deferSessionTickets`): the ticket records OpenSSL wrote
    /// when the handshake completed, held back until the engine writes anything else for the peer.
    /// Records must reach the peer in the order they were sealed, so they go first then.
    private var heldTickets: [UInt8] = []

    // Upstream session resumption (client role; see `UpstreamSessionCache`).
    /// Where sessions the server issues go, and under which key (nil: no resumption).
    var sessionCache: UpstreamSessionCache?
    var sessionKey: String?
    /// The cached session set on this engine before its handshake (dropped once summarized).
    var offeredSession: CachedUpstreamSession?
    /// The certificate facts of this connection: its own full handshake's summary, or those of the
    /// session it resumed. The first session issued on this connection is cached with them; then
    /// they are dropped.
    var sessionFacts: HandshakeSummary?
    /// A session issued before the summary existed (TLS 1.2 issues it inside the handshake); one
    /// owned reference, cached once `sessionFacts` is known, freed in `deinit` otherwise.
    private var pendingSession: OpaquePointer?

    /// A client engine sends `serverName` as SNI (unless it is an IP literal); a server engine uses
    /// `fallbackServerName` when the client sends no SNI.
    public init(context: TLSContext, serverName: String?, fallbackServerName: String? = nil) throws {
        guard let ssl = SSL_new(context.pointer) else { throw OpenSSLError("SSL_new") }
        guard let bio = BIO_new(EngineBIO.method.pointer) else {
            SSL_free(ssl)
            throw OpenSSLError("BIO_new")
        }
        self.ssl = ssl
        self.context = context
        self.fallbackServerName = fallbackServerName
        // One BIO for both directions; it reaches this engine through its data pointer (the SSL,
        // which owns the BIO, never outlives the engine).
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        SSL_set_bio(ssl, bio, bio)
        SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
        switch context.role {
        case .client:
            SSL_set_connect_state(ssl)
            if let serverName, !LeafCertificateCache.isIPAddress(serverName) {
                guard ats_SSL_set_tlsext_host_name(ssl, serverName) == 1 else { throw OpenSSLError("set SNI") }
            }
            servedName = serverName
        case .server:
            SSL_set_accept_state(ssl)
        }
    }

    deinit {
        SSL_free(ssl)
        if let pendingSession { SSL_SESSION_free(pendingSession) }
    }

    /// The new-session callback's target: keeps a copy of `session` when it can be cached. A copy,
    /// because the issued object stays this connection's current session, and `SSL_free` marks
    /// that one not resumable unless the connection was shut down with close_notify.
    func sessionIssued(_ session: OpaquePointer) {
        guard let sessionCache, let sessionKey, SSL_SESSION_is_resumable(session) == 1 else { return }
        guard sessionFacts != nil || pendingSession == nil, let copy = SSL_SESSION_dup(session) else { return }
        if let sessionFacts {
            sessionCache.store(copy, facts: sessionFacts, key: sessionKey)
            finishSessionCaching()
        } else {
            pendingSession = copy
        }
    }

    /// One session per connection is enough (the cache keeps one per key): forget the facts, which
    /// hold the whole chain, instead of carrying them for the connection's life.
    private func finishSessionCaching() {
        sessionFacts = nil
        sessionKey = nil
        sessionCache = nil
    }

    /// Records the certificate facts this connection's sessions stand for and caches a session
    /// that was issued before they were known.
    func adoptSessionFacts(_ facts: HandshakeSummary) {
        sessionFacts = facts
        guard let pendingSession else { return }
        self.pendingSession = nil
        if let sessionCache, let sessionKey {
            sessionCache.store(pendingSession, facts: facts, key: sessionKey)
            finishSessionCaching()
        } else {
            SSL_SESSION_free(pendingSession)
        }
    }

    /// Whether the completed handshake resumed a session instead of a full exchange.
    public var resumedSession: Bool { SSL_session_reused(ssl) == 1 }

    /// Bytes that arrived from the peer.
    public func receive(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        if inboundOffset == inbound.count {
            inbound = bytes
            inboundOffset = 0
        } else {
            inbound.append(contentsOf: bytes)
        }
    }

    /// The transport reached EOF (or was reset): once the buffered bytes are consumed, reads see EOF.
    public func receiveEOF() {
        transportEnded = true
    }

    /// Whether network bytes are waiting to be sent.
    public var hasOutbound: Bool { !outbound.isEmpty }

    /// Peer bytes received and not yet taken in by OpenSSL (`TLSLayer` sizes its reads from it).
    var unreadInboundCount: Int { inbound.count - inboundOffset }

    /// Takes every pending network byte.
    public func takeOutbound() -> [UInt8] {
        defer { outbound = [] }
        return outbound
    }

    // MARK: The BIO's side (called by OpenSSL on this engine's thread)

    /// Copies up to `count` peer bytes into `buffer`: the count, or 0 at the transport's end, or
    /// -1 with the retry flag when nothing has arrived yet.
    fileprivate func bioRead(_ bio: OpaquePointer, _ buffer: UnsafeMutablePointer<CChar>, _ count: Int) -> Int32 {
        BIO_clear_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY)
        let available = inbound.count - inboundOffset
        guard available > 0 else {
            if transportEnded { return 0 }
            BIO_set_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)
            return -1
        }
        let taken = min(count, available)
        inbound.withUnsafeBytes { raw in
            UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress! + inboundOffset, byteCount: taken)
        }
        inboundOffset += taken
        if inboundOffset == inbound.count {
            inbound = []
            inboundOffset = 0
        }
        return Int32(taken)
    }

    /// Appends bytes OpenSSL wrote for the peer.
    fileprivate func bioWrite(_ bio: OpaquePointer, _ bytes: UnsafePointer<CChar>, _ count: Int) -> Int32 {
        BIO_clear_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY)
        if !heldTickets.isEmpty {
            outbound.append(contentsOf: heldTickets)
            heldTickets = []
        }
        outbound.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
        return Int32(count)
    }

    fileprivate func bioControl(_ bio: OpaquePointer, _ command: Int32) -> Int {
        switch command {
        case BIO_CTRL_FLUSH: return 1
        case BIO_CTRL_PENDING: return inbound.count - inboundOffset
        case BIO_CTRL_WPENDING: return outbound.count
        case BIO_CTRL_EOF: return transportEnded && inboundOffset == inbound.count ? 1 : 0
        default: return 0
        }
    }

    /// Advances the handshake as far as the buffered peer bytes allow.
    public func handshake() -> HandshakeProgress {
        switch state {
        case .established: return .complete
        case .failed, .closed: return .failed(failure ?? TLSFailure(reason: .other, errors: []))
        case .idle, .handshaking: break
        }
        state = .handshaking
        ERR_clear_error()
        buffersReleased = false
        let pendingBefore = outbound.count
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            state = .established
            // What the completing call wrote is the server's NewSessionTicket records (TLS 1.3 servers
            // have sent their whole flight before the client's Finished can arrive).
            if context.role == .server && context.defersSessionTicket && SSL_version(ssl) == TLS1_3_VERSION
                && outbound.count > pendingBefore
            {
                heldTickets = Array(outbound[pendingBefore...])
                outbound.removeSubrange(pendingBefore...)
            }
            return .complete
        }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_WANT_READ && !transportEnded { return .needsInput }
        let failure: TLSFailure
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN {
            let drained = OpenSSLErrorEntry.drain()
            failure =
                drained.isEmpty
                ? TLSFailure(reason: .closedWithoutAlert, errors: []) : TLSFailure.classify(drained, transportEOF: true)
        } else {
            failure = TLSFailure.classify(OpenSSLErrorEntry.drain(), transportEOF: transportEnded)
        }
        fail(failure)
        return .failed(failure)
    }

    private func fail(_ failure: TLSFailure) {
        self.failure = failure
        state = .failed
    }

    /// Encrypts application bytes into records for the peer (`takeOutbound`); returns how many
    /// were taken: all of them, or 0 when the connection is not established or the write failed
    /// (`state` is then `.failed`). Partial writes are enabled on the contexts, so `SSL_write`
    /// takes one record (≤ 16 KiB) per call; the loop here spares callers from slicing.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Int {
        guard state == .established, !bytes.isEmpty else { return 0 }
        ERR_clear_error()
        buffersReleased = false
        // Room for the records up front (≤ 16 KiB of plaintext each, plus header, tag and padding
        // byte), so that the output does not grow and copy itself record by record.
        outbound.reserveCapacity(outbound.count + bytes.count + (bytes.count / 16384 + 1) * 32)
        return bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let chunk = Int32(min(raw.count - offset, Int(Int32.max)))
                let written = SSL_write(ssl, raw.baseAddress! + offset, chunk)
                if written <= 0 {
                    fail(TLSFailure.classify(OpenSSLErrorEntry.drain(), transportEOF: transportEnded))
                    return 0
                }
                offset += Int(written)
            }
            return offset
        }
    }

    /// Decrypts up to `maximum` application bytes from what the peer sent: as many records as are
    /// buffered, so that a bulk transfer moves in few large pieces. When a record after the first
    /// ends the stream or fails, the data comes first and the next call reports the end.
    public func read(maximum: Int = 65536) -> ReadResult {
        switch state {
        case .established: break
        case .closed: return .closed
        case .failed: return .failed(failure ?? TLSFailure(reason: .other, errors: []))
        case .idle, .handshaking: return .needsInput
        }
        // Nothing buffered in OpenSSL and nothing new from the peer: no record can complete.
        if nothingToDecrypt {
            releaseRecordBuffers()
            return .needsInput
        }
        ERR_clear_error()
        // Decrypt into the thread's scratch buffer and return an exact-size copy: an engine keeps
        // no buffer of its own while its connection idles.
        let scratch = ReadScratch.buffer(minimum: maximum)
        var total = 0
        while total < maximum {
            buffersReleased = false
            let count = SSL_read(ssl, scratch.baseAddress! + total, Int32(maximum - total))
            if count > 0 {
                total += Int(count)
                if nothingToDecrypt { break }
                continue
            }
            let outcome = readEnded(count)
            if total == 0 { return outcome }
            break
        }
        return .data(Array(UnsafeRawBufferPointer(rebasing: scratch[0..<total])))
    }

    /// Whether no record can complete: nothing decrypted inside OpenSSL, no peer bytes waiting.
    private var nothingToDecrypt: Bool {
        SSL_has_pending(ssl) == 0 && inboundOffset == inbound.count && !transportEnded
    }

    /// Classifies an `SSL_read` that returned no data, recording an end or a failure in `state`.
    private func readEnded(_ result: Int32) -> ReadResult {
        let error = SSL_get_error(ssl, result)
        switch error {
        case SSL_ERROR_WANT_READ where !transportEnded:
            releaseRecordBuffers()
            return .needsInput
        case SSL_ERROR_ZERO_RETURN:
            state = .closed
            return .closed
        default:
            let drained = OpenSSLErrorEntry.drain()
            if drained.isEmpty
                || transportEnded && drained.allSatisfy({ $0.reason == SSL_R_UNEXPECTED_EOF_WHILE_READING })
            {
                state = .closed
                return .closed
            }
            let failure = TLSFailure.classify(drained, transportEOF: transportEnded)
            fail(failure)
            return .failed(failure)
        }
    }

    /// Idle until the peer sends more: give back OpenSSL's record buffers (~17 KiB each).
    /// SSL_MODE_RELEASE_BUFFERS alone keeps the read buffer after post-handshake messages such as
    /// TLS 1.3 tickets, which every upstream connection receives.
    private func releaseRecordBuffers() {
        guard !buffersReleased, !holdsRecordBuffers else { return }
        buffersReleased = SSL_free_buffers(ssl) == 1
    }

    /// Queues close_notify (send `takeOutbound()` afterwards).
    public func shutdown() {
        guard state == .established else { return }
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
        state = .closed
    }

    /// The negotiated ALPN protocol, if any.
    public var negotiatedALPN: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The negotiated protocol version (after the handshake).
    public var negotiatedVersion: TLSProtocolVersion? { TLSProtocolVersion(openSSLValue: SSL_version(ssl)) }

    /// The peer's certificate chain as sent (leaf first), each an owned reference.
    public var peerCertificates: [Certificate] {
        guard let stack = SSL_get_peer_cert_chain(ssl) else {
            if let leaf = SSL_get0_peer_certificate(ssl) { return [Certificate(retaining: leaf)] }
            return []
        }
        var result: [Certificate] = []
        for index in 0..<ats_sk_X509_num(stack) {
            if let x509 = ats_sk_X509_value(stack, index) { result.append(Certificate(retaining: x509)) }
        }
        // A server's own chain (SSL_get_peer_cert_chain) never includes the leaf; a client's does.
        if context.role == .server, let leaf = SSL_get0_peer_certificate(ssl) {
            result.insert(Certificate(retaining: leaf), at: 0)
        }
        return result
    }
}
