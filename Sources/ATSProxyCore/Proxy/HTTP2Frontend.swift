import ATSHTTP2
import ATSPolicy
import Foundation

/// The HTTP/2 side of an intercepted tunnel whose client negotiated h2 (sans-io). It owns the server-role
/// `HTTP2Session` and turns every stream into one exchange of an `ExchangeLeg` (a *lane*: a leg with its own
/// upstream connection and timer, addressed by lane number in `ProxyEvent.stream`/`ProxyCommand.stream`), which
/// decides, connects and judges exactly as for HTTP/1.1; the leg hands its response (relayed or its own answer)
/// over as message parts (`ProxyCommand.respond`), submitted as the stream's HEADERS, DATA and trailers: no
/// HTTP/1.1 text passes between a stream and its leg. Legs whose exchange finished cleanly are kept idle and
/// reused by later streams, so their upstream connections are reused per (host, port, decision) like HTTP/1.1
/// keep-alive.
///
/// Flow control: request DATA is acknowledged (WINDOW_UPDATE) only when the lane can take it; response bytes
/// beyond a per-stream watermark (or, for streams the client is not reading, beyond a per-connection one) pause
/// the lane's upstream reads until the client's windows drain them.
///
/// Not thread-safe: owned by one `ProxySession`, used on its driver's event loop. Plaintext in, plaintext out: the
/// owning session runs the TLS.
final class HTTP2Frontend {
    /// What the owner must do after a call: send `toClient` (plaintext, to be encrypted), run `commands`, and
    /// close the client connection when `finished`.
    struct Output {
        var toClient: [UInt8] = []
        var commands: [ProxyCommand] = []
        var finished = false
    }

    /// Where a stream's response stands.
    enum ResponseState {
        /// Nothing sent yet (interim 1xx responses may have gone out).
        case pending
        /// The final HEADERS went out; DATA may follow.
        case streaming
        /// END_STREAM went out (or the stream was reset).
        case ended
    }

    /// One lane's leg, boxed (the driver's `Lane` is the same lane's sockets and timer): the frontend reads and
    /// changes it in place through the reference. Read out of the dictionary by value (`lanes[lane] != nil`,
    /// `lanes[lane]!.signals`), a leg was copied whole, every reference in it retained and released: 0.3% of the h2
    /// profile in that copy alone, plus its reference counting.
    final class LegBox {
        var leg: ExchangeLeg
        init(_ leg: ExchangeLeg) { self.leg = leg }
    }

    /// One client stream and the lane serving it.
    struct Stream {
        /// The lane serving the stream; nil when the proxy answered it itself (421, 405, bad request).
        var lane: Int32?
        var method: String
        /// The request body has no declared length (no Content-Length on the stream): its trailers are passed on.
        var chunkedRequest = false
        /// END_STREAM arrived from the client.
        var requestEnded = false
        var response: ResponseState = .pending
        /// Request DATA bytes delivered to a lane that asked not to be fed yet; acknowledged on resume.
        var heldConsumption = 0
        /// The lane asked for no more client bytes (its upstream is still opening).
        var readsPaused = false
        /// The lane's upstream reads are paused because the client is not taking this stream's response.
        var upstreamPaused = false
    }

    /// Bytes buffered for one stream before its lane's upstream reads pause, and the level they resume at.
    static let responseHighWatermark = 256 * 1024
    static let responseLowWatermark = 64 * 1024
    /// Bytes buffered for all streams of the connection together (100 streams at the per-stream mark would hold
    /// 25 MiB) beyond which the streams whose client is not reading pause, and the level below which they resume
    /// (see `updateResponsePauses`).
    static let connectionResponseHighWatermark = 4 << 20
    static let connectionResponseLowWatermark = 2 << 20
    /// Response bytes all streams of the connection may hold together. Pausing at the high watermark stops new reads,
    /// but what upstreams already had in flight still arrives (up to an HTTP/2 origin's 256 KiB stream window per
    /// stream, one read from an HTTP/1.1 one): past this cap the streams the client is not reading are reset with
    /// ENHANCE_YOUR_CALM, largest first, until the connection holds no more than the high watermark
    /// (`capBufferedResponses`).
    static let connectionResponseCap = 8 << 20
    /// Idle lanes kept for reuse; more are closed. As many as streams the client may open at once (our
    /// SETTINGS_MAX_CONCURRENT_STREAMS): with fewer, a client that keeps that many streams busy against an
    /// HTTP/1.1-only origin closed the surplus lanes after each stream and opened new upstream connections for
    /// the next ones (51 origin accepts per 1,000 requests at 4 × 32 streams in `Benchmarks/run`). An idle lane
    /// frees its buffers after 50 ms and hands its upstream to the pool after 1 s, so keeping it costs little.
    static let maximumIdleLanes = Int(HTTP2Configuration().maxConcurrentStreams)
    /// Stream resets a client connection may see in its whole life, whoever sent them (the client's RST_STREAM,
    /// ours, nghttp2's for a stream error); one more ends it with GOAWAY(ENHANCE_YOUR_CALM). The per-second limit is
    /// `HTTP2Configuration.maxResetsPerSecond` (100), counted the same way.
    static let maxResetsPerConnection = 1_000

