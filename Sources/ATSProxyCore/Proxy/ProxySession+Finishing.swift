import ATSPolicy
import ATSTLS
import Foundation

/// The end of an exchange and of the connection: one record per exchange, the upstream parked or closed, the client closed or kept alive.
extension ProxySession {
    // MARK: - Finishing

    mutating func finishIfComplete() {
        guard let exchange, exchange.state.isComplete else { return }
        logExchange()
        self.exchange = nil
        if !exchange.upstreamKeepAlive {
            if case .none = upstream {
            } else {
                commands.append(.closeUpstream)
            }
            upstream = .none
        } else if case .ready = upstream {
            upstreamIdle = true
        }
        if !exchange.clientKeepAlive || draining {
            close()
            return
        }
        resumeParserIfIdle()
    }

    /// The client went away: log what was in flight (the app's request was abandoned).
    mutating func clientGone() {
        if case .h2 = phase, let h2 {
            apply(h2.clientGone(now: now))
        }
        if let exchange, !exchange.state.responseComplete {
            exchange.result = .failed
            exchange.rule = "the client closed the connection before the response was complete"
            logExchange()
            self.exchange = nil
        }
        close()
    }

    /// Shutdown: an idle connection closes now; a busy one closes when its exchange ends.
    mutating func drain() {
        if draining {
            // A second drain: the grace period is over, whatever is in flight ends now (and is recorded).
            if case .h2 = phase, let h2 { apply(h2.clientGone(now: now)) }
            if let exchange, !exchange.state.isRecorded {
                exchange.result = .failed
                exchange.rule = "the proxy stopped (grace period over) before the exchange was complete"
            }
            close()
            return
        }
        draining = true
        if case .h2 = phase, let h2 {
            apply(h2.drain(now: now))
            return
        }
        if exchange == nil { close() }
    }

    mutating func resumeParserIfIdle() {
        guard exchange == nil, parser.isPaused else { return }
        let events = parser.resume()
        process(events)
    }

    mutating func logExchange() {
        guard let exchange, !exchange.unrecorded, !exchange.state.isRecorded else { return }
        exchange.state.record()
        let redirectNote = ""
        let record = RequestRecord(
            time: exchange.start, clientAddress: clientAddress, taskID: taskIDPrefix + String(exchange.number),
            method: exchange.method, url: exchange.url, host: exchange.target.host, httpProtocol: clientProtocol,
            source: exchange.source,
            result: exchange.result, atsRequired: exchange.decision.atsRequired,
            ruleChain: exchange.decision.ruleTexts, rule: exchange.rule + redirectNote, fix: exchange.fix,
            errorCode: exchange.errorCode, streamError: exchange.streamError, status: exchange.responseStatus,
            tls: exchange.tls,
            requestHeaders: exchange.requestHeaders.fields, responseHeaders: exchange.responseHeaders.fields,
            bytesFromClient: exchange.bytesFromClient, bytesToClient: exchange.bytesToClient,
            durationMilliseconds: now.timeIntervalSince(exchange.start) * 1000, consoleLines: exchange.consoleLines,
            retriedOnNewConnection: exchange.retried ? true : nil,
            timings: services.settings.detailedRecords ? exchange.timings.record(since: exchange.start) : nil,
            bodies: exchange.bodies.record,
            // Only a request that went upstream has a server (a blocked or local one may follow one that did).
            serverAddress: exchange.upstreamKey == nil ? nil : upstreamAddress)
        commands.append(.log(record))
    }

