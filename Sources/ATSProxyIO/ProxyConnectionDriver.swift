import ATSHTTP2
import ATSPolicy
import ATSProxyCore
import Foundation

/// Runs one `ProxySession` on one event loop: feeds it socket events with the current time and
/// executes its commands on the client connection, the upstream connections and the timers.
///
/// A session has lane 0 (its own upstream and timer) and, once an intercepted client speaks HTTP/2,
/// one lane per stream session (`ProxyEvent.stream` / `ProxyCommand.stream`). Back-pressure is
/// handled here: when the client's write queue passes its high watermark every lane's upstream stops
/// being read; when lane 0's upstream write queue does, the client stops being read, until they drain.
/// An HTTP/2 lane's upstream that backs up is reported to the session instead (`upstreamWritable`), which
/// withholds that stream's flow-control credit: one slow origin does not stall the client's other streams.
///
/// Upstream connections come from the loop's `UpstreamPool` when the session allows reuse: a parked
/// HTTP/1.1 connection, or a channel of a shared HTTP/2 link; idle ones go back to it.
///
/// Events are handled one at a time: an event raised while the session's commands are being run (a
/// pooled connection handed over, a channel's bytes) waits until they are done, so the bytes of the
/// session's TLS engines reach the sockets in the order they were produced.
///
/// Loop-confined: every method runs on `loop` (the invariant behind `@unchecked Sendable`). The
/// connections hold this driver as their handler until they close.
final class ProxyConnectionDriver: TCPConnectionHandler, UpstreamChannelOwner, @unchecked Sendable {
    /// The upstream connection (or HTTP/2 channel) and timer of one lane.
    final class Lane {
        let id: Int32
        var upstream: TCPConnection?
        /// A channel of a shared HTTP/2 link, instead of a connection of its own.
        var channel: (link: UpstreamLinkDriver, id: UpstreamH2Link.ChannelID)?
        /// The channel asked for no more request bytes for now.
        var channelBlocked = false
        /// A direct `TCPConnector` or an `UpstreamProxyConnector`.
        var connector: (any UpstreamConnectAttempt)?
        var timer: LoopTimer?
        /// The session asked not to read this upstream (its client is not taking the bytes).
        var readsPausedBySession = false
        /// An HTTP/2 lane was told its upstream stopped taking bytes and not yet that it drained.
        var reportedBackedUp = false
        /// The lane opened a connection that may become a shared HTTP/2 link: requests for the same key wait for
        /// it until it settles (`settleOpening`).
        var opening: UpstreamKey?
        /// The lane waits behind another lane's connect in flight (`pendingLinkSettled` resumes it).
        var waiting: (key: UpstreamKey, host: String, port: Int)?

        init(id: Int32) { self.id = id }
    }

    let loop: EventLoop
    let client: TCPConnection
    private var session: ProxySession
    private var lanes: [Int32: Lane] = [:]
    private var laneOfConnection: [ObjectIdentifier: Int32] = [:]
    private let resolver: Resolver
    /// Every upstream connection goes through this proxy when set (`--upstream-proxy`).
    private let upstreamProxy: UpstreamProxy?
    /// Resolves the upstream proxy's own name: the unscreened resolver (the proxy may be on this machine).
    private let proxyResolver: Resolver
    private let connectTimeout: Duration
    private let log: ProxyLogSink
    private let pool: UpstreamPool
    private let onFinished: @Sendable () -> Void
    private var finished = false
    /// Events raised while commands run wait here (see the type's contract).
    private var pendingEvents: [ProxyEvent] = []
    /// The storage of the command list, kept from one event to the next (`handleAndExecute`).
    private var commandBuffer: [ProxyCommand] = []
    private var running = false
    /// The session asked not to read from the client (its upstream is not ready).
    private var sessionPausedClient = false
    /// `reportCut` ran: a connection gets one such line.
    private var reported = false

