import ATSHTTP2
import ATSProxyCore
import Dispatch

/// The party a channel of a shared HTTP/2 link reports to: one lane of one `ProxyConnectionDriver`.
protocol UpstreamChannelOwner: AnyObject {
    /// Response parts for the lane's exchange.
    func channelParts(lane: Int32, _ parts: [HTTPPart])
    /// The channel is gone (stream reset, link failed or closed): like a reset upstream connection. `code` is the
    /// stream's error code (`INTERNAL_ERROR` when the link itself ended); `HTTP_1_1_REQUIRED` asks for HTTP/1.1.
    func channelReset(lane: Int32, code: HTTP2ErrorCode)
    /// Request-body back-pressure of the channel: stop (false) or resume (true) feeding it.
    func channelWritable(lane: Int32, _ writable: Bool)
    /// The connect in flight that `lane` waited behind settled: acquire again. `linked`: it became a shared link
    /// (take a channel on it); otherwise it will not (connect without waiting again, so the waiters of an HTTP/1.1
    /// or unreachable origin do not queue behind each other). Called on a later turn of the loop, never from inside
    /// the settling call.
    func pendingLinkSettled(lane: Int32, linked: Bool)
}

/// The upstream connections of one event loop that outlive the sessions that opened them: idle HTTP/1.1
/// connections parked after a client finished with them, and shared HTTP/2 links whose channels serve
/// many clients at once. Everything is keyed by `UpstreamKey` (host, port, TLS requirements, permissive),
/// so a connection judged under one decision never carries a request decided otherwise.
///
/// Loop-confined: every method runs on `loop` (the invariant behind `@unchecked Sendable`).
final class UpstreamPool: @unchecked Sendable {
    /// What `acquire` found.
    enum Acquired {
        /// A parked HTTP/1.1 connection, detached from the pool: the caller becomes its handler.
        case connection(TCPConnection, UpstreamLease)
        /// A new channel on a shared HTTP/2 link.
        case channel(UpstreamLinkDriver, UpstreamH2Link.ChannelID, UpstreamLease)
    }

    let loop: EventLoop
    /// How long idle connections and links are kept (zero: not kept).
    let idleTime: Duration
    /// The decisions: which connection a request gets, which idle ones are kept (sans-io, tested on its own).
    private var directory: UpstreamDirectory
    /// The parked connections the directory names.
    private var parked: [UpstreamDirectory.Entry: ParkedUpstream] = [:]
    /// The shared links the directory names.
    private var links: [UpstreamDirectory.Entry: UpstreamLinkDriver] = [:]
    /// The owners of requests waiting behind connects in flight (weakly: a driver that finished is skipped).
    private var waitingOwners: [ObjectIdentifier: WeakChannelOwner] = [:]

    init(loop: EventLoop, idleTime: Duration = .seconds(30)) {
        self.loop = loop
        self.idleTime = idleTime
        directory = UpstreamDirectory(keepsIdle: idleTime > .zero)
    }

    /// An established connection for `key`, as the directory chooses: a channel on a shared link with room, else
    /// a parked connection (one that closed while parked is skipped), else nil (connect).
    func acquire(_ key: UpstreamKey, owner: UpstreamChannelOwner, lane: Int32) -> Acquired? {
        loop.assertInLoop()
        while true {
            let choice = directory.acquire(key) { [links] entry in links[entry]?.canOpenChannel ?? false }
            switch choice {
            case .channel(let entry):
                guard let link = links[entry] else { preconditionFailure("UpstreamPool: no link for \(entry)") }
                let channel = link.openChannel(owner: owner, lane: lane)
                return .channel(link, channel, link.channelLease)
            case .parked(let entry):
                guard let waiting = parked.removeValue(forKey: entry) else {
                    preconditionFailure("UpstreamPool: no parked connection for \(entry)")
                }
                if let connection = waiting.detach() { return .connection(connection, waiting.lease) }
            case .connect:
                return nil
            }
        }
    }

