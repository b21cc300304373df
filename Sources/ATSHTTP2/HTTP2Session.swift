internal import CNGHTTP2

/// One HTTP/2 connection endpoint (server or client role), sans-io: the owner feeds received bytes with
/// `receive(_:now:)`, sends whatever `takeOutbound()` returns, and reacts to `HTTP2Event`s.
///
/// Owns exactly one `nghttp2_session*` and frees it in `deinit`. All framing, HPACK and flow control are nghttp2's;
/// this type adds per-stream send buffers (DATA goes out through a deferred `nghttp2_data_provider`), explicit
/// receive-side flow control (bytes are acknowledged only by `consume(stream:bytes:)`, so a slow owner throttles the
/// peer through WINDOW_UPDATE), and hardening limits (`HTTP2Configuration`).
///
/// Threading: not thread-safe and deliberately not `Sendable`. One owner (one serial queue or one task) uses it;
/// nghttp2 callbacks run synchronously inside `receive`, `takeOutbound` and the commands, on the caller's thread.
public final class HTTP2Session {
    /// Server (accepts requests) or client (sends them).
    public let role: HTTP2Role
    /// Local settings and limits, fixed at creation.
    public let configuration: HTTP2Configuration

    /// The nghttp2 session; non-nil from the end of `init` until `deinit`.
    var session: OpaquePointer?
    /// Events produced by callbacks and not yet handed to the owner.
    var pendingEvents: [HTTP2Event] = []
    /// Outbound DATA state of streams whose body goes through the data provider.
    var outbound: [Int32: OutboundStream] = [:]
    /// The bytes queued in all of `outbound`'s buffers.
    var outboundTotal = 0
    /// Header blocks being received, per stream.
    var inboundHeaders: [Int32: InboundHeaderBlock] = [:]
    /// The first unrecoverable error, if any. Once set, input is ignored.
    var failure: HTTP2SessionError?
    /// Whether we sent / received a GOAWAY.
    var goAwaySent = false
    var goAwayReceived = false
    /// The last text nghttp2 gave its error callback, used to explain connection errors.
    var lastLibraryMessage: String?
    /// Times of the stream resets counted within the last second (see `countReset`).
    var recentResets: [ContinuousClock.Instant] = []
    /// Stream resets counted since the session began.
    var resetsCounted = 0
    /// The time passed to the `receive` in progress.
    var now: ContinuousClock.Instant = .now

    /// Per-stream send buffer for the data provider.
    struct OutboundStream {
        /// Bytes submitted and not yet taken by nghttp2.
        var buffer = ByteQueue()
        /// Whether the owner asked to end the stream once the buffer drains.
        var endRequested = false
        /// Trailers to send after the buffer drains (implies `endRequested`).
        var trailers: [HTTP2Header]?
    }

    /// A header block being assembled from `on_header` callbacks.
    struct InboundHeaderBlock {
        /// Fields in wire order.
        var fields: [HTTP2Header] = []
        /// RFC 9113 size so far: name + value + 32 per field.
        var size = 0

        /// Appends `field`, whose block size including it is `size`.
        mutating func append(_ field: HTTP2Header, size: Int) {
            fields.append(field)
            self.size = size
        }
    }