    let session: HTTP2Session
    /// A leg to copy for every new lane (the connection's identity, answering in stream parts).
    let template: ExchangeLeg
    /// The intercepted tunnel every stream's request goes to.
    let tunnel: InterceptedTunnel
    var tunnelHost: String { tunnel.host }
    var tunnelPort: Int { tunnel.port }
    var streams: [Int32: Stream] = [:]
    var lanes: [Int32: LegBox] = [:]
    /// Which stream each busy lane serves.
    var laneStream: [Int32: Int32] = [:]
    var idleLanes: [Int32] = []
    /// Streams whose lane's upstream reads are paused (`Stream.upstreamPaused`).
    var pausedStreams = 0
    /// Lanes whose upstream is not taking bytes: their streams' request DATA is not acknowledged meanwhile.
    var backedUpLanes: Set<Int32> = []
    var nextLane: Int32 = 1
    /// An empty command list with capacity, exchanged with a leg's on every call (`withLeg`).
    var spareCommands: [ProxyCommand] = []
    var requestCount: Int
    var goingAway = false
    var failed = false
    var now = Date(timeIntervalSince1970: 0)
    var output = Output()
    /// Streams reset or closed with an error somewhere in the batch of events being processed: a request whose
    /// stream is among them is not started (see `process`).
    var resetInBatch: Set<Int32> = []
    /// The session failed somewhere in the batch being processed: no request of the batch is started.
    var failsInBatch = false
    /// The first `now` of the connection and the monotonic instant it stands for: the session's reset budget runs on
    /// the driver's clock (`sessionInstant`), so a playbook at a fixed `now` is deterministic.
    var clockOrigin: (date: Date, instant: ContinuousClock.Instant)?
    /// What the connection did, for the line that explains a cut (`cutReport`).
    var tally = Tally()
    /// Why the session failed (a protocol error or a flood), once it has.
    var failure: HTTP2SessionError?
    /// The code of the GOAWAY we sent, once we have.
    var goAwaySentCode: HTTP2ErrorCode?

    /// Counts of what a client connection did, for `cutReport`.
    struct Tally {
        /// Request header blocks received.
        var streams = 0
        /// Requests handed to a lane (the ones that may reach an origin).
        var started = 0
        /// RST_STREAMs the client sent.
        var resetsByClient = 0
        /// RST_STREAMs the proxy sent (its own, or nghttp2's for a stream error).
        var resetsByProxy = 0
        /// Streams reset because the connection held more than `connectionResponseCap` of unread responses.
        var streamsOverBudget = 0
        /// Streams the proxy (or nghttp2) reset before any request started: malformed or oversized header
        /// blocks, and streams reset in the read that opened them.
        var refused = 0
        /// Records of streams the client reset that were not logged one by one (`recordsSummarized`).
        var recordsSummarized = 0
    }

    /// Client resets after which the records of further streams the client resets are only counted, for the one
    /// line at the end of the connection (`closingReport`), instead of one record each.
    static let resetsRecordedOneByOne = 20
    /// Set while a stream the client reset is being closed past `resetsRecordedOneByOne`: its record is counted,
    /// not logged.
    var summarizingRecords = false