    /// For a request `acquire` found nothing for: open the connection (and `settle` the key once its protocol is
    /// known), wait for one already on its way (`pendingLinkSettled` follows), or just connect.
    func connecting(
        _ key: UpstreamKey, mayBecomeLink: Bool, owner: UpstreamChannelOwner, lane: Int32
    ) -> UpstreamDirectory.Connecting {
        loop.assertInLoop()
        let requester = UpstreamDirectory.Requester(owner: ObjectIdentifier(owner), lane: lane)
        let answer = directory.connecting(key, mayBecomeLink: mayBecomeLink, requester: requester)
        if case .wait = answer { waitingOwners[ObjectIdentifier(owner)] = WeakChannelOwner(owner) }
        return answer
    }

    /// The connection `owner`'s `lane` opened for `key` settled (`linked`: it became a shared link): each request
    /// that waited for it is told, on the next turn of the loop, to acquire again.
    func settle(_ key: UpstreamKey, owner: UpstreamChannelOwner, lane: Int32, linked: Bool) {
        loop.assertInLoop()
        let waiters = directory.settle(key, opener: .init(owner: ObjectIdentifier(owner), lane: lane))
        guard !waiters.isEmpty else { return }
        // The owners are looked up now (weakly): another settle on this turn must not be able to lose them.
        let told = waiters.map { (owner: waitingOwners[$0.owner] ?? WeakChannelOwner(nil), lane: $0.lane) }
        // Entries of drivers that are gone are dropped; live ones stay while they may wait again.
        waitingOwners = waitingOwners.filter { $0.value.owner != nil }
        loop.execute { [told] in
            for waiter in told { waiter.owner.owner?.pendingLinkSettled(lane: waiter.lane, linked: linked) }
        }
    }

    /// `owner`'s `lane` no longer waits for `key` (its exchange ended first).
    func stopWaiting(_ key: UpstreamKey, owner: UpstreamChannelOwner, lane: Int32) {
        loop.assertInLoop()
        directory.stopWaiting(key, requester: .init(owner: ObjectIdentifier(owner), lane: lane))
    }

    /// Parks an idle HTTP/1.1 connection for later clients, or closes it when the directory does not keep it (a
    /// key's oldest parked connection closes when the key is full).
    func park(_ connection: TCPConnection, lease: UpstreamLease) {
        loop.assertInLoop()
        guard connection.isOpen else {
            connection.close()
            return
        }
        switch directory.park(lease.key, shareable: lease.shareable) {
        case .refused:
            connection.close()
        case .parked(let entry, let evicted):
            if let evicted { parked.removeValue(forKey: evicted)?.detach()?.close() }
            let waiting = ParkedUpstream(connection: connection, lease: lease, entry: entry, pool: self)
            parked[entry] = waiting
            waiting.start(idleTime: idleTime)
        }
    }

    /// A parked connection closed or timed out.
    fileprivate func unpark(_ waiting: ParkedUpstream) {
        guard parked[waiting.entry] === waiting else { return }
        parked[waiting.entry] = nil
        directory.unpark(waiting.entry)
    }

    /// Turns a connection whose handshake chose h2 into a link and opens the first channel on it for the
    /// promoting lane. A shareable link is offered to later sessions with the same key.
    func promote(
        _ connection: TCPConnection, lease: UpstreamLease, owner: UpstreamChannelOwner, lane: Int32
    ) -> (UpstreamLinkDriver, UpstreamH2Link.ChannelID)? {
        loop.assertInLoop()
        let entry = directory.addLink(lease.key, shareable: lease.shareable)
        guard let link = try? UpstreamLinkDriver(connection: connection, lease: lease, entry: entry, pool: self) else {
            directory.removeLink(entry)
            connection.close()
            return nil
        }
        links[entry] = link
        // The caller starts the link once it has recorded the channel.
        let channel = link.openChannel(owner: owner, lane: lane)
        return (link, channel)
    }

    /// Whether `shutdown` ran: links whose last channel closes are not kept.
    var isShuttingDown: Bool { directory.isShuttingDown }

    /// A link finished: no new channels go to it.
    func remove(_ link: UpstreamLinkDriver) {
        guard links[link.entry] === link else { return }
        links[link.entry] = nil
        directory.removeLink(link.entry)
    }

    /// Shutdown: parked connections close; links send GOAWAY and close when their streams finish.
    func shutdown() {
        loop.assertInLoop()
        let closing = directory.shutdown()
        for entry in closing.parked { parked.removeValue(forKey: entry)?.detach()?.close() }
        for entry in closing.links { links.removeValue(forKey: entry)?.shutdown() }
        // Unshared links were never offered; they close with their last stream (`isShuttingDown`).
        links = [:]
    }
}

