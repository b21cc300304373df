internal import CNGHTTP2

/// nghttp2 callbacks: capture-free `@convention(c)` trampolines that find their `HTTP2Session` through the
/// `Unmanaged` user data, and the instance methods they call. They run synchronously inside the session's own
/// calls into nghttp2, on the owner's thread.
extension HTTP2Session {
    /// Registers every callback this type uses on `callbacks`.
    static func install(_ callbacks: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            return HTTP2Session.owner(user).onBeginHeaders(frame)
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let name, let value, let user else { return 0 }
            return HTTP2Session.owner(user).onHeader(
                frame, name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            return HTTP2Session.owner(user).onFrameReceived(frame)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, user in
            guard let user else { return 0 }
            let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
            return HTTP2Session.owner(user).onDataChunk(stream: stream, bytes: bytes)
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, errorCode, user in
            guard let user else { return 0 }
            return HTTP2Session.owner(user).onStreamClose(stream: stream, error: HTTP2ErrorCode(rawValue: errorCode))
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            return HTTP2Session.owner(user).onFrameSent(frame)
        }
        nghttp2_session_callbacks_set_error_callback2(callbacks) { _, _, message, length, user in
            guard let message, let user else { return 0 }
            let bytes = UnsafeRawBufferPointer(start: message, count: length)
            HTTP2Session.owner(user).noteLibraryMessage(String(decoding: bytes, as: UTF8.self))
            return 0
        }
    }