    /// Creates a session in `role`, queues our SETTINGS (push disabled) and, for a client, the connection preface.
    /// - Throws: `HTTP2SessionError` if nghttp2 cannot allocate the session.
    public init(role: HTTP2Role, configuration: HTTP2Configuration = HTTP2Configuration()) throws {
        self.role = role
        self.configuration = configuration

        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw HTTP2SessionError(libraryCode: NGHTTP2_ERR_NOMEM.rawValue, message: "nghttp2_session_callbacks_new")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        HTTP2Session.install(callbacks)

        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else {
            throw HTTP2SessionError(libraryCode: NGHTTP2_ERR_NOMEM.rawValue, message: "nghttp2_option_new")
        }
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_no_closed_streams(option, 1)
        nghttp2_option_set_max_settings(option, configuration.maxSettingsEntries)
        nghttp2_option_set_max_continuations(option, configuration.maxContinuations)

        let user = Unmanaged.passUnretained(self).toOpaque()
        var created: OpaquePointer?
        let rv: Int32
        switch role {
        case .server: rv = nghttp2_session_server_new2(&created, callbacks, user, option)
        case .client: rv = nghttp2_session_client_new2(&created, callbacks, user, option)
        }
        guard rv == 0, let created else {
            throw HTTP2SessionError(libraryCode: rv, message: HTTP2Session.text(rv))
        }
        session = created

        let entries: [nghttp2_settings_entry] = [
            .init(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            .init(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: configuration.maxConcurrentStreams
            ),
            .init(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                value: configuration.initialWindowSize),
            .init(settings_id: Int32(NGHTTP2_SETTINGS_MAX_FRAME_SIZE.rawValue), value: configuration.maxFrameSize),
            .init(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: configuration.maxHeaderListSize),
        ]
        let settingsRV = entries.withUnsafeBufferPointer {
            nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), $0.baseAddress, $0.count)
        }
        guard settingsRV == 0 else {
            throw HTTP2SessionError(libraryCode: settingsRV, message: HTTP2Session.text(settingsRV))
        }
        if configuration.connectionWindowSize > 65_535 {
            let windowRV = nghttp2_session_set_local_window_size(
                created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(clamping: configuration.connectionWindowSize))
            guard windowRV == 0 else {
                throw HTTP2SessionError(libraryCode: windowRV, message: HTTP2Session.text(windowRV))
            }
        }
    }

    deinit {
        nghttp2_session_del(session)
    }

    // MARK: - I/O

    /// Feeds bytes received from the peer; returns every event produced since the last call to `receive` or
    /// `takeEvents` (including events caused by earlier commands and `takeOutbound`).
    ///
    /// `now` drives the RST_STREAM rate limit; pass the driver's clock (tests pass fixed instants).
    /// After a failure the input is ignored and only the pending events are returned.
    public func receive(_ bytes: [UInt8], now: ContinuousClock.Instant = .now) -> [HTTP2Event] {
        self.now = now
        if failure == nil, !bytes.isEmpty, let session {
            let rv = bytes.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, $0.count) }
            if rv < 0 {
                fail(libraryCode: Int32(rv))
            }
        }
        return takeEvents()
    }

    /// Everything nghttp2 wants to send now (frames, the client preface, WINDOW_UPDATEs, PING ACKs); empty if none.
    /// Sending may produce events (streams closing, GOAWAY sent): collect them with `takeEvents()`.
    public func takeOutbound() -> [UInt8] {
        guard let session else { return [] }
        var out: [UInt8] = []
        while true {
            var chunk: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &chunk)
            if n < 0 {
                fail(libraryCode: Int32(n))
                break
            }
            guard n > 0, let chunk else { break }
            out.append(contentsOf: UnsafeBufferPointer(start: chunk, count: n))
        }
        return out
    }

    /// Events produced so far and not yet returned, in order.
    public func takeEvents() -> [HTTP2Event] {
        defer { pendingEvents.removeAll(keepingCapacity: true) }
        return pendingEvents
    }

    // MARK: - Commands

    /// Opens a stream with a request head (client role). With `endStream == false` the body follows through
    /// `submitData` / `submitTrailers`. If the peer's concurrency limit is reached nghttp2 queues the HEADERS until
    /// a stream closes. Returns the new stream id.
    public func submitRequest(_ headers: [HTTP2Header], endStream: Bool) throws -> Int32 {
        let session = try liveSession()
        var provider = HTTP2Session.dataProvider()
        let rv = HTTP2Session.withNV(headers) { nva, count in
            endStream
                ? nghttp2_submit_request(session, nil, nva, count, nil, nil)
                : nghttp2_submit_request(session, nil, nva, count, &provider, nil)
        }
        guard rv > 0 else { throw HTTP2SessionError(libraryCode: rv, message: HTTP2Session.text(rv)) }
        if !endStream { outbound[rv] = OutboundStream() }
        return rv
    }

    /// Sends a response head on `stream` (server role); a 1xx head may precede the final one (use
    /// `submitInformational`). With `endStream == false` the body follows through `submitData` / `submitTrailers`.
    public func submitResponse(stream: Int32, headers: [HTTP2Header], endStream: Bool) throws {
        let session = try liveSession()
        var provider = HTTP2Session.dataProvider()
        let rv = HTTP2Session.withNV(headers) { nva, count in
            endStream
                ? nghttp2_submit_response(session, stream, nva, count, nil)
                : nghttp2_submit_response(session, stream, nva, count, &provider)
        }
        guard rv == 0 else { throw HTTP2SessionError(libraryCode: rv, message: HTTP2Session.text(rv)) }
        if !endStream { outbound[stream] = OutboundStream() }
    }

    /// Sends an interim 1xx response head on `stream` (server role) without ending it.
    public func submitInformational(stream: Int32, headers: [HTTP2Header]) throws {
        let session = try liveSession()
        let rv = HTTP2Session.withNV(headers) { nva, count in
            nghttp2_submit_headers(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, nil, nva, count, nil)
        }
        guard rv >= 0 else { throw HTTP2SessionError(libraryCode: rv, message: HTTP2Session.text(rv)) }
    }

    /// Appends body bytes to `stream`'s send buffer; with `endStream` the stream ends once the buffer drains.
    /// Bytes leave as the peer's flow-control windows allow; `bufferedOutboundBytes(stream:)` tells the owner how
    /// much is still waiting, so it can stop reading from its own source.
    public func submitData(stream: Int32, bytes: [UInt8], endStream: Bool) throws {
        let session = try liveSession()
        guard outbound[stream]?.endRequested == false else {
            throw HTTP2SessionError(
                libraryCode: NGHTTP2_ERR_STREAM_SHUT_WR.rawValue, message: "stream \(stream) has no open body")
        }
        // Mutated in place (no copy bound first): a copy taken out of the dictionary would share the
        // buffer's storage, and appending to the entry would then copy every byte still queued.
        outbound[stream]!.buffer.append(bytes)
        outbound[stream]!.endRequested = endStream
        outboundTotal += bytes.count
        _ = nghttp2_session_resume_data(session, stream)
    }

    /// Ends `stream`'s body with trailers once the buffered bytes are sent.
    public func submitTrailers(stream: Int32, headers: [HTTP2Header]) throws {
        let session = try liveSession()
        guard outbound[stream]?.endRequested == false else {
            throw HTTP2SessionError(
                libraryCode: NGHTTP2_ERR_STREAM_SHUT_WR.rawValue, message: "stream \(stream) has no open body")
        }
        outbound[stream]!.endRequested = true
        outbound[stream]!.trailers = headers
        _ = nghttp2_session_resume_data(session, stream)
    }

    /// Acknowledges `bytes` of received DATA on `stream` (and the connection), letting nghttp2 send WINDOW_UPDATE.
    /// Call it when the bytes have left this process (or were discarded); not calling it stalls the peer.
    public func consume(stream: Int32, bytes: Int) {
        guard let session, bytes > 0 else { return }
        if nghttp2_session_consume(session, stream, bytes) != 0 {
            _ = nghttp2_session_consume_connection(session, bytes)
        }
    }

    /// Acknowledges `bytes` on the connection window only. With `consumeStream(stream:bytes:)` later, this lets an
    /// owner hold back one stream (its window stays spent) without starving the connection's other streams.
    public func consumeConnection(bytes: Int) {
        guard let session, bytes > 0 else { return }
        _ = nghttp2_session_consume_connection(session, bytes)
    }

    /// Acknowledges `bytes` on `stream`'s window only (their connection-level share went with `consumeConnection`).
    /// A stream that is already closed needs nothing and is ignored.
    public func consumeStream(stream: Int32, bytes: Int) {
        guard let session, bytes > 0 else { return }
        _ = nghttp2_session_consume_stream(session, stream, bytes)
    }

    /// Resets `stream` with `error` (RST_STREAM) and drops its send buffer.
    public func resetStream(stream: Int32, error: HTTP2ErrorCode) throws {
        let session = try liveSession()
        let rv = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, error.rawValue)
        guard rv == 0 else { throw HTTP2SessionError(libraryCode: rv, message: HTTP2Session.text(rv)) }
        dropOutbound(stream)
    }

    /// Sends GOAWAY. With `.noError` it is graceful: streams up to the last one processed finish, no new ones start.
    /// Any other code terminates the session once the GOAWAY is sent.
    public func goAway(error: HTTP2ErrorCode, debugData: [UInt8] = []) throws {
        let session = try liveSession()
        let rv: Int32
        if error == .noError {
            let last = nghttp2_session_get_last_proc_stream_id(session)
            rv = debugData.withUnsafeBufferPointer {
                nghttp2_submit_goaway(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, error.rawValue, $0.baseAddress, $0.count)
            }
        } else {
            rv = nghttp2_session_terminate_session(session, error.rawValue)
        }
        guard rv == 0 else { throw HTTP2SessionError(libraryCode: rv, message: HTTP2Session.text(rv)) }
    }

    /// Sends a PING with `payload`; the answer arrives as `.pingAcknowledged(payload:)`.
    public func ping(_ payload: UInt64) throws {
        let session = try liveSession()
        let bytes = withUnsafeBytes(of: payload.bigEndian) { Array($0) }
        let rv = bytes.withUnsafeBufferPointer {
            nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), $0.baseAddress)
        }
        guard rv == 0 else { throw HTTP2SessionError(libraryCode: rv, message: HTTP2Session.text(rv)) }
    }

    // MARK: - Queries

    /// The session's lifecycle state.
    public var state: HTTP2SessionState {
        if let failure { return .failed(failure) }
        if !wantsRead && !wantsWrite { return .finished }
        if goAwaySent || goAwayReceived { return .goingAway }
        return .active
    }

    /// Whether nghttp2 still expects input (`nghttp2_session_want_read`).
    public var wantsRead: Bool {
        guard let session, failure == nil else { return false }
        return nghttp2_session_want_read(session) != 0
    }

    /// Whether nghttp2 has something to send (`nghttp2_session_want_write`). A stream waiting for body bytes does
    /// not count.
    public var wantsWrite: Bool {
        guard let session else { return false }
        return nghttp2_session_want_write(session) != 0
    }

    /// The state of `stream` as nghttp2 tracks it.
    public func streamState(_ stream: Int32) -> HTTP2StreamState {
        guard let session, let handle = nghttp2_session_find_stream(session, stream) else { return .idle }
        switch nghttp2_stream_get_state(handle) {
        case NGHTTP2_STREAM_STATE_OPEN: return .open
        case NGHTTP2_STREAM_STATE_RESERVED_LOCAL: return .reservedLocal
        case NGHTTP2_STREAM_STATE_RESERVED_REMOTE: return .reservedRemote
        case NGHTTP2_STREAM_STATE_HALF_CLOSED_LOCAL: return .halfClosedLocal
        case NGHTTP2_STREAM_STATE_HALF_CLOSED_REMOTE: return .halfClosedRemote
        case NGHTTP2_STREAM_STATE_CLOSED: return .closed
        default: return .idle  // NGHTTP2_STREAM_STATE_IDLE, a C enum: nghttp2 may add values.
        }
    }

    /// Body bytes submitted on `stream` and not yet handed to nghttp2 (0 for unknown streams).
    public func bufferedOutboundBytes(stream: Int32) -> Int {
        outbound[stream]?.buffer.count ?? 0
    }

    /// Body bytes submitted on all streams and not yet handed to nghttp2.
    public var bufferedOutboundTotal: Int { outboundTotal }

    /// Whether a header block has begun (HEADERS without END_HEADERS) and not been completed by its CONTINUATIONs.
    public var isReceivingHeaderBlock: Bool { !inboundHeaders.isEmpty }

    /// Stream resets counted against the reset budget so far (the peer's, plus ours when `countsSentResets`).
    public var resetCount: Int { resetsCounted }

    /// Forgets `stream`'s send buffer (the stream ended or was reset).
    func dropOutbound(_ stream: Int32) {
        if let state = outbound.removeValue(forKey: stream) { outboundTotal -= state.buffer.count }
    }

    /// How many bytes `stream` may still send before the peer's window closes (min of stream and connection).
    public func sendWindow(stream: Int32) -> Int {
        guard let session else { return 0 }
        let streamWindow = Int(nghttp2_session_get_stream_remote_window_size(session, stream))
        return min(max(streamWindow, 0), Int(nghttp2_session_get_remote_window_size(session)))
    }

    /// The peer's value of a setting (its default before its SETTINGS arrive).
    public func remoteSetting(_ id: HTTP2SettingID) -> UInt32 {
        guard let session else { return 0 }
        return nghttp2_session_get_remote_settings(
            session, nghttp2_settings_id(rawValue: UInt32(bitPattern: id.rawValue)))
    }

    // MARK: - Internals

    /// The session if no failure happened, else the failure.
    private func liveSession() throws -> OpaquePointer {
        if let failure { throw failure }
        guard let session else {
            throw HTTP2SessionError(libraryCode: NGHTTP2_ERR_INVALID_STATE.rawValue, message: "no session")
        }
        return session
    }

    /// Records a fatal library error, queues a GOAWAY if nghttp2 still can, and emits `.sessionFailed`.
    func fail(libraryCode: Int32) {
        guard failure == nil else { return }
        let goAwayCode: HTTP2ErrorCode
        switch libraryCode {
        case NGHTTP2_ERR_FLOODED.rawValue, NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue:
            goAwayCode = .enhanceYourCalm
        case NGHTTP2_ERR_NOMEM.rawValue, NGHTTP2_ERR_CALLBACK_FAILURE.rawValue:
            goAwayCode = .internalError
        default:
            goAwayCode = .protocolError
        }
        var message = HTTP2Session.text(libraryCode)
        if let lastLibraryMessage { message += ": \(lastLibraryMessage)" }
        let error = HTTP2SessionError(libraryCode: libraryCode, message: message)
        failure = error
        if let session, !goAwaySent {
            _ = nghttp2_session_terminate_session(session, goAwayCode.rawValue)
        }
        pendingEvents.append(.sessionFailed(error))
    }

    /// nghttp2's text for a library error code.
    static func text(_ code: Int32) -> String {
        String(cString: nghttp2_strerror(code))
    }

    /// A data provider whose read callback is `onDataSourceRead` (capture-free; the stream id finds the buffer).
    private static func dataProvider() -> nghttp2_data_provider {
        nghttp2_data_provider(
            source: nghttp2_data_source(ptr: nil),
            read_callback: { _, stream, buffer, length, flags, _, user in
                guard let user, let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
                return HTTP2Session.owner(user).onDataSourceRead(
                    stream: stream, buffer: buffer, length: length, flags: flags)
            })
    }

    /// Calls `body` with `headers` as a temporary `nghttp2_nv` array (nghttp2 copies it during the call).
    /// Every name and value (as ``FieldValueBytes`` bytes) goes into one buffer, so a header block costs two
    /// allocations (the bytes and the array), not four per field; the pointers are valid only inside `body`.
    static func withNV<R>(
        _ headers: [HTTP2Header], _ body: (UnsafePointer<nghttp2_nv>?, Int) -> R
    ) -> R {
        // One spare byte keeps the buffer non-empty, so its base address exists even for empty fields.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headers.reduce(1) { $0 + $1.name.utf8.count + $1.value.utf8.count })
        var nva: [nghttp2_nv] = []
        nva.reserveCapacity(headers.count)
        for header in headers {
            let nameStart = bytes.count
            FieldValueBytes.append(header.name, to: &bytes)
            let valueStart = bytes.count
            FieldValueBytes.append(header.value, to: &bytes)
            nva.append(
                nghttp2_nv(
                    name: nil, value: nil, namelen: valueStart - nameStart, valuelen: bytes.count - valueStart,
                    flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
        }
        bytes.append(0)
        return bytes.withUnsafeMutableBufferPointer { buffer in
            // The fields sit back to back in header order: each pointer is the running offset.
            guard let base = buffer.baseAddress else { preconditionFailure("a non-empty buffer has storage") }
            var offset = 0
            for index in nva.indices {
                nva[index].name = base + offset
                offset += nva[index].namelen
                nva[index].value = base + offset
                offset += nva[index].valuelen
            }
            return nva.withUnsafeBufferPointer { body($0.baseAddress, $0.count) }
        }
    }

    /// The session behind an nghttp2 `user_data` pointer.
    static func owner(_ user: UnsafeMutableRawPointer) -> HTTP2Session {
        Unmanaged<HTTP2Session>.fromOpaque(user).takeUnretainedValue()
    }
}