    init(
        client: TCPConnection, services: ProxyServices, connectionNumber: Int, resolver: Resolver,
        upstreamProxy: UpstreamProxy? = nil, proxyResolver: Resolver? = nil, connectTimeout: Duration,
        log: ProxyLogSink, pool: UpstreamPool, onFinished: @escaping @Sendable () -> Void
    ) {
        self.loop = client.loop
        self.pool = pool
        self.client = client
        self.resolver = resolver
        self.upstreamProxy = upstreamProxy
        self.proxyResolver = proxyResolver ?? resolver
        self.connectTimeout = connectTimeout
        self.log = log
        self.onFinished = onFinished
        let address = client.remoteAddress?.description ?? "unknown"
        session = ProxySession(
            services: services, clientAddress: address, connectionNumber: connectionNumber,
            localAddress: client.localAddress?.clientFacing.description)
    }

    /// Shutdown: asks the session to close when idle (runs on the loop).
    func drain() {
        loop.execute { [self] in run(.drain) }
    }

    /// Attaches to the client connection and starts reading.
    func start() {
        loop.assertInLoop()
        client.handler = self
        execute(session.start())
        client.start()
    }

    private func run(_ event: ProxyEvent) {
        loop.assertInLoop()
        guard !finished else { return }
        if running {
            pendingEvents.append(event)
            return
        }
        running = true
        handleAndExecute(event)
        while !pendingEvents.isEmpty && !finished {
            handleAndExecute(pendingEvents.removeFirst())
        }
        pendingEvents = []
        running = false
    }

    /// One event through the session and its commands through `execute`, in a command list whose storage
    /// is kept for the next event.
    private func handleAndExecute(_ event: ProxyEvent) {
        var commands = commandBuffer
        commandBuffer = []
        session.handle(event, now: Date(), into: &commands)
        execute(commands)
        commands.removeAll(keepingCapacity: true)
        commandBuffer = commands
    }

    private func run(lane: Int32, _ event: ProxyEvent) {
        run(lane == 0 ? event : .stream(lane, event))
    }

    private func lane(_ id: Int32) -> Lane {
        if let lane = lanes[id] { return lane }
        let lane = Lane(id: id)
        lanes[id] = lane
        return lane
    }

    private func execute(_ commands: [ProxyCommand]) {
        // Consecutive writes to the same side are coalesced into one connection write. A lone write
        // (the common case) is passed on as the command's own array, without being copied here (the
        // epoll loop copies a small one into its queue until the end of the batch).
        var clientBuffer: [UInt8] = []
        var upstreamBuffer: [UInt8] = []
        var upstreamLane: Int32 = 0
        func flush() {
            if !clientBuffer.isEmpty {
                client.write(clientBuffer)
                clientBuffer = []
            }
            if !upstreamBuffer.isEmpty {
                if let lane = lanes[upstreamLane] {
                    // A session on an HTTP/2 channel sends request parts (`sendToUpstreamChannel`), never bytes.
                    assert(lane.channel == nil, "raw upstream bytes for a lane on an HTTP/2 channel")
                    lane.upstream?.write(upstreamBuffer)
                }
                upstreamBuffer = []
            }
        }
        func perform(_ command: ProxyCommand, lane id: Int32) {
            switch command {
            case .writeToClient(let bytes):
                if !upstreamBuffer.isEmpty { flush() }
                // The first array of a run is adopted as it is (no copy); later ones are appended.
                if clientBuffer.isEmpty { clientBuffer = bytes } else { clientBuffer += bytes }
            case .writeToUpstream(let bytes):
                if !clientBuffer.isEmpty || (!upstreamBuffer.isEmpty && upstreamLane != id) { flush() }
                upstreamLane = id
                if upstreamBuffer.isEmpty { upstreamBuffer = bytes } else { upstreamBuffer += bytes }
            case .sendToUpstreamChannel(let parts):
                flush()
                if let channel = lanes[id]?.channel { channel.link.send(parts, channel: channel.id) }
            case .respond:
                preconditionFailure(
                    "a connection's session never answers a stream part itself: lanes' go to the frontend")
            case .closeClient:
                flush()
                if id == 0 {
                    // finish() waits for connectionDidClose: the write queue must reach the client
                    // before the connection stops counting as live (shutdown waits for live ones).
                    for lane in lanes.values { closeLane(lane) }
                    lanes = [:]
                    reportCut()
                    client.closeAfterFlush()
                    if client.isOpen { resetIfNeverDrained() }
                } else if let lane = lanes.removeValue(forKey: id) {
                    closeLane(lane)
                }
            case .connectUpstream(let host, let port, let reuse):
                flush()
                connectUpstream(lane: lane(id), host: host, port: port, reuse: reuse)
            case .closeUpstream:
                flush()
                if let lane = lanes[id] { closeUpstream(lane) }
            case .releaseUpstream(let lease):
                flush()
                if let lane = lanes[id] { releaseUpstream(lane, lease: lease) }
            case .promoteUpstream(let lease):
                flush()
                promoteUpstream(lane(id), lease: lease)
            case .upstreamSettled:
                if let lane = lanes[id] { settleOpening(lane) }
            case .armTimer(let seconds):
                armTimer(lane: lane(id), seconds: seconds)
            case .cancelTimer:
                lanes[id]?.timer?.cancel()
                lanes[id]?.timer = nil
            case .pauseClientReads:
                sessionPausedClient = true
                client.pauseReading()
            case .resumeClientReads:
                sessionPausedClient = false
                if upstreamsWritable && !clientBacklogged { client.resumeReading() }
            case .pauseUpstreamReads:
                let lane = lane(id)
                lane.readsPausedBySession = true
                setUpstreamReading(lane, false)
            case .resumeUpstreamReads:
                let lane = lane(id)
                lane.readsPausedBySession = false
                if client.isWritable { setUpstreamReading(lane, true) }
            case .log(let record):
                log.log(record)
            case .stream(let inner, let command):
                perform(command, lane: inner)
            }
        }
        for command in commands { perform(command, lane: 0) }
        flush()
    }

