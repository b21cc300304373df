import ATSHTTP2
import ATSTLS

/// One upstream HTTP/2 connection shared by many client sessions, each of which sees its own *channel*: a virtual
/// keep-alive connection to the origin that carries one exchange at a time (sans-io).
///
/// Contract: a session sends a request on its channel as typed message parts with `send(_:channel:)` (request
/// head with an origin-form target and `Host`, body pieces, trailers, message end: the proxy's message
/// vocabulary, `HTTPPart`, whose heads carry no wire text) and receives the response as `.channelParts`: a head
/// (interim heads alone, the final one with its framing), body pieces, trailers and a message end. No HTTP/1.1 text
/// is written or parsed on this path, and a channel holds no HTTP/1.1 codec state. Each request becomes a new
/// HTTP/2 stream; a session sends the next request head only once its channel's exchange is over. All HTTP/2 is
/// `ATSHTTP2.HTTP2Session`'s (role `.client`); this type only maps and routes.
///
/// Flow control: the session advertises a 256 KiB per-stream and a 1 MiB connection receive window
/// (`defaultConfiguration`). Response DATA is acknowledged (`consume`) as soon as it is handed out in
/// `.channelParts`, unless the channel's reading is paused (`setReadingPaused`), in which case the count is held and
/// acknowledged on resume, so a slow client throttles only its own stream. Request bodies are buffered by the
/// session; above `requestBodyHighWatermark` buffered bytes the channel gets `.channelWritable(false)`, and
/// `.channelWritable(true)` once at most `requestBodyLowWatermark` remain.
///
/// Every method returns `Output`s in order: channel outputs as they happen, then at most one `.network` with
/// everything to send (TLS-encrypted when `tls` is set), then `.closeConnection` once, when the link is finished.
///
/// Threading: not thread-safe and not `Sendable`; one driver (the I/O layer's `UpstreamLinkDriver`) owns it
/// (and the `TLSConnection`, the `HTTP2Session`) on one event loop, whatever sessions its channels serve.
public final class UpstreamH2Link {
    /// Identifies a channel for as long as it is open; never reused by one link.
    public typealias ChannelID = Int

    /// What the driver must do, in order.
    public enum Output: Equatable, Sendable {
        /// Bytes to write to the upstream socket (TLS-encrypted when the link has a `TLSConnection`).
        case network([UInt8])
        /// Response parts for that channel's exchange, in order (`.response`, `.body`, `.trailers`, `.messageEnd`).
        case channelParts(ChannelID, [HTTPPart])
        /// The channel's exchange failed (stream reset by the origin, link failed, refused by GOAWAY or a full link):
        /// its session treats it like an upstream TCP reset. The channel is forgotten.
        case channelReset(ChannelID, HTTP2ErrorCode)
        /// Request-body back-pressure: `false` = stop writing request bytes on this channel, `true` = resume.
        case channelWritable(ChannelID, Bool)
        /// The link is finished (GOAWAY done, fatal error, EOF): close the socket after writing pending `.network`.
        case closeConnection
    }

    /// The link's lifecycle.
    enum State {
        /// Streams can be opened.
        case active
        /// A GOAWAY was sent or received: streams in flight finish, no new ones start; the link closes when none
        /// remain.
        case goingAway
        /// Finished: `.closeConnection` was (or is being) emitted; every new request is refused.
        case closed
    }

    /// Per-stream receive window advertised to the origin (SETTINGS_INITIAL_WINDOW_SIZE): 256 KiB.
    public static let streamReceiveWindow: UInt32 = 256 * 1024
    /// Connection-level receive window: 1 MiB, so four full-speed streams fit at once.
    public static let connectionReceiveWindow: UInt32 = 1024 * 1024
    /// Buffered request-body bytes above which a channel gets `.channelWritable(false)`.
    public static let requestBodyHighWatermark = 256 * 1024
    /// Buffered request-body bytes at or below which a paused channel gets `.channelWritable(true)`.
    public static let requestBodyLowWatermark = 64 * 1024
    /// Assumed peer MAX_CONCURRENT_STREAMS until the origin's SETTINGS arrive (RFC 9113 §6.5.2 recommends ≥ 100).
    static let assumedStreamLimit = 100