/// A weak reference to a channel owner (a driver that finished is not kept alive by the requests it left waiting).
/// Loop-confined like the pool and its owners (the invariant behind `@unchecked Sendable`: it only crosses into a
/// closure the same loop runs).
struct WeakChannelOwner: @unchecked Sendable {
    weak var owner: UpstreamChannelOwner?
    init(_ owner: UpstreamChannelOwner?) { self.owner = owner }
}

/// One idle HTTP/1.1 upstream connection waiting in the pool. While parked it is the connection's
/// handler: TLS post-handshake records (session tickets) are absorbed; data, EOF or the idle timer end it.
///
/// Loop-confined (the invariant behind `@unchecked Sendable`).
final class ParkedUpstream: TCPConnectionHandler, @unchecked Sendable {
    let lease: UpstreamLease
    /// Its name in the pool's directory.
    let entry: UpstreamDirectory.Entry
    private var connection: TCPConnection?
    private var timer: LoopTimer?
    private weak var pool: UpstreamPool?

    init(connection: TCPConnection, lease: UpstreamLease, entry: UpstreamDirectory.Entry, pool: UpstreamPool) {
        self.connection = connection
        self.lease = lease
        self.entry = entry
        self.pool = pool
    }

    func start(idleTime: Duration) {
        guard let connection else { return }
        connection.handler = self
        connection.resumeReading()
        // Weak: the loop's timer heap holds the timer, the timer its closure; a strong capture made the entry
        // and its connection a cycle that outlived the pool (LeakSanitizer saw it at every exit).
        timer = LoopTimer.oneShot(on: connection.loop, after: idleTime) { [weak self] in
            guard let self else { return }
            pool?.unpark(self)
            detach()?.close()
        }
    }

    /// Takes the connection out of the pool's hands (the caller sets itself as handler).
    func detach() -> TCPConnection? {
        timer?.cancel()
        timer = nil
        let detached = connection
        connection = nil
        return detached
    }

    private func discard() {
        pool?.unpark(self)
        detach()?.close()
    }

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        switch lease.absorbWhileIdle([UInt8](bytes)) {
        case .keep(let outbound):
            if !outbound.isEmpty { connection.write(outbound) }
        case .discard:
            discard()
        }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        discard()
    }

    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
        connection.handler = nil
        if self.connection === connection { discard() }
    }
}

/// One shared upstream HTTP/2 connection on the loop: the socket plus the sans-io `UpstreamH2Link`, and the
/// owners (driver lanes) of its channels. Outputs are delivered in order even when an owner's reaction
/// writes to the link again (re-entrant calls queue behind the outputs being delivered), so TLS records
/// reach the socket in the order the engine produced them.
///
/// Loop-confined (the invariant behind `@unchecked Sendable`).
final class UpstreamLinkDriver: TCPConnectionHandler, @unchecked Sendable {
    /// Who a channel reports to.
    struct ChannelOwner {
        weak var owner: UpstreamChannelOwner?
        let lane: Int32
    }

    /// Lifecycle of the link's connection.
    enum State {
        /// Carrying streams.
        case open
        /// GOAWAY sent or the link asked to close: no new channels.
        case closing
        /// The socket is closed.
        case closed
    }

    /// The lease the link was promoted with (its TLS engine is the link's own).
    let lease: UpstreamLease
    /// Its name in the pool's directory.
    let entry: UpstreamDirectory.Entry
    /// What a session gets for a channel: the link's facts, no TLS engine (the link runs the TLS).
    let channelLease: UpstreamLease
    let link: UpstreamH2Link
    private let connection: TCPConnection
    private weak var pool: UpstreamPool?
    private var owners: [UpstreamH2Link.ChannelID: ChannelOwner] = [:]
    private var queue: [UpstreamH2Link.Output] = []
    private var delivering = false
    private var idleTimer: LoopTimer?
    private var state = State.open

    init(connection: TCPConnection, lease: UpstreamLease, entry: UpstreamDirectory.Entry, pool: UpstreamPool) throws {
        self.connection = connection
        self.lease = lease
        self.entry = entry
        self.pool = pool
        channelLease = UpstreamLease(
            key: lease.key, tls: nil, facts: lease.facts, wire: .h2, shareable: lease.shareable)
        link = try UpstreamH2Link(tls: lease.tls)
    }