    /// A frontend for the intercepted tunnel of `parent`, whose TLS handshake just chose h2.
    init(parent: ProxySession) throws {
        var configuration = HTTP2Configuration()
        configuration.initialWindowSize = 65_535
        configuration.connectionWindowSize = 1 << 20
        configuration.countsSentResets = true
        configuration.maxResetsPerSession = Self.maxResetsPerConnection
        guard let tunnel = parent.role.tunnel else {
            preconditionFailure("HTTP2Frontend: the session is not inside an intercepted tunnel")
        }
        session = try HTTP2Session(role: .server, configuration: configuration)
        var template = ExchangeLeg(
            services: parent.services,
            client: ExchangeLeg.Client(
                address: parent.clientAddress, connectionNumber: parent.connectionNumber, taskUUID: parent.taskUUID,
                taskIDPrefix: parent.taskIDPrefix, protocolName: "h2"),
            delivery: .stream)
        template.route = parent.leg.route
        self.template = template
        self.tunnel = tunnel
        requestCount = parent.requestCount
    }

    /// Whether any stream is open.
    var hasStreams: Bool { !streams.isEmpty }

    /// Whether a lane serves an open stream (lanes have their own timers; otherwise the connection's idle
    /// timer runs, so a client cannot pin the connection with streams nobody serves).
    var hasServedStreams: Bool { streams.values.contains { $0.lane != nil } }

    /// Our SETTINGS.
    func start() -> Output {
        step(now: now) { _ in }
    }

    /// Plaintext from the client.
    func receive(_ plain: [UInt8], now: Date) -> Output {
        step(now: now) { frontend in
            var events = frontend.session.receive(plain, now: frontend.sessionInstant(now))
            // What nghttp2 queued while reading (its RST_STREAM for a stream error, a GOAWAY) goes out before any
            // request of this input starts: a stream already reset, or a connection already cut, reaches no origin.
            let bytes = frontend.session.takeOutbound()
            if !bytes.isEmpty { frontend.output.toClient += bytes }
            events += frontend.session.takeEvents()
            frontend.process(events)
        }
    }

    /// An upstream or timer event of `lane`.
    func handle(lane: Int32, event: ProxyEvent, now: Date) -> Output {
        step(now: now) { frontend in
            guard frontend.lanes[lane] != nil else { return }
            switch event {
            case .upstreamWritable(let writable):
                frontend.setUpstreamWritable(lane: lane, writable)
            case .timerFired:
                frontend.withLeg(lane) { $0.ownTimerFired() }
            case .upstreamConnected, .upstreamPeer, .upstreamReused, .upstreamConnectFailed, .upstreamParts,
                .upstreamBytes, .upstreamEOF, .upstreamReset, .upstreamRequiresHTTP11:
                frontend.withLeg(lane) { $0.handleUpstreamEvent(event) }
            case .clientBytes, .clientEOF, .clientGone, .drain, .stream:
                preconditionFailure("HTTP2Frontend: \(event) is no event of lane \(lane)")
            }
        }
    }

    /// Shutdown: GOAWAY; streams already open finish, the connection closes when none is left.
    func drain(now: Date) -> Output {
        step(now: now) { frontend in
            frontend.goingAway = true
            try? frontend.session.goAway(error: .noError)
        }
    }

    /// The client connection is gone: every lane logs what it had in flight and closes.
    func clientGone(now: Date) -> Output {
        step(now: now) { frontend in
            for lane in Array(frontend.lanes.keys).sorted() {
                frontend.closeLane(lane)
            }
            frontend.streams = [:]
            frontend.pausedStreams = 0
        }
    }

    /// One line on why the connection was cut for a protocol error or a flood, with what the client did; nil while
    /// it has not been (a graceful GOAWAY, the client leaving, or an idle timeout is no cut).
    var cutReport: String? {
        guard let failure else { return nil }
        let code = goAwaySentCode.map { "GOAWAY(\($0))" } ?? "no GOAWAY"
        return "HTTP/2 connection cut with \(code): \(failure.message); \(tally.streams) streams, "
            + "\(tally.started) requests started, \(tally.resetsByClient) streams reset by the client, "
            + "\(tally.resetsByProxy) by the proxy"
    }