    /// Re-arms a lane's timer: an armed one is pushed back rather than replaced (it restarts on nearly every event).
    private func armTimer(lane: Lane, seconds: Double) {
        let delay = Duration.milliseconds(Int((seconds * 1000).rounded()))
        if let timer = lane.timer, timer.reschedule(after: delay) { return }
        let id = lane.id
        lane.timer = LoopTimer.oneShot(on: loop, after: delay) { [self] in
            lanes[id]?.timer = nil
            run(lane: id, .timerFired)
        }
    }

    /// Whether lane 0's upstream takes bytes. Only lane 0 (HTTP/1.1 and tunnels) pauses the client socket: an
    /// HTTP/2 lane whose upstream backs up is told so (`upstreamWritable`) and its frontend holds back that
    /// stream's flow-control credit, so the client's other streams keep moving.
    private var upstreamsWritable: Bool {
        guard let lane = lanes[0] else { return true }
        return !lane.channelBlocked && (lane.upstream?.isWritable ?? true)
    }

    /// Logs at most one line for the connection as it ends: the session's `closingReport` (cut for a protocol error
    /// or a flood, or streams reset and refused in numbers), or that it ends while the client is not reading what it
    /// was sent (`clientBacklogged`). Ordinary connections leave no line.
    private func reportCut() {
        guard !reported else { return }
        reported = true
        let who = "connection \(session.connectionNumber) from \(client.remoteAddress?.description ?? "unknown")"
        if let report = session.closingReport {
            log.note("\(who): \(report); largest backlog \(client.maxQueuedBytes) bytes")
        } else if clientBacklogged {
            log.note(
                "\(who): closed while the client was not reading: \(client.queuedBytes) bytes unread, largest "
                    + "backlog \(client.maxQueuedBytes) bytes")
        }
    }

    /// A closing client that reads nothing more does not keep its socket and backlog: once a `--idle-timeout`
    /// passes without the queue draining, the connection is reset.
    private func resetIfNeverDrained() {
        let seconds = session.services.settings.idleTimeout
        let client = client
        var written = client.bytesWritten
        func check() {
            guard client.isOpen else { return }
            if client.bytesWritten == written {
                client.reset()
                return
            }
            written = client.bytesWritten
            _ = LoopTimer.oneShot(on: loop, after: .milliseconds(Int(seconds * 1000))) { check() }
        }
        _ = LoopTimer.oneShot(on: loop, after: .milliseconds(Int(seconds * 1000))) { check() }
    }

