/// The one way the proxy drives a `TLSConnection`, on either side (the client-facing server engine, the upstream
/// client engine, a shared HTTP/2 link's, a parked connection's, a blocking handshake's): the rules of pumping an
/// engine live here once instead of in a loop per caller.
///
/// Contract:
/// - While `handshaking`, feed every byte the peer sends to `handshake(_:)` and send `takeRecords()` after each
///   step, whatever it says. Application data that came with the peer's last flight stays in the engine: read it
///   with `decrypt([])` once the caller has acted on `.complete` (chosen a protocol from ALPN, judged the
///   handshake, or handed the engine to its next owner).
/// - Once `established`, `decrypt(_:)` takes the peer's bytes and returns, in one call, everything they decrypt to
///   as one array (sized from the buffered ciphertext, so one engine read fills it and nothing is copied twice)
///   and whether the peer ended: `.closed` (close_notify, or the transport's end after the handshake) or
///   `.failed` (a bad record or a fatal alert). Plaintext that arrived before the end is returned with it.
///   `seal(_:)` encrypts plaintext into records; `takeRecords()` hands over every record waiting for the peer.
/// - After the end (`closed` or `failed`) `decrypt` reports the end again and drops the bytes, and `seal` drops
///   the plaintext and returns false: a peer that went away (or a connection closed with `close()`) is not an
///   error of the caller's. Calling `handshake` outside `handshaking`, or `decrypt` or `seal` before the handshake
///   completed, is: it traps, naming the state.
///
/// The layer is a view over its engine and keeps no state of its own (the state is the engine's), so it costs
/// nothing to make one where an engine is at hand, and copies of it always agree. Not thread-safe: like the
/// engine, it belongs to one thread (the event loop that owns the connection).
public struct TLSLayer {
    /// Where the connection is, as its callers see it.
    public enum State: Sendable, Hashable {
        /// The handshake has not completed: peer bytes go to `handshake(_:)`.
        case handshaking
        /// Application data flows both ways: `decrypt(_:)` and `seal(_:)`.
        case established
        /// The peer's close_notify or the transport's end was seen after the handshake, or `close()` queued ours.
        case closed
        /// The handshake or a record failed (the engine's `failure` says why).
        case failed
    }

    /// Result of one handshake step. In every case, `takeRecords()` holds what to send to the peer.
    public enum HandshakeStep: Sendable, Hashable {
        /// The engine waits for more of the peer's bytes.
        case needsInput
        /// The handshake completed; the state is `established`. Read early application data with `decrypt([])`.
        case complete
        /// The handshake failed (a fatal alert, no common version or suite, not TLS, the transport ended); the
        /// state is `failed`.
        case failed(TLSFailure)
    }

    /// How the peer ended the connection.
    public enum End: Sendable, Hashable {
        /// close_notify, or the transport's end after the handshake: a clean end of the stream.
        case closed
        /// A record could not be decrypted or the peer sent a fatal alert: an abort.
        case failed(TLSFailure)
    }

    /// What one `decrypt(_:)` call got from the peer's bytes.
    public struct Inbound: Sendable, Hashable {
        /// Every application byte the buffered records decrypt to, in one piece (empty when no record completed).
        public var plaintext: [UInt8]
        /// Whether the peer ended after `plaintext`; nil while the connection continues.
        public var end: End?

        /// The plaintext of one call, and the end that followed it, if any.
        public init(plaintext: [UInt8], end: End?) {
            self.plaintext = plaintext
            self.end = end
        }
    }

    /// Largest plaintext one TLS record carries (RFC 8446 §5.1, RFC 5246 §6.2.1).
    static let largestRecordPlaintext = 16 * 1024
    /// Most plaintext one engine read collects; beyond it (a caller feeding megabytes at once) reads are joined.
    static let largestRead = 256 * 1024

    /// The engine this layer drives.
    public let engine: TLSConnection

    /// A layer over `engine`, in whatever state the engine is.
    public init(_ engine: TLSConnection) {
        self.engine = engine
    }

    /// The engine's state, as the layer's callers see it (an engine that has not started is `handshaking`).
    public var state: State {
        switch engine.state {
        case .idle, .handshaking: .handshaking
        case .established: .established
        case .closed: .closed
        case .failed: .failed
        }
    }