    /// A HEADERS frame starts a new header block on its stream.
    func onBeginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        inboundHeaders[frame.pointee.hd.stream_id] = InboundHeaderBlock()
        return 0
    }

    /// One validated field of a header block; enforces `maxHeaderListSize` by resetting the stream.
    func onHeader(
        _ frame: UnsafePointer<nghttp2_frame>, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>
    ) -> Int32 {
        let stream = frame.pointee.hd.stream_id
        let size = (inboundHeaders[stream]?.size ?? 0) + name.count + value.count + 32
        if size > Int(configuration.maxHeaderListSize) {
            inboundHeaders[stream] = nil
            if let session {
                _ = nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, HTTP2ErrorCode.enhanceYourCalm.rawValue)
            }
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        let field = HTTP2Header(String(decoding: name, as: UTF8.self), FieldValueBytes.string(from: value))
        // Changed in place through the dictionary (one lookup): a copy taken out and stored back would share the
        // fields' buffer, so every append would copy the whole block gathered so far.
        inboundHeaders[stream, default: InboundHeaderBlock()].append(field, size: size)
        return 0
    }

    /// A complete frame arrived: turn it into events, and count RST_STREAMs against the rate limit.
    func onFrameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard failure == nil else { return 0 }
        let header = frame.pointee.hd
        let stream = header.stream_id
        let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(header.type) {
        case NGHTTP2_HEADERS.rawValue:
            let fields = inboundHeaders.removeValue(forKey: stream)?.fields ?? []
            pendingEvents.append(
                .headers(stream: stream, kind: headersKind(category: frame.pointee.headers.cat, fields), fields: fields)
            )
            if endStream { pendingEvents.append(.streamEnded(stream: stream)) }
        case NGHTTP2_DATA.rawValue:
            if endStream { pendingEvents.append(.streamEnded(stream: stream)) }
        case NGHTTP2_SETTINGS.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
                pendingEvents.append(.settingsAcknowledged)
            } else {
                let settings = frame.pointee.settings
                let entries = (0..<settings.niv).map {
                    HTTP2Setting(HTTP2SettingID(rawValue: settings.iv[$0].settings_id), settings.iv[$0].value)
                }
                pendingEvents.append(.settings(entries))
            }
        case NGHTTP2_RST_STREAM.rawValue:
            pendingEvents.append(
                .streamReset(stream: stream, error: HTTP2ErrorCode(rawValue: frame.pointee.rst_stream.error_code)))
            dropOutbound(stream)
            countReset()
        case NGHTTP2_GOAWAY.rawValue:
            let goaway = frame.pointee.goaway
            goAwayReceived = true
            let debug = goaway.opaque_data.map { Array(UnsafeBufferPointer(start: $0, count: goaway.opaque_data_len)) }
            pendingEvents.append(
                .goAway(
                    lastStreamID: goaway.last_stream_id, error: HTTP2ErrorCode(rawValue: goaway.error_code),
                    debugData: debug ?? []))
        case NGHTTP2_PING.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
                let payload = withUnsafeBytes(of: frame.pointee.ping.opaque_data) { $0.loadUnaligned(as: UInt64.self) }
                pendingEvents.append(.pingAcknowledged(payload: UInt64(bigEndian: payload)))
            }
        default:
            break  // PRIORITY, WINDOW_UPDATE, extensions: nghttp2 handles them; nothing for the owner.
        }
        return 0
    }

    /// Classifies a received header block from the role, nghttp2's category and `:status`.
    private func headersKind(category: nghttp2_headers_category, _ fields: [HTTP2Header]) -> HTTP2HeadersKind {
        switch role {
        case .server:
            return category == NGHTTP2_HCAT_REQUEST ? .request : .trailers
        case .client:
            guard let status = fields.first(where: { $0.name == ":status" })?.value else { return .trailers }
            return status.hasPrefix("1") ? .informational : .response
        }
    }

    /// A chunk of DATA payload, reported as received (flow control waits for `consume`).
    func onDataChunk(stream: Int32, bytes: [UInt8]) -> Int32 {
        guard failure == nil else {
            consume(stream: stream, bytes: bytes.count)
            return 0
        }
        pendingEvents.append(.data(stream: stream, bytes: bytes))
        return 0
    }

    /// nghttp2 forgot a stream: drop our per-stream state and tell the owner.
    func onStreamClose(stream: Int32, error: HTTP2ErrorCode) -> Int32 {
        dropOutbound(stream)
        inboundHeaders[stream] = nil
        pendingEvents.append(.streamClosed(stream: stream, error: error))
        return 0
    }

    /// A frame left: report the GOAWAYs and RST_STREAMs we sent (ours or nghttp2's own).
    func onFrameSent(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let header = frame.pointee.hd
        switch UInt32(header.type) {
        case NGHTTP2_GOAWAY.rawValue:
            goAwaySent = true
            let error = HTTP2ErrorCode(rawValue: frame.pointee.goaway.error_code)
            pendingEvents.append(.goAwaySent(lastStreamID: frame.pointee.goaway.last_stream_id, error: error))
            if error != .noError, failure == nil {
                let text = lastLibraryMessage.map { ": \($0)" } ?? ""
                let failed = HTTP2SessionError(
                    libraryCode: NGHTTP2_ERR_PROTO.rawValue, message: "connection error \(error)\(text)")
                failure = failed
                pendingEvents.append(.sessionFailed(failed))
            }
        case NGHTTP2_RST_STREAM.rawValue:
            pendingEvents.append(
                .streamResetSent(
                    stream: header.stream_id, error: HTTP2ErrorCode(rawValue: frame.pointee.rst_stream.error_code)))
            if configuration.countsSentResets { countReset() }
        default:
            break  // Other frames sent are not events.
        }
        return 0
    }

    /// Remembers nghttp2's latest error text for the failure message.
    func noteLibraryMessage(_ message: String) {
        lastLibraryMessage = message
    }

    /// Copies buffered body bytes into nghttp2's frame buffer, or defers the stream until `submitData` resumes it.
    func onDataSourceRead(
        stream: Int32, buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard outbound[stream] != nil else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        // Read in place (a copy would share the buffer's storage and copy it on the first mutation).
        let count = outbound[stream]!.buffer.read(into: buffer, maximum: length)
        outboundTotal -= count
        let state = outbound[stream]!
        if state.buffer.count == 0, state.endRequested {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            if let trailers = state.trailers, let session {
                flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                let rv = HTTP2Session.withNV(trailers) { nva, count in
                    nghttp2_submit_trailer(session, stream, nva, count)
                }
                if rv != 0 { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
            }
            dropOutbound(stream)
            return count
        }
        return count == 0 ? Int(NGHTTP2_ERR_DEFERRED.rawValue) : count
    }

    /// Counts one stream reset (the peer's RST_STREAM, or one we sent when `countsSentResets`); more than
    /// `maxResetsPerSecond` within a second, or more than `maxResetsPerSession` in all, fails the session with
    /// GOAWAY(ENHANCE_YOUR_CALM).
    private func countReset() {
        resetsCounted += 1
        let windowStart = now - .seconds(1)
        recentResets.removeAll { $0 <= windowStart }
        recentResets.append(now)
        guard failure == nil, let session else { return }
        let error: HTTP2SessionError
        if recentResets.count > configuration.maxResetsPerSecond {
            error = HTTP2SessionError(
                libraryCode: HTTP2SessionError.atsResetFloodCode,
                message: "more than \(configuration.maxResetsPerSecond) streams reset in one second")
        } else if let budget = configuration.maxResetsPerSession, resetsCounted > budget {
            error = HTTP2SessionError(
                libraryCode: HTTP2SessionError.atsResetBudgetCode,
                message: "more than \(budget) streams reset on one connection")
        } else {
            return
        }
        failure = error
        _ = nghttp2_session_terminate_session(session, HTTP2ErrorCode.enhanceYourCalm.rawValue)
        pendingEvents.append(.sessionFailed(error))
    }
}