    /// The client `HTTP2Configuration` the link uses by default: `streamReceiveWindow` per stream,
    /// `connectionReceiveWindow` for the connection, everything else `HTTP2Configuration`'s defaults.
    public static var defaultConfiguration: HTTP2Configuration {
        var configuration = HTTP2Configuration()
        configuration.initialWindowSize = streamReceiveWindow
        configuration.connectionWindowSize = connectionReceiveWindow
        return configuration
    }

    /// The HTTP/2 endpoint (client role).
    let session: HTTP2Session
    /// The established upstream TLS engine's layer, or nil for cleartext HTTP/2 with prior knowledge.
    let tls: TLSLayer?
    /// `:scheme` of every request: `https` over TLS, `http` otherwise.
    let scheme: String
    /// Where the link is in its life.
    var state: State = .active
    /// Open channels by id.
    var channels: [ChannelID: Channel] = [:]
    /// The next channel id to hand out.
    var nextChannelID: ChannelID = 1
    /// The channel whose current exchange runs on each stream (absent once the exchange is over or abandoned).
    var streamOwners: [Int32: Channel] = [:]
    /// Streams submitted and not yet closed by nghttp2 (owned or orphaned).
    var openStreams: Set<Int32> = []
    /// Whether the origin's SETTINGS arrived (before that its stream limit is capped at `assumedStreamLimit`).
    var peerSettingsReceived = false
    /// Channels that were told `.channelWritable(false)` and not yet `true`.
    var unwritable: [ChannelID: Channel] = [:]
    /// Channels that submitted request body bytes during the current call (checked against the high watermark).
    var bodyWriters: [Channel] = []
    /// Outputs of the current call other than `.network` and `.closeConnection`.
    var outputs: [Output] = []
    /// Channel parts not yet appended to `outputs`, coalesced per channel.
    var pendingParts: [HTTPPart] = []
    /// The channel `pendingParts` belong to.
    var pendingPartsChannel: ChannelID?
    /// `shutdown()` submitted our GOAWAY.
    var goAwaySubmitted = false
    /// `.closeConnection` is due at the end of the current call.
    var closeRequested = false
    /// `.closeConnection` was emitted: nothing more goes to the network.
    var closeEmitted = false
    /// The transport ended (EOF or TLS closed): nothing more can be sent.
    var transportEnded = false

    /// A link over `tls` (handshake complete, ALPN `h2`) or, with nil, over cleartext HTTP/2 with prior knowledge.
    /// Call `start()` next and send its output.
    /// - Throws: `HTTP2SessionError` if nghttp2 cannot create the session.
    public init(tls: TLSConnection?, configuration: HTTP2Configuration = UpstreamH2Link.defaultConfiguration) throws {
        self.tls = tls.map(TLSLayer.init)
        scheme = tls == nil ? "http" : "https"
        session = try HTTP2Session(role: .client, configuration: configuration)
    }

    /// The connection preface and our SETTINGS (and connection WINDOW_UPDATE). Over TLS, application data the
    /// engine already holds from the handshake's last flight (the origin's SETTINGS) is processed too.
    public func start() -> [Output] {
        if tls != nil, ingest([]) { transportClosed() }
        return finish()
    }

    /// Always `h2`: what the link speaks to the origin.
    public var negotiatedProtocol: String { "h2" }

    /// Whether another channel fits: the link is active (no GOAWAY either way, not failed or closed) and the open
    /// streams plus the channels without a stream (each may start one) stay below the origin's
    /// MAX_CONCURRENT_STREAMS.
    public var canOpenChannel: Bool {
        switch state {
        case .active:
            let reserved = openStreams.count + channels.count - streamOwners.count
            return reserved < peerStreamLimit
        case .goingAway, .closed:
            return false
        }
    }