    /// Feeds `ciphertext` (may be empty: the first step of a client, or after `receiveEnd()`) and advances the
    /// handshake as far as the buffered bytes allow. Send `takeRecords()` afterwards. Traps unless `handshaking`.
    public func handshake(_ ciphertext: [UInt8]) -> HandshakeStep {
        switch state {
        case .handshaking:
            break
        case .established, .closed, .failed:
            preconditionFailure("TLSLayer.handshake in state \(state)")
        }
        engine.receive(ciphertext)
        switch engine.handshake() {
        case .needsInput: return .needsInput
        case .complete: return .complete
        case .failed(let failure): return .failed(failure)
        }
    }

    /// Feeds `ciphertext` (may be empty: application data that came with the handshake's last flight) and
    /// decrypts every record that completes, in one piece, with the peer's end if it came. Records the engine
    /// wrote while reading (a TLS 1.3 KeyUpdate answer) wait in `takeRecords()`. After the end, reports the end
    /// again and drops `ciphertext`. Traps while `handshaking`.
    public func decrypt(_ ciphertext: [UInt8]) -> Inbound {
        switch state {
        case .established:
            break
        case .closed:
            return Inbound(plaintext: [], end: .closed)
        case .failed:
            return Inbound(plaintext: [], end: .failed(engine.failure ?? TLSFailure(reason: .other, errors: [])))
        case .handshaking:
            preconditionFailure("TLSLayer.decrypt in state \(state)")
        }
        engine.receive(ciphertext)
        var plaintext: [UInt8] = []
        let maximum = Self.readSize(unread: engine.unreadInboundCount)
        while true {
            switch engine.read(maximum: maximum) {
            case .data(let bytes):
                if plaintext.isEmpty { plaintext = bytes } else { plaintext += bytes }
            case .needsInput:
                return Inbound(plaintext: plaintext, end: nil)
            case .closed:
                return Inbound(plaintext: plaintext, end: .closed)
            case .failed(let failure):
                return Inbound(plaintext: plaintext, end: .failed(failure))
            }
        }
    }

    /// How much one engine read may collect when `unread` peer bytes wait: the plaintext of buffered bytes is
    /// smaller than they are, plus at most one record OpenSSL has already taken in (it reads no further ahead),
    /// so one read holds it all and nothing is joined. Rounded up to whole `ReadScratch.size` steps (the
    /// thread's scratch buffer grows to it at most a few times), and at most `largestRead`.
    static func readSize(unread: Int) -> Int {
        let needed = unread + largestRecordPlaintext
        guard needed > ReadScratch.size else { return ReadScratch.size }
        let steps = (needed + ReadScratch.size - 1) / ReadScratch.size
        return min(steps * ReadScratch.size, largestRead)
    }

    /// Encrypts `plaintext` into records for the peer (`takeRecords()`). Returns false when nothing was sealed
    /// because the connection ended (the plaintext is dropped) or because the write failed (the state is then
    /// `failed`); an empty `plaintext` seals nothing and returns true while `established`. Traps while
    /// `handshaking`.
    @discardableResult
    public func seal(_ plaintext: [UInt8]) -> Bool {
        switch state {
        case .established:
            break
        case .closed, .failed:
            return false
        case .handshaking:
            preconditionFailure("TLSLayer.seal in state \(state)")
        }
        guard !plaintext.isEmpty else { return true }
        return engine.write(plaintext) == plaintext.count
    }

    /// Whether records wait to be sent to the peer.
    public var hasRecords: Bool { engine.hasOutbound }

    /// Takes every record waiting for the peer (handshake flights, sealed data, alerts, close_notify), in order;
    /// empty when there are none.
    public func takeRecords() -> [UInt8] {
        engine.takeOutbound()
    }

    /// The transport reached its end (EOF or a reset): once the buffered bytes are used up, the next
    /// `handshake([])` fails (closed without an alert) or `decrypt([])` reports `.closed`. Legal in every state.
    public func receiveEnd() {
        engine.receiveEOF()
    }

    /// Queues our close_notify (send `takeRecords()` afterwards) and moves an `established` connection to
    /// `closed`. In any other state there is nothing to close and nothing is sent.
    public func close() {
        switch state {
        case .established:
            engine.shutdown()
        case .handshaking, .closed, .failed:
            break
        }
    }
}
