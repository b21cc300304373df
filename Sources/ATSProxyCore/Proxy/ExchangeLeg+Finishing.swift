import ATSHTTP2
import ATSPolicy
import ATSTLS
import Foundation

/// An HTTP/2 stream ended by RST_STREAM: its error code and which side sent it.
struct StreamReset {
    let code: HTTP2ErrorCode
    let byClient: Bool
}

/// The end of an exchange and of the leg: one record per exchange, the upstream parked or closed, the owner told
/// whether its client may go on.
extension ExchangeLeg {
    // MARK: - Finishing

    /// Ends the current exchange once both halves are complete: its record, its upstream kept or closed, and the
    /// owner told whether the client connection may carry another request.
    mutating func finishIfComplete() {
        guard let exchange, exchange.state.isComplete else { return }
        logExchange()
        self.exchange = nil
        if !exchange.response.upstreamKeepAlive {
            letGoOfUpstream()
        } else if upstream.isReady {
            upstream.idle = true
        }
        signals.append(.finished(keepAlive: exchange.clientKeepAlive))
    }

    /// The client went away: what was in flight is logged as abandoned, and the leg shuts down. `reset`: an
    /// HTTP/2 stream ended by RST_STREAM (its code, and whether the client sent it or the proxy did) rather than
    /// by the client's connection closing; the record names which.
    mutating func clientGone(reset: StreamReset? = nil) {
        if let exchange, !exchange.state.responseComplete {
            exchange.outcome.result = .failed
            // The client's own cancel is -999; a stream the proxy reset is, to the client, a lost connection.
            exchange.outcome.errorCode =
                reset?.byClient == false
                ? NSURLErrorCode.networkConnectionLost.rawValue : NSURLErrorCode.cancelled.rawValue
            switch reset {
            case .none:
                exchange.outcome.rule = "the client closed the connection before the response was complete"
            case .some(let reset) where reset.byClient:
                exchange.outcome.rule =
                    "the client reset its stream (RST_STREAM \(reset.code)) before the response was complete"
            case .some(let reset):
                exchange.outcome.rule =
                    "the proxy reset the stream (RST_STREAM \(reset.code)) before the response was complete"
            }
            logExchange()
            self.exchange = nil
        }
        shutDown()
    }

    /// The proxy's grace period is over: whatever is in flight ends now (and is recorded as cut short).
    mutating func abandonForShutdown() {
        if let exchange, !exchange.state.isRecorded {
            exchange.outcome.result = .failed
            exchange.outcome.errorCode = NSURLErrorCode.networkConnectionLost.rawValue
            exchange.outcome.rule = "the proxy stopped (grace period over) before the exchange was complete"
        }
        shutDown()
    }

    mutating func logExchange() {
        guard let exchange, !exchange.unrecorded, !exchange.state.isRecorded else { return }
        exchange.state.record()
        let redirectNote = ""
        let facts = SystemServicesSetting.split(exchange.outcome.tls)
        let record = client.record(
            task: exchange.number, time: exchange.start, method: exchange.method, url: exchange.url,
            host: exchange.target.host, source: exchange.source, result: exchange.outcome.result,
            decision: exchange.decision,
            rule: exchange.outcome.rule + redirectNote, fix: exchange.outcome.fix,
            errorCode: exchange.outcome.errorCode, streamError: exchange.outcome.streamError,
            status: exchange.response.status,
            tls: facts.tls,
            requestHeaders: exchange.requestHeaders.fields, responseHeaders: exchange.response.headers.fields,
            bytesFromClient: exchange.bytesFromClient, bytesToClient: exchange.bytesToClient,
            durationMilliseconds: now.timeIntervalSince(exchange.start) * 1000,
            consoleLines: exchange.outcome.consoleLines,
            retriedOnNewConnection: exchange.attempt.retried ? true : nil,
            timings: services.settings.detailedRecords ? exchange.timings.record(since: exchange.start) : nil,
            bodies: exchange.bodies.record,
            // Only a request that went upstream has a server (a blocked or local one may follow one that did).
            serverAddress: exchange.attempt.key == nil ? nil : upstream.address, appTrust: exchange.outcome.appTrust,
            systemServices: facts.verdict ?? exchange.outcome.systemServices, route: route,
            // Only an origin's own response can offer HTTP/3 (the proxy's answers carry no Alt-Svc).
            http3: exchange.attempt.key == nil ? nil : HTTP3Advertisement(responseHeaders: exchange.response.headers))
        commands.append(.log(record))
    }

    /// Ends the leg: an exchange cut before it ended on its own (timeout, shutdown, a client gone mid-request) still
    /// gets its one record, the upstream goes back to the pool when it can or is closed, and the owner is told to
    /// end the client connection (or stream). Once only.
    mutating func shutDown() {
        if case .closed = mode { return }
        if let exchange, !exchange.state.isRecorded {
            switch exchange.outcome.result {
            case .completed, .reported:
                exchange.outcome.result = .failed
                exchange.outcome.errorCode = NSURLErrorCode.networkConnectionLost.rawValue
                exchange.outcome.rule = "the connection was closed before the exchange was complete"
            case .failed:
                // A failure cut short keeps its code; one without (nothing decided yet) lost its connection.
                exchange.outcome.errorCode = exchange.outcome.errorCode ?? NSURLErrorCode.networkConnectionLost.rawValue
            case .blockedCleartext, .refused, .clientUntrustedCA, .challengeRefused, .challengeAccepted:
                break
            }
            logExchange()
        }
        releaseOrCloseUpstream()
        mode = .closed
        signals.append(.closeClient)
    }

    /// Closes the upstream connection, if the leg holds one, and forgets it.
    mutating func letGoOfUpstream() {
        if !upstream.isNone { commands.append(.closeUpstream) }
        upstream.release()
    }

    /// An idle, judged, shareable upstream goes back to the loop's pool; anything else is closed.
    mutating func releaseOrCloseUpstream() {
        switch upstream.state {
        case .none:
            return
        case .ready(let key, let tls):
            // Whoever gets the engine next (the pool, or nobody) expects it to free its buffers when idle.
            tls?.holdsRecordBuffers = false
            if upstream.idle && upstream.shareable && carriesExchanges && upstream.pendingBytes.isEmpty {
                commands.append(
                    .releaseUpstream(
                        UpstreamLease(
                            key: key, tls: tls, facts: upstream.facts, wire: upstream.wire, shareable: true)))
            } else {
                commands.append(.closeUpstream)
            }
        case .connecting, .handshaking:
            commands.append(.closeUpstream)
        }
        upstream.release()
        upstream.idle = false
    }

    /// The origin broke off mid-response (reset, garbage, or a close the framing does not allow): the
    /// request is logged as failed with -1005 and the client connection (or HTTP/2 stream) is ended.
    mutating func closeUpstreamAndClient() {
        if let exchange, !exchange.state.responseComplete {
            exchange.outcome.result = .failed
            exchange.outcome.errorCode = NSURLErrorCode.networkConnectionLost.rawValue
            exchange.outcome.rule = "the connection to the origin was lost before the response was complete"
            logExchange()
            self.exchange = nil
        }
        shutDown()
    }
}
