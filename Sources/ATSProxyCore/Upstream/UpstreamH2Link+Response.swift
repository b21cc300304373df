import ATSHTTP2

/// Response side of `UpstreamH2Link`: `HTTP2Session` events become typed response parts for the channel's
/// exchange (no HTTP/1.1 text), resets and link state changes. Runs on the link owner's thread.
extension UpstreamH2Link {
    /// Handles session events in order.
    func handleSessionEvents(_ events: [HTTP2Event]) {
        var index = 0
        while index < events.count {
            let event = events[index]
            index += 1
            switch event {
            case .headers(let stream, let kind, let fields):
                var endsNow = false
                if index < events.count, case .streamEnded(stream) = events[index] { endsNow = true }
                responseHeaders(stream: stream, kind: kind, fields: fields, endsNow: endsNow)
            case .data(let stream, let bytes):
                responseData(stream: stream, bytes: bytes)
            case .streamEnded(let stream):
                responseEnded(stream: stream)
            case .streamReset(let stream, let error), .streamResetSent(let stream, let error):
                streamTerminated(stream: stream, error: error)
            case .streamClosed(let stream, let error):
                openStreams.remove(stream)
                streamTerminated(stream: stream, error: error == .noError ? .internalError : error)
            case .goAway(let lastStreamID, _, _):
                goAwayReceived(lastStreamID: lastStreamID)
            case .goAwaySent:
                switch state {
                case .active: state = .goingAway
                case .goingAway, .closed: break
                }
            case .sessionFailed:
                failLink(.protocolError)
            case .settings:
                peerSettingsReceived = true
            case .settingsAcknowledged, .pingAcknowledged:
                break
            }
        }
    }

    /// The exchange a stream carries and its channel, if the stream still belongs to one.
    private func owner(of stream: Int32) -> (Channel, Exchange)? {
        guard let channel = streamOwners[stream], case .streaming(let exchange) = channel.state,
            exchange.stream == stream
        else { return nil }
        return (channel, exchange)
    }

    /// A response header block: 1xx and final heads become `.response` parts; trailers are kept for the end.
    ///
    /// The final head's framing says how the body ends, in the proxy's own terms: `.none` for HEAD, 204 and 304;
    /// `.contentLength(n)` when the origin sent one (or `0`, with the field added, when the stream ends with the
    /// head); otherwise `.untilClose`, meaning "until this stream's message end", which the client's codec frames
    /// as it must (chunked for an HTTP/1.1 client). An interim head is reported alone: no message end follows it.
    private func responseHeaders(stream: Int32, kind: HTTP2HeadersKind, fields: [HTTP2Header], endsNow: Bool) {
        guard let (channel, exchange) = owner(of: stream) else { return }
        switch kind {
        case .trailers:
            exchange.responseTrailers = fields
            return
        case .request:
            abandon(channel, .protocolError)  // Not possible for a client session.
            return
        case .informational, .response:
            break
        }
        guard case .awaitingHead = exchange.response, let h2 = try? HTTP2Message.responseHead(fromH2: fields) else {
            abandon(channel, .protocolError)
            return
        }
        var headers = HTTPFields(h2.headers.map { HTTPField(name: $0.name, value: $0.value) })
        var head = HTTPResponseHead(status: h2.status, reason: "", headers: headers)
        if h2.status < 200 {
            emitPart(.response(head, body: .none), channel: channel.id)
            return
        }
        let framing: HTTPBodyFraming
        let declaredLength = headers.first("content-length").flatMap { Int($0) }
        if exchange.isHead || h2.status == 204 || h2.status == 304 {
            framing = .none
        } else if let declaredLength, declaredLength >= 0 {
            framing = .contentLength(declaredLength)
        } else if endsNow {
            headers.remove("content-length")
            headers.append(name: "content-length", value: "0")
            head.headers = headers
            framing = .contentLength(0)
        } else {
            headers.remove("content-length")
            head.headers = headers
            framing = .untilClose
        }
        exchange.response = .body(framing)
        emitPart(.response(head, body: framing), channel: channel.id)
    }

    /// A piece of response DATA: handed to the channel as a body part (dropped when the response has no body), then
    /// acknowledged unless the channel is paused.
    private func responseData(stream: Int32, bytes: [UInt8]) {
        guard let (channel, exchange) = owner(of: stream), case .body(let framing) = exchange.response else {
            session.consume(stream: stream, bytes: bytes.count)  // Orphaned or bodiless: discard.
            return
        }
        if case .none = framing {
            session.consume(stream: stream, bytes: bytes.count)
            return
        }
        if !bytes.isEmpty { emitPart(.body(bytes[...]), channel: channel.id) }
        if channel.readingPaused {
            // Only the stream's window stays spent: the connection's other channels keep flowing.
            session.consumeConnection(bytes: bytes.count)
            channel.heldBytes[stream, default: 0] += bytes.count
        } else {
            session.consume(stream: stream, bytes: bytes.count)
        }
    }

    /// END_STREAM from the origin: the trailers (when the origin sent any) and the message end.
    private func responseEnded(stream: Int32) {
        guard let (channel, exchange) = owner(of: stream) else { return }
        switch exchange.response {
        case .awaitingHead:
            abandon(channel, .protocolError)
        case .body:
            let trailers = exchange.responseTrailers.filter { !$0.isPseudo }
            if !trailers.isEmpty {
                emitPart(
                    .trailers(HTTPFields(trailers.map { HTTPField(name: $0.name, value: $0.value) })),
                    channel: channel.id)
            }
            emitPart(.messageEnd, channel: channel.id)
            exchange.response = .complete
            if exchange.requestEnded { finishExchange(on: channel) }
        case .complete:
            break
        }
    }

    /// The stream was reset (either way) or closed while its channel still owned it: an unfinished response resets
    /// the channel; a finished one only stops the request body.
    private func streamTerminated(stream: Int32, error: HTTP2ErrorCode) {
        guard let (channel, exchange) = owner(of: stream) else { return }
        switch exchange.response {
        case .awaitingHead, .body:
            reset(channel, error)
        case .complete:
            streamOwners[stream] = nil
            if exchange.requestEnded {
                finishExchange(on: channel)
            } else {
                channel.state = .draining
                if unwritable.removeValue(forKey: channel.id) != nil {
                    emit(.channelWritable(channel.id, true))
                }
            }
        }
    }

    /// The origin's GOAWAY: streams above `lastStreamID` were not processed and are refused; no new stream starts.
    private func goAwayReceived(lastStreamID: Int32) {
        switch state {
        case .active: state = .goingAway
        case .goingAway, .closed: break
        }
        let refused = streamOwners.keys.filter { $0 > lastStreamID }.sorted()
        for stream in refused {
            guard let (channel, _) = owner(of: stream) else { continue }
            reset(channel, .refusedStream)
        }
        // Channels between requests could never start another stream here: let their sessions drop them now
        // (as an idle HTTP/1.1 connection the origin closed) instead of refusing their next request.
        for channel in channels.values.sorted(by: { $0.id < $1.id }) {
            guard case .idle = channel.state else { continue }
            reset(channel, .refusedStream)
        }
    }
}