    /// Open channels.
    public var channelCount: Int { channels.count }

    /// Opens a channel. Always succeeds (check `canOpenChannel` first): a request written on a channel the link
    /// cannot carry is answered with `.channelReset(_, .refusedStream)`.
    public func openChannel() -> ChannelID {
        let id = nextChannelID
        nextChannelID += 1
        channels[id] = Channel(id: id)
        return id
    }

    /// Sends request parts on the channel: a head opens a new stream (the channel must be idle: its previous
    /// exchange finished both ways), body pieces become DATA, trailers a trailing HEADERS, the message end
    /// END_STREAM. Unknown (forgotten) channels are ignored.
    public func send(_ parts: [HTTPPart], channel id: ChannelID) -> [Output] {
        guard let channel = channels[id] else { return [] }
        switch channel.state {
        case .answeredLocally:
            return []
        case .idle, .streaming, .draining:
            handleRequestEvents(parts, on: channel)
        }
        return finish()
    }

    /// The channel's session is gone: an unfinished stream is reset with CANCEL, held flow-control credit is
    /// released, and the channel is forgotten.
    public func closeChannel(_ id: ChannelID) -> [Output] {
        guard let channel = channels[id] else { return [] }
        forget(channel)
        if case .streaming(let exchange) = channel.state, openStreams.contains(exchange.stream) {
            switch state {
            case .active, .goingAway:
                try? session.resetStream(stream: exchange.stream, error: .cancel)
            case .closed:
                break
            }
        }
        return finish()
    }

    /// Response back-pressure for one channel: while paused, DATA received for its streams is still handed out but
    /// not acknowledged (no WINDOW_UPDATE), so the origin stops once the stream window is used; resuming
    /// acknowledges what was held.
    public func setReadingPaused(_ paused: Bool, channel id: ChannelID) -> [Output] {
        guard let channel = channels[id], channel.readingPaused != paused else { return [] }
        channel.readingPaused = paused
        if !paused { releaseHeldCredit(of: channel) }
        return finish()
    }

    /// Bytes received from the upstream socket (TLS records when the link has a `TLSConnection`).
    public func receive(_ network: [UInt8]) -> [Output] {
        switch state {
        case .closed:
            return []
        case .active, .goingAway:
            break
        }
        if ingest(network) { transportClosed() }
        return finish()
    }

    /// The upstream socket reached EOF: every channel whose response had not finished gets `.channelReset`, then
    /// `.closeConnection`.
    public func receiveEOF() -> [Output] {
        switch state {
        case .closed:
            return []
        case .active, .goingAway:
            tls?.receiveEnd()
            transportClosed()
            return finish()
        }
    }

    /// Graceful shutdown: GOAWAY(NO_ERROR); streams in flight finish, new requests are refused, and
    /// `.closeConnection` follows when no stream remains.
    public func shutdown() -> [Output] {
        switch state {
        case .closed:
            return []
        case .active, .goingAway:
            state = .goingAway
            if !goAwaySubmitted {
                goAwaySubmitted = true
                try? session.goAway(error: .noError)
            }
        }
        return finish()
    }

    // MARK: - Internals

    /// The origin's MAX_CONCURRENT_STREAMS (capped at `assumedStreamLimit` until its SETTINGS arrive).
    var peerStreamLimit: Int {
        let advertised = Int(session.remoteSetting(.maxConcurrentStreams))
        return peerSettingsReceived ? advertised : min(advertised, Self.assumedStreamLimit)
    }

    /// Feeds network bytes to the session: through the TLS engine (every record it can decrypt, handed over in one
    /// piece) or directly. Returns whether the TLS engine reported the end of the connection (close_notify, EOF or
    /// a failure).
    private func ingest(_ network: [UInt8]) -> Bool {
        guard let tls else {
            if !network.isEmpty { handleSessionEvents(session.receive(network)) }
            return false
        }
        let inbound = tls.decrypt(network)
        if !inbound.plaintext.isEmpty { handleSessionEvents(session.receive(inbound.plaintext)) }
        return inbound.end != nil
    }