    /// Whether the client's write queue is over its high watermark and the session wants no client bytes meanwhile
    /// (HTTP/2: every frame the client sends may add a reply to a queue it is not reading).
    private var clientBacklogged: Bool { !client.isWritable && session.stopsReadingWhileClientBacklogged }

    /// Tells an HTTP/2 lane that its upstream backed up or drained; a lane whose upstream goes away while
    /// backed up is told it drained (its next upstream starts empty).
    private func reportBackedUp(_ lane: Lane?, _ backedUp: Bool) {
        guard let lane, lane.id != 0, lane.reportedBackedUp != backedUp else { return }
        lane.reportedBackedUp = backedUp
        run(lane: lane.id, .upstreamWritable(!backedUp))
    }

    private func setUpstreamReading(_ lane: Lane, _ reading: Bool) {
        if let channel = lane.channel {
            channel.link.setReadingPaused(!reading, channel: channel.id)
        } else if let upstream = lane.upstream, upstream.isOpen {
            if reading { upstream.resumeReading() } else { upstream.pauseReading() }
        }
    }

    /// `mayWait`: the request may wait behind a connect in flight for its key (false once such a connect settled
    /// without becoming a link: it connects at once).
    private func connectUpstream(lane: Lane, host: String, port: Int, reuse: UpstreamKey?, mayWait: Bool = true) {
        closeUpstream(lane)
        let id = lane.id
        if let reuse, !finished, let acquired = pool.acquire(reuse, owner: self, lane: id) {
            switch acquired {
            case .connection(let connection, let lease):
                attach(connection, to: lane)
                reportPeer(lane: id, connection.remoteAddress)
                run(lane: id, .upstreamReused(lease))
            case .channel(let link, let channel, let lease):
                lane.channel = (link, channel)
                if !client.isWritable || lane.readsPausedBySession { link.setReadingPaused(true, channel: channel) }
                reportPeer(lane: id, link.peerAddress)
                run(lane: id, .upstreamReused(lease))
            }
            return
        }
        if let reuse, !finished, mayWait {
            switch pool.connecting(reuse, mayBecomeLink: mayBecomeLink(reuse), owner: self, lane: id) {
            case .wait:
                lane.waiting = (reuse, host, port)
                return
            case .open:
                lane.opening = reuse
            case .connect:
                break
            }
        }
        if let upstreamProxy {
            lane.connector = UpstreamProxyConnector.connect(
                host: host, port: port, through: upstreamProxy, on: loop, resolver: proxyResolver,
                timeout: connectTimeout
            ) { [self] result in
                upstreamConnected(lane: id, result.map { ($0.connection, $0.remaining) })
            }
            return
        }
        lane.connector = TCPConnector.connect(
            host: host, port: UInt16(clamping: port), on: loop, resolver: resolver, timeout: connectTimeout
        ) { [self] result in
            upstreamConnected(lane: id, result.map { ($0, []) })
        }
    }

    /// Whether a new connection for `key` could become a shared HTTP/2 link: TLS, h2 offered upstream, and not an
    /// HTTP/1.1-only request (an Upgrade).
    private func mayBecomeLink(_ key: UpstreamKey) -> Bool {
        key.requirements != nil && !key.http1Only && session.services.upstreamTLS.alpn.contains("h2")
    }

    /// The connection the lane opened settled (`linked`: promoted to a shared link; otherwise HTTP/1.1, failed or
    /// gone): requests that waited for it acquire again. Idempotent.
    private func settleOpening(_ lane: Lane, linked: Bool = false) {
        guard let key = lane.opening else { return }
        lane.opening = nil
        pool.settle(key, owner: self, lane: lane.id, linked: linked)
    }

    /// The lane stops waiting behind another lane's connect (its exchange is over). Idempotent.
    private func stopWaiting(_ lane: Lane) {
        guard let waiting = lane.waiting else { return }
        lane.waiting = nil
        pool.stopWaiting(waiting.key, owner: self, lane: lane.id)
    }

