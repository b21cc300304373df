import ATSPolicy
import ATSTLS
import Foundation

/// The session's one timer: header, idle and exchange timeouts, and the staged release of idle buffers and upstreams.
extension ProxySession {
    mutating func timerFired() {
        if exchange != nil, quietStageArmed {
            // Quiet for `bufferLinger` in the middle of an exchange: free the buffers, keep waiting.
            quietBuffersReleased = true  // updateTimer lets go of them
            return
        }
        if let exchange {
            if exchange.state.responseStarted || !exchange.state.isForwarding {
                // Recorded by `close` with this reason: the client sees the connection end.
                exchange.result = .failed
                exchange.errorCode = exchange.errorCode ?? NSURLErrorCode.timedOut.rawValue
                exchange.rule =
                    "no progress for \(services.settings.exchangeTimeout) s (--exchange-timeout) \(exchange.state.responseStarted ? "after the response head" : "while the exchange was under way"); the connection was closed"
                close()
            } else {
                // Nothing from the origin (connect, TLS or response head) in time: -1001, 504.
                if case .none = upstream {
                } else {
                    commands.append(.closeUpstream)
                }
                upstream = .none
                let requirements = exchange.requirements ?? Self.cleartextRequirements
                failExchange(
                    verdict: UpstreamVerdict.failed(
                        .transport(.timedOut), requirements: requirements, url: exchange.url,
                        host: exchange.target.host))
                // Still current: the 504 could not end it (its request body is still arriving). Ended, a request
                // pipelined behind it may have started at once; that one is not the one that timed out.
                if self.exchange === exchange { close() }
            }
            return
        }
        if case .http = phase, parser.isIdle {
            let stage = nextIdleStage
            if stage.at < services.settings.idleTimeout {
                // An idle stage, not the end: give back what has lingered long enough and time the rest.
                idleElapsed = stage.at
                // The TLS buffers go in updateTimer, once this event is handled; the event list goes now.
                if stage.releasesBuffers {
                    idleBuffersReleased = true
                    eventList = []
                }
                if stage.releasesUpstream {
                    // The next request takes a connection from the pool again.
                    idleUpstreamReleased = true
                    releaseOrCloseUpstream()
                }
                return
            }
        }
        if case .http = phase, !parser.isIdle {
            answerLocally(
                status: 408, reason: "Request Timeout", body: "ats-proxy: request head not received in time\n",
                keepAlive: false)
            return
        }
        close()
    }

    /// Which timer is armed: the idle and exchange timers restart on every event (inactivity);
    /// the header timer runs from the first byte of a head until it is complete, so a client
    /// trickling a byte at a time cannot hold the connection.
    mutating func updateTimer() {
        switch phase {
        case .http, .clientHandshake, .passthroughProbe, .passthroughConnecting:
            if exchange != nil {
                headerTimerRunning = false
                endIdlePeriod()
                let timeout = services.settings.exchangeTimeout
                if quietStageArmed {
                    commands.append(.armTimer(seconds: services.settings.bufferLinger))
                } else if quietBuffersReleased {
                    commands.append(.armTimer(seconds: max(timeout - services.settings.bufferLinger, 0.001)))
                } else {
                    commands.append(.armTimer(seconds: timeout))
                }
            } else if parser.isIdle {
                headerTimerRunning = false
                commands.append(.armTimer(seconds: idleTimerSeconds))
            } else if !headerTimerRunning {
                headerTimerRunning = true
                commands.append(.armTimer(seconds: services.settings.headerTimeout))
            }
        case .relay:
            headerTimerRunning = false
            commands.append(.cancelTimer)
        case .h2:
            // Streams time out on their own lanes; the connection's timer is the idle one.
            headerTimerRunning = false
            if h2?.hasServedStreams ?? false {
                commands.append(.cancelTimer)
            } else {
                commands.append(.armTimer(seconds: services.settings.idleTimeout))
            }
        case .closed:
            break
        }
        var hold = false
        if case .http = phase {
            hold = !idleBuffersReleased && !quietBuffersReleased && services.settings.bufferLinger > 0
        }
        // The engines are taken out first: setting them while `self` is borrowed made the compiler copy the
        // whole session (every reference in it retained and released) on every event.
        let engines = (client: clientTLS, upstream: upstreamEngine)
        engines.client?.holdsRecordBuffers = hold
        engines.upstream?.holdsRecordBuffers = hold
        let wantsPause = exchange != nil && upstreamPending
        if wantsPause != clientReadsPaused {
            clientReadsPaused = wantsPause
            commands.append(wantsPause ? .pauseClientReads : .resumeClientReads)
        }
    }

    /// The idle timer of a connection between requests runs in stages, each measured from the start of the
    /// idle period: after `bufferLinger` the TLS engines free their record buffers, after `upstreamLinger`
    /// the upstream goes back to the pool, and after `idleTimeout` the connection closes. This is the time
    /// from now to the next stage.
    var idleTimerSeconds: Double { max(nextIdleStage.at - idleElapsed, 0.001) }

    /// The next stage of the idle timer (seconds from the start of the idle period) and what it gives back.
    var nextIdleStage: (at: Double, releasesBuffers: Bool, releasesUpstream: Bool) {
        let settings = services.settings
        var at = settings.idleTimeout
        // Only between requests: a tunnel's client handshake (or a passthrough probe) is timed whole.
        guard case .http = phase else { return (at, false, false) }
        let buffers = !idleBuffersReleased && settings.bufferLinger > 0 && holdsAnyTLSEngine
        let upstream = !idleUpstreamReleased && settings.upstreamLinger > 0 && holdsIdleUpstream
        if buffers { at = min(at, settings.bufferLinger) }
        if upstream { at = min(at, settings.upstreamLinger) }
        return (at, buffers && settings.bufferLinger <= at, upstream && settings.upstreamLinger <= at)
    }

    /// During an exchange, the exchange timer's first stage frees the TLS record buffers after `bufferLinger`
    /// without bytes moving (the timer restarts whenever they move).
    var quietStageArmed: Bool {
        guard case .http = phase, !quietBuffersReleased, holdsAnyTLSEngine else { return false }
        let linger = services.settings.bufferLinger
        return linger > 0 && linger < services.settings.exchangeTimeout
    }

    /// A request (or an exchange) ends the idle period: its stages start over next time.
    mutating func endIdlePeriod() {
        idleElapsed = 0
        idleBuffersReleased = false
        idleUpstreamReleased = false
    }

    /// The session has a TLS engine of its own (client side, or an HTTP/1.1 upstream).
    var holdsAnyTLSEngine: Bool { clientTLS != nil || upstreamEngine != nil }

    /// The TLS engine of a ready HTTP/1.1 upstream of the session's own. The client engine and this one keep
    /// their record buffers between records while HTTP/1.1 is busy and free them whenever they run dry when
    /// idle, relayed or HTTP/2 (`updateTimer`).
    var upstreamEngine: TLSConnection? {
        if case .ready(_, let tls) = upstream { return tls }
        return nil
    }

    /// Between requests with an idle upstream connection of its own that the pool could take back.
    var holdsIdleUpstream: Bool {
        guard exchange == nil, upstreamIdle, upstreamShareable, pendingUpstream.isEmpty else {
            return false
        }
        guard case .http = phase, case .ready = upstream else { return false }
        return true
    }

    /// The upstream is opening (TCP or TLS): client bytes would only pile up in memory.
    var upstreamPending: Bool {
        switch upstream {
        case .connecting, .handshaking: true
        case .none, .ready: false
        }
    }
}
