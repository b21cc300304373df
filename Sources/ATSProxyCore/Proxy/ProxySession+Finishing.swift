import ATSPolicy
import ATSTLS
import Foundation

/// The leg's signals (the next request, a tunnel, the end) and the end of the connection: a client gone, a drain,
/// an EOF, closing.
extension ProxySession {
    // MARK: - Signals of the leg

    /// Does what the leg asked for during the last call, in order. Re-entrant: a signal's handling may call the
    /// leg again (the next pipelined request), and a nested call takes the signals that raised from the front.
    /// Taken one by one, the list keeps its storage from request to request.
    mutating func handleSignals() {
        while !leg.signals.isEmpty {
            let signal = leg.signals.removeFirst()
            if case .closed = phase {
                leg.signals.removeAll(keepingCapacity: true)
                return
            }
            switch signal {
            case .finished(let keepAlive):
                if !keepAlive || draining {
                    close()
                } else {
                    resumeParserIfIdle()
                }
            case .closeClient:
                close()
            case .upgraded:
                // 101 Switching Protocols: what the client sent after its request (held by the parser) is the new
                // protocol's.
                phase = .tunnel
                if parser.isPaused {
                    let held = parser.upgrade()
                    if !held.isEmpty { leg.relayFromClient(Array(held)) }
                }
            case .tunnelOpened:
                tunnelOpened()
            case .tunnelRefused(let code):
                refuseSOCKSTunnel(code)
            }
        }
    }

    /// Resumes the parser after an exchange or a local answer, when nothing is in flight: a request pipelined
    /// behind it starts now.
    mutating func resumeParserIfIdle() {
        guard leg.exchange == nil, parser.isPaused else { return }
        let events = parser.resume()
        process(events)
    }

    // MARK: - The end

    /// The client went away: log what was in flight (the app's request was abandoned).
    mutating func clientGone() {
        if case .h2 = phase, let h2 {
            apply(h2.clientGone(now: now))
        }
        leg.clientGone()
        leg.signals.removeAll(keepingCapacity: true)
        close()
    }

    /// Shutdown: an idle connection closes now; a busy one closes when its exchange ends.
    mutating func drain() {
        if draining {
            // A second drain: the grace period is over, whatever is in flight ends now (and is recorded).
            if case .h2 = phase, let h2 { apply(h2.clientGone(now: now)) }
            leg.abandonForShutdown()
            leg.signals.removeAll(keepingCapacity: true)
            endedByProxy = "its shutdown"
            close()
            return
        }
        draining = true
        if case .h2 = phase, let h2 {
            apply(h2.drain(now: now))
            return
        }
        if leg.exchange == nil {
            endedByProxy = "its shutdown"
            close()
        }
    }

    /// The one record of a CONNECT whose client refused the TLS handshake. A CONNECT is not counted in
    /// `requestCount` (it is no task in CFNetwork's numbering), so, like a passthrough CONNECT's exchange and a
    /// refused CONNECT, it takes the number the next task would get: never the task ID of an earlier request on
    /// the same connection, which has its own record.
    mutating func logClientHandshakeFailure(_ failure: TLSFailure) {
        guard let tunnel = role.tunnel else { return }
        let record = leg.client.record(
            task: requestCount + 1, time: now, method: "CONNECT", url: "https://\(tunnel.host):\(tunnel.port)/",
            host: tunnel.host, result: .clientUntrustedCA,
            rule:
                "the client rejected the TLS handshake with the proxy (\(failure)); install and fully trust the ats-proxy CA on the client",
            fix: "trust the proxy's CA (ats-proxy ca export) on the device or simulator",
            // What a device's task ends with when it does not trust the certificate it was shown.
            errorCode: NSURLErrorCode.serverCertificateUntrusted.rawValue, route: .tunnel(entry, .tls))
        leg.commands.append(.log(record))
    }

    /// Closes the connection: the leg shuts down (recording what was cut short, giving its upstream back), the
    /// client's TLS ends with close_notify after everything written so far, the timer stops. Once only.
    mutating func close() {
        if case .closed = phase { return }
        // A SOCKS5 CONNECT still waiting for its reply (its tunnel could not be opened) is told so before the end.
        refuseSOCKSTunnel(.generalFailure)
        challengeConnectionEnded()
        phase = .closed
        leg.shutDown()
        leg.signals.removeAll(keepingCapacity: true)
        if let tls = clientTLS {
            flushClientTLS(tls)
            TLSLayer(tls).close()
            flushClientTLS(tls)
        }
        leg.commands.append(.cancelTimer)
        leg.commands.append(.closeClient)
    }

    /// The client closed its sending side: a response still on its way is finished first.
    mutating func clientEOF() {
        switch phase {
        case .tunnel, .clientHandshake, .socks:
            close()
        case .detecting(let detection):
            tunnelDetectionEnded(detection)
        case .h2:
            clientGone()
        case .http:
            if let exchange = leg.exchange, exchange.state.requestComplete, !exchange.state.responseComplete {
                exchange.clientKeepAlive = false
                return
            }
            close()
        case .closed:
            break
        }
    }
}