    /// A lane's connect attempt ended: the connection is attached (and `remaining`, the origin's bytes that
    /// came with an upstream proxy's answer, delivered after `upstreamConnected`), or the failure is reported.
    private func upstreamConnected(lane id: Int32, _ result: Result<(TCPConnection, [UInt8]), ConnectError>) {
        guard let lane = lanes[id] else {
            if case .success(let (connection, _)) = result { connection.close() }
            return
        }
        lane.connector = nil
        switch result {
        case .success(let (connection, remaining)):
            guard !finished else {
                connection.close()
                return
            }
            attach(connection, to: lane)
            connection.start()
            reportPeer(lane: id, connection.remoteAddress)
            run(lane: id, .upstreamConnected)
            // Only while the lane still holds this connection: its session may have let go of it on `connected`.
            if !remaining.isEmpty, lanes[id]?.upstream === connection { run(lane: id, .upstreamBytes(remaining)) }
        case .failure(let error):
            settleOpening(lane)
            run(lane: id, .upstreamConnectFailed(error.failure))
        }
    }

    /// Tells a lane's session the peer IP of the upstream connection it is about to get (for its records): the
    /// origin's, or the upstream proxy's (the connection's peer). IPv4-mapped IPv6 addresses read as IPv4.
    private func reportPeer(lane id: Int32, _ address: SocketAddress?) {
        guard let address else { return }
        run(lane: id, .upstreamPeer((address.ip.mappedIPv4 ?? address.ip).description))
    }

    private func attach(_ connection: TCPConnection, to lane: Lane) {
        lane.upstream = connection
        laneOfConnection[ObjectIdentifier(connection)] = lane.id
        connection.handler = self
        if !client.isWritable || lane.readsPausedBySession {
            connection.pauseReading()
        } else {
            connection.resumeReading()
        }
    }

    /// Hands an idle upstream back to the pool (a channel is simply closed: its link stays pooled).
    private func releaseUpstream(_ lane: Lane, lease: UpstreamLease) {
        settleOpening(lane)
        lane.connector?.cancel()
        lane.connector = nil
        if lane.channel != nil {
            closeUpstream(lane)
            return
        }
        guard let upstream = lane.upstream else { return }
        lane.upstream = nil
        laneOfConnection[ObjectIdentifier(upstream)] = nil
        pool.park(upstream, lease: lease)
        reportBackedUp(lane, false)
        resumeClientIfPossible()
    }

    /// The lane's connection chose h2: it becomes a shared link and the lane gets its first channel.
    private func promoteUpstream(_ lane: Lane, lease: UpstreamLease) {
        guard let upstream = lane.upstream else { return }
        lane.upstream = nil
        laneOfConnection[ObjectIdentifier(upstream)] = nil
        reportBackedUp(lane, false)
        resumeClientIfPossible()
        if let (link, channel) = pool.promote(upstream, lease: lease, owner: self, lane: lane.id) {
            lane.channel = (link, channel)
            if !client.isWritable || lane.readsPausedBySession { link.setReadingPaused(true, channel: channel) }
            // Started only now that the lane knows its channel: whatever the link reports at once reaches it.
            link.start()
            // The link is offered now: the requests that waited for it get channels on it.
            settleOpening(lane, linked: true)
        } else {
            settleOpening(lane)
            run(lane: lane.id, .upstreamReset)
        }
    }

    private func resumeClientIfPossible() {
        if client.isReadingPaused && !finished && !sessionPausedClient && upstreamsWritable && !clientBacklogged {
            client.resumeReading()
        }
    }

    private func closeUpstream(_ lane: Lane) {
        settleOpening(lane)
        stopWaiting(lane)
        lane.connector?.cancel()
        lane.connector = nil
        lane.readsPausedBySession = false
        reportBackedUp(lane, false)
        if let channel = lane.channel {
            lane.channel = nil
            lane.channelBlocked = false
            channel.link.closeChannel(channel.id)
            resumeClientIfPossible()
        }
        if let upstream = lane.upstream {
            lane.upstream = nil
            laneOfConnection[ObjectIdentifier(upstream)] = nil
            upstream.close()
            if client.isReadingPaused && !finished && !sessionPausedClient && upstreamsWritable && !clientBacklogged {
                client.resumeReading()
            }
        }
    }