    /// The line for the end of the connection: `cutReport` when it was cut; else, when the client reset or the
    /// proxy refused streams in numbers, how many and over what time (the records of the streams the client reset
    /// beyond `resetsRecordedOneByOne` are only counted here); nil for an ordinary connection.
    var closingReport: String? {
        if let cutReport { return cutReport + summarizedSuffix }
        guard tally.refused > 0 || tally.resetsByClient > Self.resetsRecordedOneByOne else { return nil }
        let seconds = clockOrigin.map { max(now.timeIntervalSince($0.date), 0) } ?? 0
        return "HTTP/2 connection ended after \(tally.streams) streams in \(String(format: "%.1f", seconds)) s: "
            + "\(tally.resetsByClient) streams reset by the client, \(tally.refused) refused by the proxy before any "
            + "request (malformed or oversized header block, or reset as they opened)" + summarizedSuffix
    }

    /// `; N records of streams reset by the client not logged one by one`, when there were such records.
    private var summarizedSuffix: String {
        tally.recordsSummarized == 0
            ? "" : "; \(tally.recordsSummarized) records of streams reset by the client not logged one by one"
    }

    // MARK: - Plumbing

    /// `now` on the session's monotonic clock, counted from the connection's first `now`.
    func sessionInstant(_ now: Date) -> ContinuousClock.Instant {
        guard let clockOrigin else {
            let instant = ContinuousClock.now
            clockOrigin = (now, instant)
            return instant
        }
        return clockOrigin.instant + .seconds(now.timeIntervalSince(clockOrigin.date))
    }

    func step(now: Date, _ body: (HTTP2Frontend) -> Void) -> Output {
        self.now = now
        output = Output()
        body(self)
        pump()
        output.finished = failed || (goingAway && streams.isEmpty) || session.state == .finished
        if case .failed = session.state { output.finished = true }
        if output.finished {
            // Idle lanes end now, so their upstreams go back to the pool rather than being dropped.
            for lane in lanes.keys.sorted() { closeLane(lane) }
            streams = [:]
            pausedStreams = 0
        }
        let result = output
        output = Output()
        return result
    }

    /// Flushes what the session wants to send and handles the events our own commands caused.
    func pump() {
        while true {
            let bytes = session.takeOutbound()
            if !bytes.isEmpty { output.toClient += bytes }
            let events = session.takeEvents()
            if events.isEmpty { break }
            process(events)
        }
        updateResponsePauses()
        // Streams reset for holding too much: their RST_STREAMs go out and their lanes close now.
        if capBufferedResponses() { pump() }
    }

    /// Handles one batch of session events in order. Streams that the batch also resets (or a session it fails)
    /// are noted first, so that their requests never start (MadeYouReset: a client that makes nghttp2 reset a
    /// stream right after its HEADERS must not get a request to the origin for it).
    func process(_ events: [HTTP2Event]) {
        resetInBatch.removeAll(keepingCapacity: true)
        failsInBatch = false
        for event in events {
            switch event {
            case .streamReset(let stream, _), .streamResetSent(let stream, _):
                resetInBatch.insert(stream)
            case .streamClosed(let stream, let error):
                if error != .noError { resetInBatch.insert(stream) }
            case .sessionFailed(let error):
                failsInBatch = true
                if failure == nil { failure = error }
            case .headers, .data, .streamEnded, .goAway, .goAwaySent, .settings, .settingsAcknowledged,
                .pingAcknowledged:
                break
            }
        }
        var index = events.startIndex
        while index < events.endIndex {
            let event = events[index]
            switch event {
            case .headers(let stream, let kind, let fields):
                switch kind {
                case .request:
                    var endStream = false
                    if index + 1 < events.endIndex, case .streamEnded(let ended) = events[index + 1], ended == stream {
                        endStream = true
                        index += 1
                    }
                    requestHeaders(stream: stream, fields: fields, endStream: endStream)
                case .trailers:
                    requestTrailers(stream: stream, fields: fields)
                case .informational, .response:
                    try? session.resetStream(stream: stream, error: .protocolError)
                }
            case .data(let stream, let bytes):
                requestData(stream: stream, bytes: bytes)
            case .streamEnded(let stream):
                requestEnded(stream: stream)
            case .streamReset(let stream, let code):
                tally.resetsByClient += 1
                summarizingRecords = tally.resetsByClient > Self.resetsRecordedOneByOne
                streamGone(stream, cleanly: false, reset: StreamReset(code: code, byClient: true))
                summarizingRecords = false
            case .streamResetSent(let stream, let code):
                tally.resetsByProxy += 1
                if streams[stream] == nil { tally.refused += 1 }
                streamGone(stream, cleanly: false, reset: StreamReset(code: code, byClient: false))
            case .streamClosed(let stream, let error):
                streamGone(stream, cleanly: error == .noError)
            case .goAwaySent(_, let error):
                goingAway = true
                if goAwaySentCode == nil { goAwaySentCode = error }
            case .goAway:
                goingAway = true
            case .sessionFailed:
                failed = true
            case .settings, .settingsAcknowledged, .pingAcknowledged:
                break
            }
            index += 1
        }
    }

