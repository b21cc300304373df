import ATSPolicy
import ATSTLS
import Foundation

/// Responses: the upstream's bytes through its TLS engine and the HTTP/1.1 parser, or an HTTP/2 channel's parts, relayed to the client (as HTTP/1.1 text) or to a lane's stream (as parts).
extension ProxySession {
    /// Decrypts the origin's `ciphertext` (with what the engine buffered) and processes the plaintext in one piece,
    /// then the origin's end: close_notify is its EOF, a bad record or a fatal alert a reset.
    mutating func drainUpstreamTLS(_ tls: TLSConnection, _ ciphertext: [UInt8]) {
        let inbound = TLSLayer(tls).decrypt(ciphertext)
        if !inbound.plaintext.isEmpty {
            upstreamPlain(inbound.plaintext)
            if case .closed = phase { return }
        }
        switch inbound.end {
        case nil: flushUpstreamTLS(tls)
        case .closed?: upstreamEOF(reset: false)
        case .failed?: upstreamEOF(reset: true)
        }
    }

    mutating func upstreamPlain(_ bytes: [UInt8]) {
        if case .relay = phase {
            sendToClient(bytes)
            return
        }
        guard let exchange else { return }
        if !exchange.responseBytesSeen { exchange.timings.firstByte = now }
        exchange.responseBytesSeen = true
        var events = takeEventList()
        exchange.responseParser.feed(bytes[...], into: &events)
        processResponse(events)
        giveBackEventList(&events)
    }

    /// Response parts from the upstream's HTTP/2 channel: the same events the HTTP/1.1 response parser reports,
    /// without text in between.
    mutating func upstreamParts(_ parts: [HTTP1Event]) {
        guard case .http = phase, let exchange, upstreamIsChannel else { return }
        if !exchange.responseBytesSeen { exchange.timings.firstByte = now }
        exchange.responseBytesSeen = true
        processResponse(parts)
    }

    /// The response of the current exchange, part by part (from the HTTP/1.1 response parser or an HTTP/2
    /// channel), to the client: as HTTP/1.1 text for an HTTP/1.1 client, or as parts for the HTTP/2 frontend when
    /// this session is a stream's lane.
    mutating func processResponse(_ events: [HTTP1Event]) {
        var pending = events[...]
        while let event = pending.popFirst() {
            guard let exchange else { return }
            if isStreamSession, relayPartToStream(event, exchange) { continue }
            switch event {
            case .response(var head, let framing):
                if upstreamIsChannel && head.reason.isEmpty {
                    // An HTTP/2 origin sends no reason phrase; an HTTP/1.1 client gets the standard one.
                    head.reason = HTTP1ReasonPhrase.standard(head.status)
                }
                if head.isInterim {
                    var bytes: [UInt8] = []
                    HTTP1Serializer.writeResponseHead(head, into: &bytes)
                    sendToClient(bytes)
                    continue
                }
                exchange.responseStarted = true
                exchange.responseStatus = head.status
                exchange.responseHeaders = head.headers
                if exchange.authenticatesConnection
                    || Self.namesConnectionAuthentication(head.headers.values("WWW-Authenticate"))
                {
                    // Connection-oriented authentication: this upstream belongs to this client from now on.
                    upstreamShareable = false
                }
                var clientHead = head
                var clientFraming = framing
                var bytes: [UInt8] = []
                if clientTLS != nil, case .contentLength(let length) = framing, length <= 16_384 {
                    // The head's buffer becomes the TLS plaintext and the body is appended to it: room for both.
                    bytes.reserveCapacity(512 + length)
                }
                if head.status == 101 {
                    clientHead.headers = HTTP1ProxyHeaders.removingHopByHop(
                        head.headers, options: HTTP1ProxyHeaders.Options(upgrading: true))
                    clientFraming = .tunnel
                    clientHead.version = .http11
                    HTTP1Serializer.writeResponseHead(clientHead, into: &bytes)
                } else {
                    if exchange.clientIsHTTP10 && (framing == .chunked || framing == .untilClose) {
                        // HTTP/1.0 knows no chunked coding: send the body raw and end it by closing.
                        exchange.clientKeepAlive = false
                    }
                    let dechunk = exchange.clientIsHTTP10 && framing == .chunked
                    let rechunk = framing == .untilClose && exchange.clientKeepAlive
                    // The hop-by-hop fields are skipped while the head is written: no copy of the field list.
                    let hopByHop = HTTP1ProxyHeaders.HopByHopFilter(
                        head.headers, options: HTTP1ProxyHeaders.Options(reframing: rechunk || dechunk))
                    var extra: [HTTP1Field] = []
                    if rechunk {
                        extra.append(HTTP1Field(name: "Transfer-Encoding", value: "chunked"))
                        clientFraming = .chunked
                    } else if dechunk {
                        clientFraming = .untilClose
                    }
                    if !upstreamIsChannel {
                        // An HTTP/2 channel's `.untilClose` ends with the stream, not the connection.
                        exchange.upstreamKeepAlive =
                            exchange.upstreamKeepAlive && framing != .untilClose
                            && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
                    }
                    if !exchange.requestDone { exchange.clientKeepAlive = false }
                    if !exchange.clientKeepAlive { extra.append(HTTP1Field(name: "Connection", value: "close")) }
                    if exchange.result == .reported {
                        extra += ATSErrorResponse.reportedFields(
                            errorCode: exchange.errorCode, streamError: exchange.streamError, rule: exchange.rule,
                            fix: exchange.fix)
                    }
                    clientHead.version = .http11
                    HTTP1Serializer.writeResponseHead(clientHead, dropping: hopByHop, appending: extra, into: &bytes)
                }
                exchange.responseWriter = HTTP1BodyWriter(framing: clientFraming)
                sendToClient(bytes)
            case .body(let slice):
                exchange.bytesToClient += slice.count
                if services.settings.captureBodyLimit > 0 {
                    exchange.bodies.response(slice, services.settings.captureBodyLimit)
                }
                writeToClient { try? exchange.responseWriter?.write(slice, into: &$0) }
            case .trailers(let trailers):
                writeToClient { try? exchange.responseWriter?.finish(trailers: trailers, into: &$0) }
                exchange.responseWriter = nil
            case .messageEnd:
                if !exchange.responseStarted {
                    // End of an interim (1xx) response: the final one follows. (A channel reports no end after
                    // an interim head.)
                    guard !upstreamIsChannel else { continue }
                    let more = exchange.responseParser.resume()
                    pending = (more + pending)[...]
                    continue
                }
                if var writer = exchange.responseWriter {
                    writeToClient { try? writer.finish(into: &$0) }
                    exchange.responseWriter = nil
                }
                exchange.responseDone = true
                finishIfComplete()
            case .upgraded(let remaining):
                // 101 Switching Protocols: relay raw bytes both ways from here on.
                exchange.responseDone = true
                exchange.requestDone = true
                logExchange()
                self.exchange = nil
                phase = .relay
                if parser.isPaused {
                    let held = parser.upgrade()
                    if !held.isEmpty { sendToUpstream(Array(held)) }
                }
                if !remaining.isEmpty { sendToClient(Array(remaining)) }
            case .request:
                closeUpstreamAndClient()
            case .failed(let error):
                if exchange.responseStarted {
                    closeUpstreamAndClient()
                } else {
                    upstream = .none
                    commands.append(.closeUpstream)
                    failWithBadResponse("the origin's response is not valid HTTP/1.1 (\(error.reason))")
                }
            }
        }
    }

