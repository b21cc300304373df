import ATSHTTP2
import ATSProxyCore
import Dispatch

/// The party a channel of a shared HTTP/2 link reports to: one lane of one `ProxyConnectionDriver`.
protocol UpstreamChannelOwner: AnyObject {
    /// Response parts for the lane's exchange.
    func channelParts(lane: Int32, _ parts: [HTTP1Event])
    /// The channel is gone (stream reset, link failed or closed): like a reset upstream connection. `code` is the
    /// stream's error code (`INTERNAL_ERROR` when the link itself ended); `HTTP_1_1_REQUIRED` asks for HTTP/1.1.
    func channelReset(lane: Int32, code: HTTP2ErrorCode)
    /// Request-body back-pressure of the channel: stop (false) or resume (true) feeding it.
    func channelWritable(lane: Int32, _ writable: Bool)
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

    /// Idle HTTP/1.1 connections kept per key (like URLSession's per-host limit): parking one more closes
    /// the oldest. Enough for the clients of one loop that are busy at once; idle clients hand theirs back
    /// after `ProxySettings.upstreamLinger`, so the excess would otherwise only sit in memory.
    static let maximumParkedPerKey = 16
    static let maximumParked = 1024

    let loop: EventLoop
    /// How long idle connections and links are kept (zero: not kept).
    let idleTime: Duration
    private var parked: [UpstreamKey: [ParkedUpstream]] = [:]
    private var parkedCount = 0
    private var links: [UpstreamKey: [UpstreamLinkDriver]] = [:]
    private var shuttingDown = false

    init(loop: EventLoop, idleTime: Duration = .seconds(30)) {
        self.loop = loop
        self.idleTime = idleTime
    }

    /// An established connection for `key`: a channel on a shared link with room, else a parked connection.
    func acquire(_ key: UpstreamKey, owner: UpstreamChannelOwner, lane: Int32) -> Acquired? {
        loop.assertInLoop()
        if let link = links[key]?.first(where: { $0.canOpenChannel }) {
            let channel = link.openChannel(owner: owner, lane: lane)
            return .channel(link, channel, link.channelLease)
        }
        while var waiting = parked[key], let entry = waiting.popLast() {
            parked[key] = waiting.isEmpty ? nil : waiting
            parkedCount -= 1
            if let connection = entry.detach() { return .connection(connection, entry.lease) }
        }
        return nil
    }

    /// Parks an idle HTTP/1.1 connection for later clients (closing the key's oldest parked one when the key
    /// is at `maximumParkedPerKey`), or closes it when it cannot be kept.
    func park(_ connection: TCPConnection, lease: UpstreamLease) {
        loop.assertInLoop()
        guard !shuttingDown, idleTime > .zero, lease.shareable, connection.isOpen else {
            connection.close()
            return
        }
        if var waiting = parked[lease.key], waiting.count >= Self.maximumParkedPerKey {
            let oldest = waiting.removeFirst()
            parked[lease.key] = waiting
            parkedCount -= 1
            oldest.detach()?.close()
        }
        guard parkedCount < Self.maximumParked else {
            connection.close()
            return
        }
        let entry = ParkedUpstream(connection: connection, lease: lease, pool: self)
        parked[lease.key, default: []].append(entry)
        parkedCount += 1
        entry.start(idleTime: idleTime)
    }

    /// A parked connection closed or timed out.
    fileprivate func unpark(_ entry: ParkedUpstream) {
        guard var waiting = parked[entry.lease.key], let index = waiting.firstIndex(where: { $0 === entry }) else {
            return
        }
        waiting.remove(at: index)
        parked[entry.lease.key] = waiting.isEmpty ? nil : waiting
        parkedCount -= 1
    }

    /// Turns a connection whose handshake chose h2 into a link and opens the first channel on it for the
    /// promoting lane. A shareable link is offered to later sessions with the same key.
    func promote(
        _ connection: TCPConnection, lease: UpstreamLease, owner: UpstreamChannelOwner, lane: Int32
    ) -> (UpstreamLinkDriver, UpstreamH2Link.ChannelID)? {
        loop.assertInLoop()
        guard let link = try? UpstreamLinkDriver(connection: connection, lease: lease, pool: self) else {
            connection.close()
            return nil
        }
        if lease.shareable && !shuttingDown { links[lease.key, default: []].append(link) }
        // The caller starts the link once it has recorded the channel.
        let channel = link.openChannel(owner: owner, lane: lane)
        return (link, channel)
    }

    /// Whether `shutdown` ran: links whose last channel closes are not kept.
    var isShuttingDown: Bool { shuttingDown }

    /// A link finished: no new channels go to it.
    func remove(_ link: UpstreamLinkDriver) {
        guard var list = links[link.lease.key], let index = list.firstIndex(where: { $0 === link }) else { return }
        list.remove(at: index)
        links[link.lease.key] = list.isEmpty ? nil : list
    }

    /// Shutdown: parked connections close; links send GOAWAY and close when their streams finish.
    func shutdown() {
        loop.assertInLoop()
        shuttingDown = true
        let entries = parked.values.flatMap { $0 }
        parked = [:]
        parkedCount = 0
        for entry in entries { entry.detach()?.close() }
        let all = links.values.flatMap { $0 }
        links = [:]
        for link in all { link.shutdown() }
    }
}

/// One idle HTTP/1.1 upstream connection waiting in the pool. While parked it is the connection's
/// handler: TLS post-handshake records (session tickets) are absorbed; data, EOF or the idle timer end it.
///
/// Loop-confined (the invariant behind `@unchecked Sendable`).
final class ParkedUpstream: TCPConnectionHandler, @unchecked Sendable {
    let lease: UpstreamLease
    private var connection: TCPConnection?
    private var timer: LoopTimer?
    private weak var pool: UpstreamPool?

    init(connection: TCPConnection, lease: UpstreamLease, pool: UpstreamPool) {
        self.connection = connection
        self.lease = lease
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

    init(connection: TCPConnection, lease: UpstreamLease, pool: UpstreamPool) throws {
        self.connection = connection
        self.lease = lease
        self.pool = pool
        channelLease = UpstreamLease(
            key: lease.key, tls: nil, facts: lease.facts, protocolName: "h2", shareable: lease.shareable)
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
    func send(_ parts: [HTTP1Event], channel: UpstreamH2Link.ChannelID) {
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
