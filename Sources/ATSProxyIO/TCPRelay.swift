/// Relays bytes both ways between two connections on the same loop (a CONNECT passthrough
/// tunnel), with back-pressure: when one side's write queue crosses its high watermark the other
/// side stops reading until the queue falls to the low watermark. So each direction buffers at
/// most the high watermark plus one loop read buffer.
///
/// Contract: EOF from one side becomes `shutdownWrite` on the other (after its queue drains); when
/// one side closes abnormally (reset, error, local close) the other is closed after flushing what
/// was already queued for it. `onFinished` runs once, on the loop, after both are closed.
///
/// Threading: create and start on the connections' loop; both connections must share it. All
/// state is loop-confined (the invariant behind `@unchecked Sendable`). The connections hold the
/// relay (through their handlers) until they close, so nobody else needs to keep it.
public final class TCPRelay: @unchecked Sendable {
    /// Per-relay counters, delivered in `onFinished`.
    public struct Statistics: Sendable, Equatable {
        /// Bytes read from the first connection and written to the second.
        public var bytesFirstToSecond: UInt64 = 0
        /// Bytes read from the second connection and written to the first.
        public var bytesSecondToFirst: UInt64 = 0
        /// Largest write queue observed on the first connection.
        public var maxQueuedFirst = 0
        /// Largest write queue observed on the second connection.
        public var maxQueuedSecond = 0
        /// How the first connection ended.
        public var firstCloseReason: TCPCloseReason?
        /// How the second connection ended.
        public var secondCloseReason: TCPCloseReason?
    }

    /// Lifecycle of the relay.
    enum State {
        /// Created; handlers not installed.
        case idle
        /// Relaying; the number of connections still open.
        case relaying(openSides: Int)
        /// Both sides closed and `onFinished` delivered.
        case finished
    }

    /// One direction's endpoint handler: reads from `connection`, writes to the peer.
    final class Side: TCPConnectionHandler {
        unowned let relay: TCPRelay
        let isFirst: Bool

        init(relay: TCPRelay, isFirst: Bool) {
            self.relay = relay
            self.isFirst = isFirst
        }

        func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
            relay.forward(bytes, fromFirst: isFirst)
        }

        func connectionDidReadEOF(_ connection: TCPConnection) {
            relay.peer(ofFirst: isFirst).shutdownWrite()
        }

        func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool) {
            let source = relay.peer(ofFirst: isFirst)
            if isWritable { source.resumeReading() } else { source.pauseReading() }
        }

        func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
            relay.sideClosed(isFirst: isFirst, reason: reason)
        }
    }

    /// The loop both connections live on.
    public let loop: EventLoop
    /// The client-side (or first) connection.
    public let first: TCPConnection
    /// The upstream (or second) connection.
    public let second: TCPConnection
    /// Counters so far.
    public private(set) var statistics = Statistics()

    private var state = State.idle
    private var sides: [Side] = []
    private var onFinished: ((Statistics) -> Void)?

    /// Pairs two open connections on the same loop. Call `start()` to begin relaying.
    public init(_ first: TCPConnection, _ second: TCPConnection, onFinished: ((Statistics) -> Void)? = nil) {
        precondition(first.loop === second.loop, "a relay needs both connections on one loop")
        self.loop = first.loop
        self.first = first
        self.second = second
        self.onFinished = onFinished
    }

    /// Installs the handlers and starts both connections (a no-op for already started ones).
    /// The relay keeps itself alive through `sides` until both connections closed.
    public func start() {
        loop.assertInLoop()
        switch state {
        case .idle:
            let firstSide = Side(relay: self, isFirst: true)
            let secondSide = Side(relay: self, isFirst: false)
            sides = [firstSide, secondSide]
            state = .relaying(openSides: 2)
            first.handler = firstSide
            second.handler = secondSide
            first.start()
            second.start()
            retainSelf = self
        case .relaying, .finished:
            return
        }
    }

    /// Self-retention while relaying: the sides hold the relay `unowned`, so it owns itself until
    /// both connections have closed.
    private var retainSelf: TCPRelay?

    fileprivate func peer(ofFirst isFirst: Bool) -> TCPConnection {
        isFirst ? second : first
    }

    fileprivate func forward(_ bytes: UnsafeRawBufferPointer, fromFirst: Bool) {
        let target = peer(ofFirst: fromFirst)
        target.write(bytes)
        if fromFirst {
            statistics.bytesFirstToSecond += UInt64(bytes.count)
            statistics.maxQueuedSecond = max(statistics.maxQueuedSecond, target.maxQueuedBytes)
        } else {
            statistics.bytesSecondToFirst += UInt64(bytes.count)
            statistics.maxQueuedFirst = max(statistics.maxQueuedFirst, target.maxQueuedBytes)
        }
    }

    fileprivate func sideClosed(isFirst: Bool, reason: TCPCloseReason) {
        if isFirst { statistics.firstCloseReason = reason } else { statistics.secondCloseReason = reason }
        switch state {
        case .idle, .finished:
            preconditionFailure("TCPRelay: side closed in state \(state)")
        case .relaying(let openSides):
            switch reason {
            case .finished:
                break
            case .local, .reset, .error:
                peer(ofFirst: isFirst).closeAfterFlush()
            }
            if openSides > 1 {
                state = .relaying(openSides: openSides - 1)
                return
            }
            state = .finished
            let onFinished = onFinished
            self.onFinished = nil
            onFinished?(statistics)
            sides = []
            retainSelf = nil
        }
    }
}
