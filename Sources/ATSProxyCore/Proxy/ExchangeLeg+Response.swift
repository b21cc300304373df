import ATSPolicy
import ATSTLS
import Foundation

/// Responses: the upstream's bytes through its TLS engine and the HTTP/1.1 parser, or an HTTP/2 channel's parts,
/// delivered to the owner's client: HTTP/1.1 text (`HTTP1ResponseEncoder`) or a stream's parts.
extension ExchangeLeg {
    /// Decrypts the origin's `ciphertext` (with what the engine buffered) and processes the plaintext in one piece,
    /// then the origin's end: close_notify is its EOF, a bad record or a fatal alert a reset.
    mutating func drainUpstreamTLS(_ tls: TLSConnection, _ ciphertext: [UInt8]) {
        let inbound = TLSLayer(tls).decrypt(ciphertext)
        if !inbound.plaintext.isEmpty {
            upstreamPlain(inbound.plaintext)
            if case .closed = mode { return }
            // The exchange may have ended and the leg moved on to another upstream: this engine's end (and
            // records) are not the new upstream's.
            guard case .ready(_, let current?) = upstream.state, current === tls else { return }
        }
        switch inbound.end {
        case nil: flushUpstreamTLS(tls)
        case .closed?: upstreamEOF(reset: false)
        case .failed?: upstreamEOF(reset: true)
        }
    }

    mutating func upstreamPlain(_ bytes: [UInt8]) {
        if case .relay = mode {
            sendToClient(bytes)
            return
        }
        // Bytes for an exchange the proxy answered itself, or none, have no reader: the upstream is on its way out.
        guard let exchange, exchange.state.isForwarding else { return }
        exchange.responseBytesArrived(at: now)
        var events = eventList.take()
        exchange.response.parser.feed(bytes[...], into: &events)
        processResponse(events)
        eventList.giveBack(&events)
    }

    /// Response parts from the upstream's HTTP/2 channel: the same events the HTTP/1.1 response parser reports,
    /// without text in between.
    mutating func upstreamParts(_ parts: [HTTPPart]) {
        guard carriesExchanges, let exchange, upstreamIsChannel, exchange.state.isForwarding else { return }
        exchange.responseBytesArrived(at: now)
        processResponse(parts)
    }

    /// The response of the current exchange, part by part (from the HTTP/1.1 response parser or an HTTP/2
    /// channel), to the client: the bookkeeping is the same for every client (the exchange's state, status,
    /// sizes, whether the upstream may be kept or shared); delivery is `HTTP1ResponseEncoder`'s text for an
    /// HTTP/1.1 client, or the parts themselves for an HTTP/2 stream.
    mutating func processResponse(_ events: [HTTPPart]) {
        var pending = events[...]
        while let event = pending.popFirst() {
            // Parts for an exchange that has its whole response (or that the proxy answered) are never relayed.
            guard let exchange, exchange.state.isForwarding, !exchange.state.responseComplete else { return }
            switch event {
            case .response(let head, let framing):
                if head.isInterim {
                    relayInterim(head, framing: framing)
                    continue
                }
                guard !exchange.state.responseStarted else {
                    // A second final head for one request: the origin broke HTTP; nothing more of it reaches the client.
                    return closeUpstreamAndClient()
                }
                if head.status == 101 && deliversToStream {
                    // An HTTP/2 stream cannot switch protocols (RFC 9113 §8.6), and its request asked for no upgrade.
                    commands.append(.closeUpstream)
                    upstream.release()
                    return failWithBadResponse("the origin answered 101 Switching Protocols to an HTTP/2 stream")
                }
                responseHead(head, framing: framing, exchange)
            case .body(let slice):
                guard exchange.state.responseStarted else { continue }
                exchange.bytesToClient += slice.count
                if services.settings.captureBodyLimit > 0 {
                    exchange.bodies.response(slice, services.settings.captureBodyLimit)
                }
                if deliversToStream {
                    respondToStream(event)
                } else {
                    writeToClient { exchange.response.encoder.writeBody(slice, into: &$0) }
                }
            case .trailers(let trailers):
                guard exchange.state.responseStarted else { continue }
                if deliversToStream {
                    respondToStream(event)
                } else {
                    writeToClient { exchange.response.encoder.finish(trailers: trailers, into: &$0) }
                }
            case .messageEnd:
                if !exchange.state.responseStarted {
                    // End of an interim (1xx) response: the final one follows. (A channel reports no end after
                    // an interim head.)
                    guard !upstreamIsChannel else { continue }
                    let more = exchange.response.parser.resume()
                    pending = (more + pending)[...]
                    continue
                }
                if deliversToStream {
                    respondToStream(event)
                } else {
                    writeToClient { exchange.response.encoder.finish(into: &$0) }
                }
                exchange.state.responseEnded()
                finishIfComplete()
            case .upgraded(let remaining):
                // 101 Switching Protocols: relay raw bytes both ways from here on.
                exchange.state.upgraded()
                logExchange()
                self.exchange = nil
                mode = .relay
                if !remaining.isEmpty { sendToClient(Array(remaining)) }
                signals.append(.upgraded)
                return
            case .request:
                closeUpstreamAndClient()
            case .failed(let error):
                if exchange.state.responseStarted {
                    closeUpstreamAndClient()
                } else {
                    upstream.release()
                    commands.append(.closeUpstream)
                    failWithBadResponse("the origin's response is not valid HTTP/1.1 (\(error.reason))")
                }
            }
        }
    }