    // MARK: - Requests

    func requestHeaders(stream id: Int32, fields: [HTTP2Header], endStream: Bool) {
        tally.streams += 1
        // Reset or cut later in the same batch: nothing to start (its DATA is acknowledged and dropped).
        if failsInBatch || resetInBatch.contains(id) { return }
        let head: HTTP2RequestHead
        do {
            head = try HTTP2Message.requestHead(fromH2: fields)
        } catch {
            try? session.resetStream(stream: id, error: .protocolError)
            return
        }
        var stream = Stream(lane: nil, method: head.method)
        stream.requestEnded = endStream
        requestCount += 1
        let number = requestCount
        if head.method == "CONNECT" {
            streams[id] = stream
            answerLocally(
                stream: id, status: 405, number: number, head: head,
                text: "ats-proxy: CONNECT is not supported inside an intercepted HTTP/2 tunnel", code: .unsupportedURL)
            return
        }
        // HTTP/2 field names arrive in lower case (nghttp2 refuses others).
        let hostField = head.headers.first { $0.name == "host" }?.value
        if !head.authority.isEmpty, let hostField, !HTTP1ASCII.equalsIgnoringCase(hostField, head.authority) {
            // RFC 9113 §8.3.1: a Host field that contradicts :authority makes the request malformed.
            requestCount -= 1
            try? session.resetStream(stream: id, error: .protocolError)
            return
        }
        if !authorityMatchesTunnel(head.authority.isEmpty ? hostField ?? "" : head.authority) {
            streams[id] = stream
            answerLocally(
                stream: id, status: 421, number: number, head: head,
                text:
                    "ats-proxy: this connection's certificate covers \(tunnelHost) only; open a new connection for \(head.authority)",
                code: .cannotConnectToHost)
            return
        }
        var headers = HTTPFields(head.headers.map { HTTPField(name: $0.name, value: $0.value) })
        let framing: HTTPBodyFraming
        if endStream {
            framing = .none
        } else if let length = headers.first("content-length"), let count = Int(length), count >= 0 {
            framing = .contentLength(count)
        } else {
            // A body of unknown length: the framing says so, and only an HTTP/1.1 upstream's encoder turns it into
            // a `Transfer-Encoding: chunked` field; an HTTP/2 upstream sends DATA frames as they come.
            headers.remove("content-length")
            framing = .chunked
            stream.chunkedRequest = true
        }
        // The path goes on an HTTP/1.1 request line, where it must be an origin-form target (or `*` for OPTIONS).
        // nghttp2 lets bytes above 0x7F through in :path; such a request is malformed (RFC 9113 §8.1.1, §8.3.1).
        guard let target = try? HTTP1RequestTarget.parse(Array(head.path.utf8)[...], method: head.method),
            Self.isOriginOrAsterisk(target)
        else {
            requestCount -= 1
            try? session.resetStream(stream: id, error: .protocolError)
            return
        }
        let h1 = HTTPRequestHead(method: head.method, target: target, version: .http11, headers: headers)
        // Asterisk-form's target URI has an empty path (RFC 9112 §3.3): the origin alone.
        var path = ""
        if case .origin(let origin) = target { path = origin }
        let url = tunnel.url(path: path)
        let lane = takeLane()
        stream.lane = lane
        streams[id] = stream
        laneStream[lane] = id
        let request = ExchangeLeg.Request(
            head: h1, framing: framing, url: url, target: tunnel.target.withURL(url), number: number,
            clientKeepAlive: HTTP1ProxyHeaders.isKeepAlive(version: .http11, headers: headers), leftAlone: false)
        tally.started += 1
        withLeg(lane) { leg in
            leg.start(request)
            if endStream { leg.requestEnd(trailers: nil) }
        }
    }