    /// Sends the preface and takes over the socket (plaintext the TLS engine already holds is read too).
    func start() {
        connection.handler = self
        connection.resumeReading()
        deliver(link.start())
        deliver(link.receive([]))
    }

    /// The address of the link's peer: the origin, or the upstream proxy its tunnel goes through.
    var peerAddress: SocketAddress? { connection.remoteAddress }

    var canOpenChannel: Bool {
        switch state {
        case .open: link.canOpenChannel
        case .closing, .closed: false
        }
    }

    func openChannel(owner: UpstreamChannelOwner, lane: Int32) -> UpstreamH2Link.ChannelID {
        idleTimer?.cancel()
        idleTimer = nil
        let channel = link.openChannel()
        owners[channel] = ChannelOwner(owner: owner, lane: lane)
        return channel
    }

    /// Request parts of the channel's exchange, sent on the link.
    func send(_ parts: [HTTPPart], channel: UpstreamH2Link.ChannelID) {
        deliver(link.send(parts, channel: channel))
    }

    func setReadingPaused(_ paused: Bool, channel: UpstreamH2Link.ChannelID) {
        deliver(link.setReadingPaused(paused, channel: channel))
    }

    /// The owner is done with the channel (its session closed it or went back to the pool).
    func closeChannel(_ channel: UpstreamH2Link.ChannelID) {
        guard owners.removeValue(forKey: channel) != nil else { return }
        deliver(link.closeChannel(channel))
        channelsChanged()
    }

    /// GOAWAY; the connection closes when the streams in flight finish.
    func shutdown() {
        switch state {
        case .open:
            state = .closing
            idleTimer?.cancel()
            idleTimer = nil
            deliver(link.shutdown())
        case .closing, .closed:
            break
        }
    }

    private func channelsChanged() {
        guard owners.isEmpty, case .open = state else { return }
        let idleTime = pool?.idleTime ?? .zero
        guard lease.shareable, idleTime > .zero, pool?.isShuttingDown == false else {
            pool?.remove(self)
            shutdown()
            return
        }
        idleTimer?.cancel()
        idleTimer = LoopTimer.oneShot(on: connection.loop, after: idleTime) { [weak self] in
            guard let self else { return }
            idleTimer = nil
            pool?.remove(self)
            shutdown()
        }
    }

    private func deliver(_ outputs: [UpstreamH2Link.Output]) {
        queue += outputs
        guard !delivering else { return }
        delivering = true
        var index = 0
        while index < queue.count {
            handle(queue[index])
            index += 1
        }
        queue.removeAll()
        delivering = false
    }

    private func handle(_ output: UpstreamH2Link.Output) {
        switch output {
        case .network(let bytes):
            switch state {
            case .open, .closing: connection.write(bytes)
            case .closed: break
            }
        case .channelParts(let channel, let parts):
            guard let entry = owners[channel] else { return }
            entry.owner?.channelParts(lane: entry.lane, parts)
        case .channelReset(let channel, let code):
            guard let entry = owners.removeValue(forKey: channel) else { return }
            entry.owner?.channelReset(lane: entry.lane, code: code)
            channelsChanged()
        case .channelWritable(let channel, let writable):
            guard let entry = owners[channel] else { return }
            entry.owner?.channelWritable(lane: entry.lane, writable)
        case .closeConnection:
            finish(closeSocket: true)
        }
    }

    /// The link is over: owners still attached see a reset, the pool forgets it, the socket closes.
    private func finish(closeSocket: Bool) {
        switch state {
        case .closed: return
        case .open, .closing: state = .closed
        }
        idleTimer?.cancel()
        idleTimer = nil
        pool?.remove(self)
        let remaining = owners
        owners = [:]
        for entry in remaining.values { entry.owner?.channelReset(lane: entry.lane, code: .internalError) }
        if closeSocket { connection.closeAfterFlush() }
    }

    // MARK: - TCPConnectionHandler

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        deliver(link.receive([UInt8](bytes)))
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        deliver(link.receiveEOF())
        finish(closeSocket: true)
    }

    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
        connection.handler = nil
        if case .closed = state { return }
        deliver(link.receiveEOF())
        finish(closeSocket: false)
    }
}