    /// A lane's response goes to its HTTP/2 stream as parts (`ProxyCommand.respond`), never as HTTP/1.1 text:
    /// returns whether `event` was handled that way (everything but an upgrade, which no stream carries, and the
    /// parser's own failures). The bookkeeping is `processResponse`'s.
    mutating func relayPartToStream(_ event: HTTP1Event, _ exchange: Exchange) -> Bool {
        switch event {
        case .response(var head, let framing):
            guard head.status != 101 else { return false }
            if !head.isInterim {
                exchange.responseStarted = true
                exchange.responseStatus = head.status
                exchange.responseHeaders = head.headers
            }
            // The stream's HEADERS carry no hop-by-hop field (RFC 9113 §8.2.2); most heads have none to drop.
            head.headers = HTTP1ProxyHeaders.removingHopByHop(head.headers)
            if head.isInterim {
                respondToStream(.response(head, body: framing))
                return true
            }
            if exchange.authenticatesConnection
                || Self.namesConnectionAuthentication(head.headers.values("WWW-Authenticate"))
            {
                upstreamShareable = false
            }
            if !upstreamIsChannel {
                exchange.upstreamKeepAlive =
                    exchange.upstreamKeepAlive && framing != .untilClose
                    && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
            }
            if !exchange.requestDone { exchange.clientKeepAlive = false }
            if exchange.result == .reported {
                // `--mode report`: the stream's answer says what would have failed, as an HTTP/1.1 client's does.
                head.headers.fields += ATSErrorResponse.reportedFields(
                    errorCode: exchange.errorCode, streamError: exchange.streamError, rule: exchange.rule,
                    fix: exchange.fix)
            }
            respondToStream(.response(head, body: framing))
            return true
        case .body(let slice):
            guard exchange.responseStarted else { return true }
            exchange.bytesToClient += slice.count
            if services.settings.captureBodyLimit > 0 {
                exchange.bodies.response(slice, services.settings.captureBodyLimit)
            }
            respondToStream(event)
            return true
        case .trailers:
            guard exchange.responseStarted else { return true }
            respondToStream(event)
            return true
        case .messageEnd:
            guard exchange.responseStarted else { return false }  // An interim response's end: the parser resumes.
            respondToStream(event)
            exchange.responseDone = true
            finishIfComplete()
            return true
        case .upgraded, .request, .failed:
            return false
        }
    }

    /// Appends a response part for the lane's stream, joining consecutive parts into one command.
    mutating func respondToStream(_ part: HTTP1Event) {
        if case .respond(var parts)? = commands.last {
            commands.removeLast()
            parts.append(part)
            commands.append(.respond(parts))
        } else {
            commands.append(.respond([part]))
        }
    }
}