    func requestData(stream id: Int32, bytes: [UInt8]) {
        guard var stream = streams[id] else {
            session.consume(stream: id, bytes: bytes.count)
            return
        }
        if stream.readsPaused || stream.lane.map(backedUpLanes.contains) == true {
            // Only the stream's window stays spent: the connection's other streams keep flowing.
            session.consumeConnection(bytes: bytes.count)
            stream.heldConsumption += bytes.count
            streams[id] = stream
        } else {
            session.consume(stream: id, bytes: bytes.count)
        }
        guard let lane = stream.lane else { return }
        withLeg(lane) { $0.requestBody(bytes[...]) }
    }

    func requestTrailers(stream id: Int32, fields: [HTTP2Header]) {
        guard let stream = streams[id], let lane = stream.lane, lanes[lane] != nil, stream.chunkedRequest else {
            return
        }
        let trailers = HTTPFields(fields.filter { !$0.isPseudo }.map { HTTPField(name: $0.name, value: $0.value) })
        withLeg(lane) { $0.requestEnd(trailers: trailers) }
    }

    func requestEnded(stream id: Int32) {
        guard var stream = streams[id], !stream.requestEnded else { return }
        stream.requestEnded = true
        streams[id] = stream
        guard let lane = stream.lane else { return }
        withLeg(lane) { $0.requestEnd(trailers: nil) }
    }