    /// An interim (1xx) head, relayed as it is: as text to an HTTP/1.1 client, without hop-by-hop fields to a
    /// stream (RFC 9113 §8.2.2). An HTTP/2 origin sends no reason phrase; an HTTP/1.1 client gets the standard one.
    mutating func relayInterim(_ head: HTTPResponseHead, framing: HTTPBodyFraming) {
        var head = head
        if deliversToStream {
            head.headers = HTTP1ProxyHeaders.removingHopByHop(head.headers)
            respondToStream(.response(head, body: framing))
            return
        }
        if upstreamIsChannel && head.reason.isEmpty { head.reason = HTTP1ReasonPhrase.standard(head.status) }
        var bytes: [UInt8] = []
        HTTP1ResponseEncoder.writeInterim(head, into: &bytes)
        sendToClient(bytes)
    }

    /// The origin's final head: the exchange's bookkeeping, then the head to the client (`--mode report` adds its
    /// X-ATS-* fields).
    mutating func responseHead(_ head: HTTPResponseHead, framing: HTTPBodyFraming, _ exchange: Exchange) {
        exchange.state.responseHeadSent()
        exchange.response.status = head.status
        exchange.response.headers = head.headers
        if exchange.authenticatesConnection
            || Self.namesConnectionAuthentication(head.headers.values("WWW-Authenticate"))
        {
            // Connection-oriented authentication: this upstream belongs to this client from now on.
            upstream.shareable = false
        }
        let upgrading = head.status == 101
        if !upstreamIsChannel && !upgrading {
            // An HTTP/2 channel's `.untilClose` ends with the stream, not the connection.
            exchange.response.upstreamKeepAlive =
                exchange.response.upstreamKeepAlive && framing != .untilClose
                && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        }
        var reported: [HTTPField] = []
        if exchange.outcome.result == .reported && !upgrading {
            reported = ATSErrorResponse.reportedFields(
                errorCode: exchange.outcome.errorCode, streamError: exchange.outcome.streamError,
                rule: exchange.outcome.rule, fix: exchange.outcome.fix
            )
        }
        if deliversToStream {
            // The stream's HEADERS carry no hop-by-hop field (RFC 9113 §8.2.2); most heads have none to drop.
            var streamHead = head
            streamHead.headers = HTTP1ProxyHeaders.removingHopByHop(head.headers)
            streamHead.headers.fields += reported
            if !exchange.state.requestComplete { exchange.clientKeepAlive = false }
            respondToStream(.response(streamHead, body: framing))
            return
        }
        var clientHead = head
        if upstreamIsChannel && head.reason.isEmpty { clientHead.reason = HTTP1ReasonPhrase.standard(head.status) }
        var reserve: Int?
        if case .http1(encrypted: true) = delivery, case .contentLength(let length) = framing, length <= 16_384 {
            // The head's buffer becomes the TLS plaintext and the body is appended to it: room for both.
            reserve = length
        }
        var bytes: [UInt8] = []
        exchange.response.encoder.writeHead(
            clientHead, framing: framing, clientIsHTTP10: exchange.clientIsHTTP10, keepAlive: &exchange.clientKeepAlive,
            closeAfter: !upgrading && !exchange.state.requestComplete, extra: reported, reserving: reserve,
            into: &bytes)
        sendToClient(bytes)
    }

    /// Appends a response part for the stream, joining consecutive parts into one command.
    mutating func respondToStream(_ part: HTTPPart) {
        if case .respond(var parts)? = commands.last {
            commands.removeLast()
            parts.append(part)
            commands.append(.respond(parts))
        } else {
            commands.append(.respond([part]))
        }
    }
}
