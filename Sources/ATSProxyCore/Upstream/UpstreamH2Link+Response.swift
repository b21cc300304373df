import ATSHTTP2

/// Response side of `UpstreamH2Link`: `HTTP2Session` events become HTTP/1.1 response bytes, resets and link state
/// changes. Runs on the link owner's thread.
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

    /// A response header block: 1xx and final heads become HTTP/1.1 heads; trailers are kept for the last chunk.
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
        guard case .awaitingHead = exchange.response, let head = try? HTTP2Message.responseHead(fromH2: fields) else {
            abandon(channel, .protocolError)
            return
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64 + head.headers.count * 48)
        bytes += Array("HTTP/1.1 \(head.status) \(Self.reasonPhrase(head.status))\r\n".utf8)
        var hasContentLength = false
        for field in head.headers {
            if field.name == "content-length" { hasContentLength = true }
            bytes.append(contentsOf: field.name.utf8)
            bytes.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
            bytes.append(contentsOf: field.value.utf8)
            bytes.append(contentsOf: Self.crlf)
        }
        if head.status < 200 {
            bytes.append(contentsOf: Self.crlf)
            emitBytes(bytes, channel: channel.id)
            return
        }
        let framing: ResponseFraming
        if exchange.isHead || head.status == 204 || head.status == 304 {
            framing = .none
        } else if hasContentLength {
            framing = .contentLength
        } else if endsNow {
            bytes += Array("content-length: 0\r\n".utf8)
            framing = .contentLength
        } else {
            bytes += Array("transfer-encoding: chunked\r\n".utf8)
            framing = .chunked
        }
        bytes.append(contentsOf: Self.crlf)
        exchange.response = .body(framing)
        emitBytes(bytes, channel: channel.id)
    }

    /// A piece of response DATA: relayed in the response's framing, then acknowledged unless the channel is paused.
    private func responseData(stream: Int32, bytes: [UInt8]) {
        guard let (channel, exchange) = owner(of: stream), case .body(let framing) = exchange.response else {
            session.consume(stream: stream, bytes: bytes.count)  // Orphaned or bodiless: discard.
            return
        }
        switch framing {
        case .none:
            session.consume(stream: stream, bytes: bytes.count)
            return
        case .contentLength:
            emitBytes(bytes, channel: channel.id)
        case .chunked:
            guard !bytes.isEmpty else { return }
            var chunk: [UInt8] = []
            chunk.reserveCapacity(bytes.count + 12)
            chunk += Array(String(bytes.count, radix: 16).utf8)
            chunk += Self.crlf
            chunk += bytes
            chunk += Self.crlf
            emitBytes(chunk, channel: channel.id)
        }
        if channel.readingPaused {
            // Only the stream's window stays spent: the connection's other channels keep flowing.
            session.consumeConnection(bytes: bytes.count)
            channel.heldBytes[stream, default: 0] += bytes.count
        } else {
            session.consume(stream: stream, bytes: bytes.count)
        }
    }

    /// END_STREAM from the origin: the HTTP/1.1 message is terminated (last chunk with trailers when chunked).
    private func responseEnded(stream: Int32) {
        guard let (channel, exchange) = owner(of: stream) else { return }
        switch exchange.response {
        case .awaitingHead:
            abandon(channel, .protocolError)
        case .body(let framing):
            switch framing {
            case .chunked:
                var bytes: [UInt8] = [UInt8(ascii: "0")] + Self.crlf
                for field in exchange.responseTrailers {
                    bytes.append(contentsOf: field.name.utf8)
                    bytes.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
                    bytes.append(contentsOf: field.value.utf8)
                    bytes.append(contentsOf: Self.crlf)
                }
                bytes += Self.crlf
                emitBytes(bytes, channel: channel.id)
            case .none, .contentLength:
                break
            }
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

    /// CR LF.
    static let crlf: [UInt8] = [0x0D, 0x0A]

    /// The standard reason phrase of `status` (RFC 9110 §15 and the registered extensions), or a generic one by
    /// class.
    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 102: "Processing"
        case 103: "Early Hints"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 205: "Reset Content"
        case 206: "Partial Content"
        case 207: "Multi-Status"
        case 208: "Already Reported"
        case 226: "IM Used"
        case 300: "Multiple Choices"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 305: "Use Proxy"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 402: "Payment Required"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 407: "Proxy Authentication Required"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 417: "Expectation Failed"
        case 421: "Misdirected Request"
        case 422: "Unprocessable Content"
        case 423: "Locked"
        case 424: "Failed Dependency"
        case 425: "Too Early"
        case 426: "Upgrade Required"
        case 428: "Precondition Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 451: "Unavailable For Legal Reasons"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        case 506: "Variant Also Negotiates"
        case 507: "Insufficient Storage"
        case 508: "Loop Detected"
        case 510: "Not Extended"
        case 511: "Network Authentication Required"
        case 100..<200: "Informational"
        case 200..<300: "Success"
        case 300..<400: "Redirection"
        case 400..<500: "Client Error"
        default: "Server Error"
        }
    }
}