    /// The stream is over: closed cleanly, reset by either side (`reset`: the RST_STREAM that ended it, for the
    /// record), or refused.
    func streamGone(_ id: Int32, cleanly: Bool, reset: StreamReset? = nil) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        if stream.upstreamPaused { pausedStreams -= 1 }
        guard let lane = stream.lane else { return }
        laneStream[lane] = nil
        if stream.upstreamPaused {
            // The lane (and its upstream) may serve another stream: it must not stay paused.
            output.commands.append(.stream(lane, .resumeUpstreamReads))
        }
        guard lanes[lane] != nil else { return }
        let finished = cleanly && stream.response == .ended && lanes[lane]!.leg.isIdleForReuse
        if finished && idleLanes.count < Self.maximumIdleLanes && !goingAway {
            idleLanes.append(lane)
        } else {
            closeLane(lane, reset: reset)
        }
    }

    /// Whether `target` can carry an HTTP/2 `:path` on an HTTP/1.1 request line: origin-form or asterisk-form.
    static func isOriginOrAsterisk(_ target: HTTP1RequestTarget) -> Bool {
        switch target {
        case .origin, .asterisk: true
        case .absolute, .authority: false
        }
    }

    /// `:authority` must name the tunnel's host and port: the minted leaf covers nothing else (RFC 9110 §7.4.2).
    func authorityMatchesTunnel(_ authority: String) -> Bool {
        guard !authority.isEmpty else { return true }
        var host = Substring(authority)
        var port = tunnel.defaultPort
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if rest.hasPrefix(":") {
                guard let value = Int(rest.dropFirst()) else { return false }
                port = value
            }
        } else if let colon = host.lastIndex(of: ":") {
            guard let value = Int(host[host.index(after: colon)...]) else { return false }
            port = value
            host = host[..<colon]
        }
        return port == tunnelPort && HTTP1ASCII.equalsIgnoringCase(host.utf8, tunnelHost.utf8)
    }

    // MARK: - Lanes

    func takeLane() -> Int32 {
        while let lane = idleLanes.popLast() {
            if lanes[lane] != nil { return lane }
        }
        let lane = nextLane
        nextLane += 1
        lanes[lane] = LegBox(template)
        return lane
    }

    /// Ends a lane: it logs anything in flight, and the driver closes its upstream and timer.
    func closeLane(_ lane: Int32, reset: StreamReset? = nil) {
        guard lanes[lane] != nil else { return }
        withLeg(lane) { $0.clientGone(reset: reset) }
        if lanes[lane] != nil {
            lanes[lane] = nil
            output.commands.append(.stream(lane, .closeClient))
        }
    }

    /// Runs `body` on the leg of `lane` (if it is still there) at the current time, arms its timer, and carries out
    /// what it asked for: its commands (`translate`), then its signals (a leg that shut down is a closed lane).
    func withLeg(_ lane: Int32, _ body: (inout ExchangeLeg) -> Void) {
        guard let box = lanes[lane] else { return }
        box.leg.now = now
        body(&box.leg)
        box.leg.updateOwnTimer()
        // The leg's list is swapped for the spare one (empty, with capacity), and becomes the spare once carried
        // out: no list is allocated per call.
        var commands: [ProxyCommand] = []
        swap(&commands, &spareCommands)
        swap(&commands, &box.leg.commands)
        translate(lane: lane, commands)
        commands.removeAll(keepingCapacity: true)
        swap(&commands, &spareCommands)
        while lanes[lane] === box, !box.leg.signals.isEmpty {
            let signal = box.leg.signals.removeFirst()
            switch signal {
            case .finished(let keepAlive):
                // The stream's response is complete; `streamGone` decides whether the leg waits for another, unless
                // the exchange ended its connection (the response came before the whole request).
                if !keepAlive { withLeg(lane) { $0.shutDown() } }
            case .closeClient:
                laneClosed(lane)
            case .upgraded, .tunnelOpened, .tunnelRefused:
                preconditionFailure("HTTP2Frontend: a stream's leg reported \(signal); streams carry no raw bytes")
            }
        }
    }

    /// Runs a lane's commands: its response parts become the stream's HTTP/2 response.
    func translate(lane: Int32, _ commands: [ProxyCommand]) {
        for command in commands {
            switch command {
            case .respond(let parts):
                responseParts(lane: lane, parts)
            case .writeToClient, .closeClient:
                // A leg answers in parts and ends with a signal: a stream's leg never writes text (an origin's 101
                // is refused before it reaches a stream) nor closes a client.
                preconditionFailure("HTTP2Frontend: lane \(lane)'s leg commanded \(command)")
            case .connectUpstream, .writeToUpstream, .sendToUpstreamChannel, .closeUpstream, .armTimer, .cancelTimer,
                .releaseUpstream, .promoteUpstream, .upstreamSettled:
                output.commands.append(.stream(lane, command))
            case .pauseClientReads:
                setReadsPaused(lane: lane, true)
            case .resumeClientReads:
                setReadsPaused(lane: lane, false)
            case .log:
                if summarizingRecords {
                    tally.recordsSummarized += 1
                } else {
                    output.commands.append(command)
                }
            case .pauseUpstreamReads, .resumeUpstreamReads, .stream:
                break
            }
        }
    }

    /// The lane's leg shut down (fault, timeout, `Connection: close` answer, idle timer).
    func laneClosed(_ lane: Int32) {
        guard lanes[lane] != nil else { return }
        lanes[lane] = nil
        backedUpLanes.remove(lane)
        idleLanes.removeAll { $0 == lane }
        output.commands.append(.stream(lane, .closeClient))
        guard let id = laneStream.removeValue(forKey: lane), var stream = streams[id] else { return }
        stream.lane = nil
        stream.readsPaused = false
        if stream.upstreamPaused {
            stream.upstreamPaused = false
            pausedStreams -= 1
        }
        if stream.heldConsumption > 0 {
            session.consumeStream(stream: id, bytes: stream.heldConsumption)
            stream.heldConsumption = 0
        }
        switch stream.response {
        case .ended:
            // Any rest of the request body is acknowledged and dropped (`requestData` without a lane).
            streams[id] = stream
        case .pending, .streaming:
            stream.response = .ended
            streams[id] = stream
            try? session.resetStream(stream: id, error: .internalError)
        }
    }

    func setReadsPaused(lane: Int32, _ paused: Bool) {
        guard let id = laneStream[lane], streams[id] != nil else { return }
        streams[id]!.readsPaused = paused
        releaseHeldCredit(stream: id)
    }

    /// The lane's upstream write queue filled up or drained (`ProxyEvent.upstreamWritable`).
    func setUpstreamWritable(lane: Int32, _ writable: Bool) {
        if writable { backedUpLanes.remove(lane) } else { backedUpLanes.insert(lane) }
        if let id = laneStream[lane] { releaseHeldCredit(stream: id) }
    }

    /// Acknowledges the request DATA held back for `id` once neither its lane nor the lane's upstream holds it.
    func releaseHeldCredit(stream id: Int32) {
        guard let stream = streams[id], !stream.readsPaused, stream.heldConsumption > 0 else { return }
        if let lane = stream.lane, backedUpLanes.contains(lane) { return }
        session.consumeStream(stream: id, bytes: stream.heldConsumption)
        streams[id]!.heldConsumption = 0
    }
}
