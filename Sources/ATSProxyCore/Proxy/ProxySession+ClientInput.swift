import ATSPolicy
import ATSTLS
import Foundation

/// Client bytes in: the HTTP/1.1 parser, the client-side TLS handshake and its plaintext, and what the parser reports.
extension ProxySession {
    // MARK: - Client input

    mutating func clientBytes(_ bytes: [UInt8]) {
        switch phase {
        case .http:
            if let tls = clientTLS {
                tls.receive(bytes)
                drainClientTLS(tls)
            } else {
                feedParser(bytes)
            }
        case .clientHandshake:
            guard let tls = clientTLS else { return close() }
            tls.receive(bytes)
            continueClientHandshake(tls)
        case .relay:
            if let tls = clientTLS {
                tls.receive(bytes)
                drainClientTLS(tls)
            } else {
                sendToUpstream(bytes)
            }
        case .passthroughProbe, .passthroughConnecting:
            pendingUpstream.append(contentsOf: bytes)
        case .h2:
            guard let tls = clientTLS else { return close() }
            tls.receive(bytes)
            drainClientTLS(tls)
        case .closed:
            break
        }
    }

    mutating func continueClientHandshake(_ tls: TLSConnection) {
        let progress = tls.handshake()
        flushClientTLS(tls)
        switch progress {
        case .needsInput:
            break
        case .complete:
            if tls.negotiatedALPN == "h2" {
                startHTTP2()
            } else {
                phase = .http
            }
            drainClientTLS(tls)
        case .failed(let failure):
            logClientHandshakeFailure(failure)
            close()
        }
    }

    /// Reads every decrypted byte the client TLS engine holds and processes it.
    mutating func drainClientTLS(_ tls: TLSConnection) {
        while true {
            switch tls.read() {
            case .data(let plain):
                switch phase {
                case .relay: sendToUpstream(plain)
                case .h2: http2Bytes(plain)
                case .http, .clientHandshake, .passthroughProbe, .passthroughConnecting, .closed: feedParser(plain)
                }
                if case .closed = phase { return }
            case .needsInput:
                flushClientTLS(tls)
                return
            case .closed:
                clientEOF()
                return
            case .failed:
                close()
                return
            }
        }
    }

    mutating func feedParser(_ bytes: [UInt8]) {
        var events = takeEventList()
        parser.feed(bytes[...], into: &events)
        process(events)
        giveBackEventList(&events)
    }

    /// The parser event list kept between feeds (taken while in use: a feed nested inside `process`
    /// finds it gone and makes a list of its own).
    mutating func takeEventList() -> [HTTP1Event] {
        var events: [HTTP1Event] = []
        swap(&events, &eventList)
        return events
    }

    mutating func giveBackEventList(_ events: inout [HTTP1Event]) {
        events.removeAll(keepingCapacity: true)
        swap(&events, &eventList)
    }

    mutating func process(_ events: [HTTP1Event]) {
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
                if case .clientHandshake = phase, let tls = clientTLS {
                    tls.receive(Array(remaining))
                    continueClientHandshake(tls)
                } else if !remaining.isEmpty {
                    pendingUpstream.append(contentsOf: remaining)
                }
            case .failed(let error):
                answerLocally(
                    status: error.status, reason: error.reason, body: "ats-proxy: \(error.reason)\n", keepAlive: false)
                close()
            }
        }
    }
}