    /// Ends the current call: settles session events and outbound frames, checks
    /// back-pressure and shutdown, encrypts, and returns the outputs in order.
    func finish() -> [Output] {
        var network: [UInt8] = []
        if !transportEnded && !closeEmitted {
            var plaintext: [UInt8] = []
            while true {
                handleSessionEvents(session.takeEvents())
                let chunk = session.takeOutbound()
                if chunk.isEmpty {
                    let events = session.takeEvents()
                    if events.isEmpty { break }
                    handleSessionEvents(events)
                    continue
                }
                if plaintext.isEmpty { plaintext = chunk } else { plaintext += chunk }
            }
            checkWritable()
            closeIfDone()
            network = encrypt(plaintext)
        }
        flushPendingParts()
        var result: [Output] = []
        swap(&result, &outputs)
        if !network.isEmpty { result.append(.network(network)) }
        if closeRequested && !closeEmitted {
            closeEmitted = true
            result.append(.closeConnection)
        }
        return result
    }

    /// Reports `.channelWritable` transitions from the session's buffered request-body bytes.
    private func checkWritable() {
        for channel in bodyWriters where channels[channel.id] === channel && unwritable[channel.id] == nil {
            if case .streaming(let exchange) = channel.state,
                session.bufferedOutboundBytes(stream: exchange.stream) > Self.requestBodyHighWatermark
            {
                unwritable[channel.id] = channel
                emit(.channelWritable(channel.id, false))
            }
        }
        bodyWriters.removeAll()
        guard !unwritable.isEmpty else { return }
        for id in unwritable.keys.sorted() {
            guard let channel = unwritable[id] else { continue }
            if case .streaming(let exchange) = channel.state,
                session.bufferedOutboundBytes(stream: exchange.stream) > Self.requestBodyLowWatermark
            {
                continue
            }
            unwritable[id] = nil
            emit(.channelWritable(id, true))
        }
    }

    /// A going-away link with no stream left is finished.
    private func closeIfDone() {
        switch state {
        case .goingAway where openStreams.isEmpty:
            state = .closed
            closeRequested = true
            tls?.close()
        case .active, .goingAway, .closed:
            break
        }
    }

    /// Plaintext through the TLS engine, or as is.
    private func encrypt(_ plaintext: [UInt8]) -> [UInt8] {
        guard let tls else { return plaintext }
        if !plaintext.isEmpty && !tls.seal(plaintext) { failLink(.internalError) }
        return tls.takeRecords()
    }

    /// The transport ended: unfinished exchanges are reset, the link is closed.
    func transportClosed() {
        transportEnded = true
        for id in channels.keys.sorted() {
            guard let channel = channels[id], case .streaming(let exchange) = channel.state else { continue }
            switch exchange.response {
            case .awaitingHead, .body:
                reset(channel, .internalError)
            case .complete:
                streamOwners[exchange.stream] = nil
                channel.state = exchange.requestEnded ? .idle : .draining
            }
        }
        openStreams.removeAll()
        state = .closed
        closeRequested = true
    }

    /// A fatal error: every channel is reset with `code` and forgotten, the link is closed (a GOAWAY nghttp2 queued
    /// still goes out).
    func failLink(_ code: HTTP2ErrorCode) {
        switch state {
        case .closed:
            return
        case .active, .goingAway:
            break
        }
        for id in channels.keys.sorted() {
            emit(.channelReset(id, code))
        }
        channels.removeAll()
        streamOwners.removeAll()
        unwritable.removeAll()
        openStreams.removeAll()
        state = .closed
        closeRequested = true
    }

