import ATSPolicy
import ATSTLS
import Foundation

/// Client bytes in: the HTTP/1.1 parser, the client-side TLS handshake and its plaintext, and what the parser reports.
extension ProxySession {
    // MARK: - Client input

    mutating func clientBytes(_ bytes: [UInt8]) {
        if !sawFirstBytes {
            sawFirstBytes = true
            if let first = bytes.first, case .http = phase, clientTLS == nil {
                switch first {
                case SOCKS5Negotiation.version: return startSOCKS5(bytes)
                case 0x04: return refuseSOCKS4(bytes)
                default: break
                }
            }
        }
        switch phase {
        case .socks:
            socksBytes(bytes)
        case .http:
            if let tls = clientTLS {
                drainClientTLS(tls, bytes)
            } else {
                feedParser(bytes)
            }
        case .detecting:
            detectTunnelProtocol(bytes)
        case .clientHandshake:
            guard let tls = clientTLS else { return close() }
            continueClientHandshake(tls, bytes)
        case .tunnel:
            if let tls = clientTLS {
                drainClientTLS(tls, bytes)
            } else {
                leg.relayFromClient(bytes)
                handleSignals()
            }
        case .h2:
            if let tls = clientTLS {
                drainClientTLS(tls, bytes)
            } else {
                // Cleartext h2 (prior knowledge inside a CONNECT tunnel).
                http2Bytes(bytes)
            }
        case .closed:
            break
        }
    }

    /// Feeds the client's `ciphertext` to the handshake and sends what the engine answers; once complete, picks
    /// HTTP/2 or HTTP/1.1 from ALPN and processes the application data that came with the last flight.
    mutating func continueClientHandshake(_ tls: TLSConnection, _ ciphertext: [UInt8]) {
        let progress = TLSLayer(tls).handshake(ciphertext)
        flushClientTLS(tls)
        switch progress {
        case .needsInput:
            break
        case .complete:
            challenge?.handshakeCompleted()
            // A challenged connection is never handed to HTTP/2 (its contexts offer http/1.1 only): its finding is a
            // request the session reads itself.
            if tls.negotiatedALPN == "h2" && challenge == nil {
                startHTTP2()
            } else {
                phase = .http
            }
            drainClientTLS(tls, [])
        case .failed(let failure):
            if challenge != nil {
                challengeHandshakeFailed(failure)
            } else {
                logClientHandshakeFailure(failure)
            }
            close()
        }
    }

    /// Decrypts the client's `ciphertext` (with what the engine buffered) and processes the plaintext in one piece,
    /// then the client's end: close_notify is the client's EOF, a bad record closes the connection.
    mutating func drainClientTLS(_ tls: TLSConnection, _ ciphertext: [UInt8]) {
        let inbound = TLSLayer(tls).decrypt(ciphertext)
        if !inbound.plaintext.isEmpty {
            switch phase {
            case .tunnel:
                leg.relayFromClient(inbound.plaintext)
                handleSignals()
            case .h2: http2Bytes(inbound.plaintext)
            case .http, .clientHandshake, .detecting, .socks, .closed:
                feedParser(inbound.plaintext)
            }
            if case .closed = phase { return }
        }
        switch inbound.end {
        case nil: flushClientTLS(tls)
        case .closed?: clientEOF()
        case .failed?: close()
        }
    }

    mutating func feedParser(_ bytes: [UInt8]) {
        var events = eventList.take()
        parser.feed(bytes[...], into: &events)
        process(events)
        eventList.giveBack(&events)
    }

    mutating func process(_ events: [HTTPPart]) {
        for event in events {
            if case .closed = phase { return }
            switch event {
            case .request(let head, let framing):
                requestHead(head, framing: framing)
            case .response:
                close()
            case .body(let slice):
                requestBody(slice)
            case .trailers(let trailers):
                requestEnd(trailers: trailers)
            case .messageEnd:
                requestEnd(trailers: nil)
            case .upgraded(let remaining):
                // After a CONNECT head: the rest is the tunnel's (its first bytes for detection, raw bytes for
                // passthrough).
                if case .clientHandshake = phase, let tls = clientTLS {
                    continueClientHandshake(tls, Array(remaining))
                } else if case .detecting = phase, !remaining.isEmpty {
                    detectTunnelProtocol(Array(remaining))
                } else if case .tunnel = phase, !remaining.isEmpty {
                    leg.relayFromClient(Array(remaining))
                    handleSignals()
                }
            case .failed(let error):
                // The status line carries the standard phrase; the body says what exactly was wrong.
                answerLocally(
                    status: error.status, reason: error.statusReasonPhrase, body: "ats-proxy: \(error.reason)\n",
                    keepAlive: false)
            }
        }
    }
}