    /// The one record of a CONNECT whose client refused the TLS handshake. A CONNECT is not counted in
    /// `requestCount` (it is no task in CFNetwork's numbering), so, like a passthrough CONNECT's exchange and a
    /// refused CONNECT, it takes the number the next task would get: never the task ID of an earlier request on
    /// the same connection, which has its own record.
    mutating func logClientHandshakeFailure(_ failure: TLSFailure) {
        guard let tunnel = role.tunnel else { return }
        let record = RequestRecord(
            time: now, clientAddress: clientAddress, taskID: taskIDPrefix + String(requestCount + 1),
            method: "CONNECT",
            url: "https://\(tunnel.host):\(tunnel.port)/", host: tunnel.host, httpProtocol: "http/1.1",
            source: .urlsession,
            result: .clientUntrustedCA,
            atsRequired: false, ruleChain: [],
            rule:
                "the client rejected the TLS handshake with the proxy (\(failure)); install and fully trust the ats-proxy CA on the client",
            fix: "trust the proxy's CA (ats-proxy ca export) on the device or simulator")
        commands.append(.log(record))
    }

    mutating func close() {
        if case .closed = phase { return }
        if let exchange, !exchange.state.isRecorded {
            // Cut before it ended on its own (timeout, shutdown, a client gone mid-request): still one record.
            switch exchange.result {
            case .completed, .reported:
                exchange.result = .failed
                exchange.rule = "the connection was closed before the exchange was complete"
            case .blockedCleartext, .failed, .clientUntrustedCA:
                break
            }
            logExchange()
        }
        releaseOrCloseUpstream()
        if let tls = clientTLS {
            flushClientTLS(tls)
            TLSLayer(tls).close()
            flushClientTLS(tls)
        }
        commands.append(.cancelTimer)
        commands.append(.closeClient)
        phase = .closed
    }

    /// Whether any of `values` (of Authorization or WWW-Authenticate) names a scheme that authenticates the
    /// connection rather than the request (NTLM, Negotiate/Kerberos: RFC 4559): the origin then treats later
    /// requests on it as that user's, so the connection must never be handed to another client.
    static func namesConnectionAuthentication(_ values: [String]) -> Bool {
        // The first token of each comma-separated element (a parameter that looks like one only errs on the
        // safe side: the connection is not shared).
        values.contains { value in
            HTTP1ASCII.forEachListElement(of: value) { element in
                let scheme = element.prefix { $0 != HTTP1ASCII.space && $0 != HTTP1ASCII.htab }
                return HTTP1ASCII.equalsIgnoringCase(scheme, "NTLM".utf8)
                    || HTTP1ASCII.equalsIgnoringCase(scheme, "Negotiate".utf8)
            }
        }
    }

    /// An idle, judged, shareable upstream goes back to the loop's pool; anything else is closed.
    mutating func releaseOrCloseUpstream() {
        switch upstream {
        case .none:
            return
        case .ready(let key, let tls):
            // Whoever gets the engine next (the pool, or nobody) expects it to free its buffers when idle.
            tls?.holdsRecordBuffers = false
            var plainHTTP = false
            if case .http = phase { plainHTTP = true }
            if upstreamIdle && upstreamShareable && plainHTTP && pendingUpstream.isEmpty {
                commands.append(
                    .releaseUpstream(
                        UpstreamLease(
                            key: key, tls: tls, facts: upstreamFacts, protocolName: upstreamProtocol, shareable: true)))
            } else {
                commands.append(.closeUpstream)
            }
        case .connecting, .handshaking:
            commands.append(.closeUpstream)
        }
        upstream = .none
        upstreamIdle = false
    }

    /// The origin broke off mid-response (reset, garbage, or a close the framing does not allow): the
    /// request is logged as failed with -1005 and the client connection (or HTTP/2 stream) is ended.
    mutating func closeUpstreamAndClient() {
        if let exchange, !exchange.state.responseComplete {
            exchange.result = .failed
            exchange.errorCode = NSURLErrorCode.networkConnectionLost.rawValue
            exchange.rule = "the connection to the origin was lost before the response was complete"
            logExchange()
            self.exchange = nil
        }
        close()
    }

    mutating func clientEOF() {
        switch phase {
        case .relay, .passthroughProbe, .passthroughConnecting, .clientHandshake:
            close()
        case .h2:
            clientGone()
        case .http:
            if let exchange, exchange.state.requestComplete, !exchange.state.responseComplete {
                self.exchange?.clientKeepAlive = false
                return
            }
            close()
        case .closed:
            break
        }
    }
}