    private func closeLane(_ lane: Lane) {
        closeUpstream(lane)
        lane.timer?.cancel()
        lane.timer = nil
    }

    private func finish() {
        guard !finished else { return }
        for lane in lanes.values {
            settleOpening(lane)
            stopWaiting(lane)
        }
        finished = true
        onFinished()
    }

    // MARK: - TCPConnectionHandler

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        let copy = [UInt8](bytes)
        if connection === client {
            run(.clientBytes(copy))
        } else if let id = laneOfConnection[ObjectIdentifier(connection)] {
            run(lane: id, .upstreamBytes(copy))
        }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        if connection === client {
            run(.clientEOF)
        } else if let id = laneOfConnection[ObjectIdentifier(connection)] {
            run(lane: id, .upstreamEOF)
        }
    }

    func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool) {
        if connection === client {
            if session.stopsReadingWhileClientBacklogged {
                // What the client sends now would only add replies (PING and SETTINGS ACKs, RST_STREAMs) to the
                // backlog it does not read: the client waits until it reads, so the backlog stays bounded.
                if !isWritable {
                    client.pauseReading()
                } else if !sessionPausedClient && upstreamsWritable {
                    client.resumeReading()
                }
            }
            for lane in lanes.values {
                if !isWritable {
                    setUpstreamReading(lane, false)
                } else if !lane.readsPausedBySession {
                    setUpstreamReading(lane, true)
                }
            }
        } else if let id = laneOfConnection[ObjectIdentifier(connection)], id != 0 {
            reportBackedUp(lanes[id], !isWritable)
        } else if laneOfConnection[ObjectIdentifier(connection)] != nil, client.isOpen {
            if !isWritable {
                client.pauseReading()
            } else if !sessionPausedClient && upstreamsWritable {
                client.resumeReading()
            }
        }
    }

    // MARK: - UpstreamChannelOwner

    func channelParts(lane: Int32, _ parts: [HTTPPart]) {
        run(lane: lane, .upstreamParts(parts))
    }

    func channelReset(lane id: Int32, code: HTTP2ErrorCode) {
        guard let lane = lanes[id], lane.channel != nil else { return }
        lane.channel = nil
        lane.channelBlocked = false
        reportBackedUp(lane, false)
        resumeClientIfPossible()
        run(lane: id, code == .http11Required ? .upstreamRequiresHTTP11 : .upstreamReset)
    }

    func pendingLinkSettled(lane id: Int32, linked: Bool) {
        guard !finished, let lane = lanes[id], let waiting = lane.waiting else { return }
        lane.waiting = nil
        connectUpstream(lane: lane, host: waiting.host, port: waiting.port, reuse: waiting.key, mayWait: linked)
    }

    func channelWritable(lane id: Int32, _ writable: Bool) {
        guard let lane = lanes[id], lane.channel != nil else { return }
        if id != 0 {
            reportBackedUp(lane, !writable)
            return
        }
        lane.channelBlocked = !writable
        if writable {
            resumeClientIfPossible()
        } else {
            client.pauseReading()
        }
    }

    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
        if connection === client {
            run(.clientGone)
            reportCut()
            connection.handler = nil
            for lane in lanes.values { closeLane(lane) }
            lanes = [:]
            finish()
        } else if let id = laneOfConnection.removeValue(forKey: ObjectIdentifier(connection)) {
            lanes[id]?.upstream = nil
            connection.handler = nil
            reportBackedUp(lanes[id], false)
            // It may have been the unwritable upstream that paused the client.
            resumeClientIfPossible()
            switch reason {
            case .reset, .error: run(lane: id, .upstreamReset)
            case .local, .finished: run(lane: id, .upstreamEOF)
            }
        } else {
            connection.handler = nil
        }
    }
}
