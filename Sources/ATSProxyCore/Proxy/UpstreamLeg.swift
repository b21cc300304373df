import ATSTLS

/// The upstream connection of an `ExchangeLeg` (sans-io state only): where it stands (none, connecting,
/// handshaking, ready), what it speaks, the handshake facts recorded on every request it carries, whether the
/// pool may take it back, and what waits for it to be ready. It outlives exchanges: kept alive between requests,
/// parked in the loop's pool or promoted to a shared HTTP/2 link by its leg's commands.
///
/// Transitions: `connect` from `.none` only; `handshake` from `.connecting` for the same key; `ready` from
/// `.connecting` or `.handshaking` for the same key; `release` from anywhere. Any other transition is a fault of
/// the leg and traps. The leg decides; this type only keeps the state consistent.
///
/// Value type; one per leg, used on its owner's event loop. The TLS engine it holds is the leg's.
struct UpstreamLeg {
    /// What the upstream connection is doing.
    enum State {
        /// No upstream connection.
        case none
        /// TCP connect in progress.
        case connecting(UpstreamKey)
        /// TCP open; TLS handshake in progress.
        case handshaking(UpstreamKey, TLSConnection)
        /// Ready for requests (TLS established when the key has requirements; nil for cleartext and for a
        /// channel of a shared HTTP/2 link, whose link owns the TLS).
        case ready(UpstreamKey, TLSConnection?)
    }

    /// Where the connection stands; changed only by the transitions below.
    private(set) var state = State.none
    /// What the connection speaks: how request parts are encoded for it once it is ready.
    private(set) var wire = UpstreamWire.http1
    /// TLS facts of the connection's handshake (recorded on every request it carries).
    var facts: [String: String]?
    /// The peer IP address of the connection (`ProxyEvent.upstreamPeer`).
    var address: String?
    /// Whether the connection may go back to the loop's pool when the leg is done with it.
    var shareable = false
    /// The connection is ready and carries no exchange.
    var idle = false
    /// Raw bytes waiting for the connection to become ready (a tunnel's).
    var pendingBytes: [UInt8] = []
    /// Request parts of the current exchange waiting for the connection to be ready: they are encoded for it
    /// (HTTP/1.1 text, or handed to an HTTP/2 channel as they are) only once it is known which one it is.
    var pendingParts: [HTTPPart] = []

    /// Whether there is no connection.
    var isNone: Bool {
        if case .none = state { return true }
        return false
    }

    /// Whether the connection is ready for requests.
    var isReady: Bool {
        if case .ready = state { return true }
        return false
    }

    /// Whether the connection is opening (TCP or TLS).
    var isOpening: Bool {
        switch state {
        case .connecting, .handshaking: true
        case .none, .ready: false
        }
    }

    /// A connection for `key` is asked for: the facts of any earlier one are forgotten. Traps unless `.none`.
    mutating func connect(_ key: UpstreamKey) {
        guard case .none = state else { preconditionFailure("UpstreamLeg: connect while \(state)") }
        state = .connecting(key)
        facts = nil
        address = nil
        wire = .http1
        shareable = false
        idle = false
    }

    /// TCP is up and the TLS handshake for `key` starts with `tls`. Traps unless connecting for `key`.
    mutating func handshake(_ key: UpstreamKey, _ tls: TLSConnection) {
        guard case .connecting(let current) = state, current == key else {
            preconditionFailure("UpstreamLeg: a handshake for \(key.host) while \(state)")
        }
        state = .handshaking(key, tls)
    }

    /// The connection for `key` is ready and speaks `wire`; `tls` is its engine when the leg keeps one. Traps
    /// unless connecting or handshaking for `key`.
    mutating func ready(_ key: UpstreamKey, tls: TLSConnection?, wire: UpstreamWire = .http1) {
        switch state {
        case .connecting(let current) where current == key, .handshaking(let current, _) where current == key:
            state = .ready(key, tls)
            self.wire = wire
        case .none, .connecting, .handshaking, .ready:
            preconditionFailure("UpstreamLeg: ready for \(key.host) while \(state)")
        }
    }

    /// The pool handed over `lease`'s connection for the key being connected: ready at once, with the lease's
    /// facts, wire and shareability.
    mutating func adopt(_ lease: UpstreamLease) {
        ready(lease.key, tls: lease.tls, wire: lease.wire)
        facts = lease.facts
        shareable = lease.shareable
    }

    /// The leg let go of the connection (closed, released to the pool, or handed to a link), or never had one.
    mutating func release() {
        state = .none
    }
}
