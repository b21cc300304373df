import ATSHTTP2

/// Request side of `UpstreamH2Link`: request parts sent on a channel become HTTP/2 streams (head → HEADERS,
/// body → DATA, trailers → trailing HEADERS, message end → END_STREAM). Runs on the link owner's thread.
extension UpstreamH2Link {
    /// The body of the 502 answered to requests HTTP/2 cannot carry (Upgrade, CONNECT).
    static let upgradeRefusalBody = Array(
        "ats-proxy: the origin speaks HTTP/2, which cannot carry this HTTP/1.1 Upgrade or CONNECT request\n".utf8)

    /// Handles request parts, in order. Stops early if the channel is forgotten.
    func handleRequestEvents(_ events: [HTTPPart], on channel: Channel) {
        var index = 0
        while index < events.count {
            guard channels[channel.id] === channel else { return }
            let event = events[index]
            index += 1
            switch event {
            case .request(let head, let framing):
                openStream(head, framing: framing, on: channel)
            case .body(let slice):
                var endsMessage = false
                if index < events.count, case .messageEnd = events[index] {
                    endsMessage = true
                    index += 1
                }
                sendBody(Array(slice), endStream: endsMessage, on: channel)
                if endsMessage { requestEnded(on: channel) }
            case .trailers(let trailers):
                sendTrailers(trailers, on: channel)
            case .messageEnd:
                sendBody([], endStream: true, on: channel)
                requestEnded(on: channel)
            case .upgraded:
                break  // CONNECT: already answered with a 502 at its head.
            case .response, .failed:
                // The session sent something that is not a request part: drop the exchange.
                abandon(channel, .internalError)
            }
        }
    }

    /// A request head: opens its stream, or answers/refuses it on the channel.
    private func openStream(_ head: HTTPRequestHead, framing: HTTPBodyFraming, on channel: Channel) {
        switch channel.state {
        case .idle:
            break
        case .streaming, .draining, .answeredLocally:
            // The session broke the contract (a head before its channel's exchange was over): the exchange is lost.
            abandon(channel, .internalError)
            return
        }
        let isUpgrade = head.headers.contains("Upgrade") && head.headers.hasListElement("Connection", "upgrade")
        if isUpgrade || framing == .tunnel {
            answerUpgrade(on: channel)
            return
        }
        switch state {
        case .active where openStreams.count < peerStreamLimit:
            break
        case .active, .goingAway, .closed:
            reset(channel, .refusedStream)
            return
        }
        let origin = head.forOrigin()
        let fields = origin.headers.fields.map { HTTP2Header($0.name, $0.value) }
        let h2 = HTTP2Message.h2RequestHeaders(
            HTTP2RequestHead(
                method: origin.method, scheme: scheme, authority: "", path: origin.target.description,
                headers: fields))
        let endStream: Bool
        switch framing {
        case .none, .contentLength(0): endStream = true
        case .contentLength, .chunked, .untilClose, .tunnel: endStream = false
        }
        let stream: Int32
        do {
            stream = try session.submitRequest(h2, endStream: endStream)
        } catch {
            reset(channel, .refusedStream)
            return
        }
        let exchange = Exchange(stream: stream, isHead: origin.method == "HEAD", requestEnded: endStream)
        channel.state = .streaming(exchange)
        streamOwners[stream] = channel
        openStreams.insert(stream)
    }

    /// Request body bytes (and/or its end) for the channel's stream; discarded when there is no stream to carry
    /// them any more.
    private func sendBody(_ bytes: [UInt8], endStream: Bool, on channel: Channel) {
        guard case .streaming(let exchange) = channel.state, !exchange.requestEnded else { return }
        guard !bytes.isEmpty || endStream else { return }
        do {
            try session.submitData(stream: exchange.stream, bytes: bytes, endStream: endStream)
            bodyWriters.append(channel)
        } catch {
            streamGone(exchange, on: channel)
        }
        if endStream { exchange.requestEnded = true }
    }

    /// Chunked request trailers: trailing HEADERS with END_STREAM.
    private func sendTrailers(_ trailers: HTTPFields, on channel: Channel) {
        guard case .streaming(let exchange) = channel.state, !exchange.requestEnded else { return }
        let fields = HTTP2Message.h2Fields(fromHTTP1: trailers.fields.map { HTTP2Header($0.name, $0.value) })
        do {
            if fields.isEmpty {
                try session.submitData(stream: exchange.stream, bytes: [], endStream: true)
            } else {
                try session.submitTrailers(stream: exchange.stream, headers: fields)
            }
        } catch {
            streamGone(exchange, on: channel)
        }
        exchange.requestEnded = true
    }

    /// The request message ended on the channel: if its response is complete too, the channel is free again.
    private func requestEnded(on channel: Channel) {
        switch channel.state {
        case .streaming(let exchange):
            if case .complete = exchange.response { finishExchange(on: channel) }
        case .draining:
            channel.state = .idle
        case .idle, .answeredLocally:
            break
        }
    }

    /// The stream cannot take more request bytes. With a complete response the rest of the request is drained;
    /// otherwise the exchange is lost.
    private func streamGone(_ exchange: Exchange, on channel: Channel) {
        switch exchange.response {
        case .complete:
            streamOwners[exchange.stream] = nil
            channel.state = .draining
        case .awaitingHead, .body:
            abandon(channel, .internalError)
        }
    }

    /// The exchange is over on both sides: the channel becomes idle, ready for the session's next request head.
    func finishExchange(on channel: Channel) {
        if case .streaming(let exchange) = channel.state, streamOwners[exchange.stream] === channel {
            streamOwners[exchange.stream] = nil
        }
        channel.state = .idle
        if unwritable.removeValue(forKey: channel.id) != nil {
            emit(.channelWritable(channel.id, true))
        }
    }

    /// Resets the channel's stream (if still open) with `code`, then resets and forgets the channel.
    func abandon(_ channel: Channel, _ code: HTTP2ErrorCode) {
        if case .streaming(let exchange) = channel.state, openStreams.contains(exchange.stream) {
            switch state {
            case .active, .goingAway:
                try? session.resetStream(stream: exchange.stream, error: code)
            case .closed:
                break
            }
        }
        reset(channel, code)
    }

    /// Answers an Upgrade (or CONNECT) request with a synthesized `502 Bad Gateway`, `Connection: close`.
    private func answerUpgrade(on channel: Channel) {
        let head = HTTPResponseHead(
            status: 502, reason: "",
            headers: [
                "Content-Type": "text/plain; charset=utf-8", "Content-Length": String(Self.upgradeRefusalBody.count),
                "Connection": "close",
            ])
        channel.state = .answeredLocally
        emitPart(.response(head, body: .contentLength(Self.upgradeRefusalBody.count)), channel: channel.id)
        emitPart(.body(Self.upgradeRefusalBody[...]), channel: channel.id)
        emitPart(.messageEnd, channel: channel.id)
    }
}