    /// Emits `.channelReset(channel, code)` and forgets the channel (held credit is released).
    func reset(_ channel: Channel, _ code: HTTP2ErrorCode) {
        guard channels[channel.id] === channel else { return }
        forget(channel)
        emit(.channelReset(channel.id, code))
    }

    /// Removes every trace of `channel` except its stream in `openStreams`, releasing held flow-control credit.
    func forget(_ channel: Channel) {
        channels[channel.id] = nil
        unwritable[channel.id] = nil
        if case .streaming(let exchange) = channel.state, streamOwners[exchange.stream] === channel {
            streamOwners[exchange.stream] = nil
        }
        releaseHeldCredit(of: channel)
    }

    /// Acknowledges the DATA held back while the channel's reading was paused.
    func releaseHeldCredit(of channel: Channel) {
        guard !channel.heldBytes.isEmpty else { return }
        for (stream, count) in channel.heldBytes {
            session.consumeStream(stream: stream, bytes: count)
        }
        channel.heldBytes.removeAll()
    }

    /// Appends an output, after any coalesced channel parts.
    func emit(_ output: Output) {
        flushPendingParts()
        outputs.append(output)
    }

    /// Queues a response part for `channel`, coalescing consecutive parts of one channel into one output.
    func emitPart(_ part: HTTPPart, channel: ChannelID) {
        if pendingPartsChannel != channel {
            flushPendingParts()
            pendingPartsChannel = channel
        }
        pendingParts.append(part)
    }

    /// Moves the coalesced channel parts into `outputs`.
    func flushPendingParts() {
        guard let channel = pendingPartsChannel else { return }
        outputs.append(.channelParts(channel, pendingParts))
        pendingParts = []
        pendingPartsChannel = nil
    }
}

extension UpstreamH2Link {
    /// One virtual keep-alive connection to the origin: its current exchange and its response back-pressure.
    /// A reference type so that the link's tables share one instance per channel; owned by the link.
    final class Channel {
        /// The id the session knows it by.
        let id: ChannelID
        /// What the channel is doing.
        var state: ChannelState = .idle
        /// The session asked to stop reading responses (`setReadingPaused(true)`).
        var readingPaused = false
        /// DATA bytes handed out while paused and not yet acknowledged, per stream.
        var heldBytes: [Int32: Int] = [:]

        /// A new idle channel.
        init(id: ChannelID) {
            self.id = id
        }
    }

    /// What a channel is doing.
    enum ChannelState {
        /// No exchange: waiting for the next request head, which opens a new stream.
        case idle
        /// An exchange is in flight on a stream (request and/or response unfinished).
        case streaming(Exchange)
        /// The response finished but the stream is gone before the request body did: the rest of the request is
        /// discarded, then the channel is idle again.
        case draining
        /// The link answered the channel itself (502 to an Upgrade or CONNECT request, `Connection: close`):
        /// further bytes are ignored until the session closes the channel.
        case answeredLocally
    }

    /// One request/response exchange on one stream. Reference type, owned by its channel's state.
    final class Exchange {
        /// The HTTP/2 stream carrying it.
        let stream: Int32
        /// The request was HEAD: the response has no body whatever its fields say.
        let isHead: Bool
        /// END_STREAM (or trailers) was submitted for the request.
        var requestEnded: Bool
        /// Where the response is.
        var response: ResponseState = .awaitingHead
        /// Response trailers received, written with the last chunk.
        var responseTrailers: [HTTP2Header] = []

        /// An exchange whose request head was submitted on `stream`.
        init(stream: Int32, isHead: Bool, requestEnded: Bool) {
            self.stream = stream
            self.isHead = isHead
            self.requestEnded = requestEnded
        }
    }

    /// Where a stream's response is.
    enum ResponseState {
        /// No final head yet (1xx heads may have been handed on).
        case awaitingHead
        /// The final head was handed on with this framing (`.none`: DATA, if any, is discarded).
        case body(HTTPBodyFraming)
        /// END_STREAM received and the message end handed on.
        case complete
    }
}
