import ATSPolicy
import ATSTLS
import Foundation

/// Where a leg's timer stages stand. The timer of a connection between requests runs in stages, each measured from
/// the start of the idle period: after `bufferLinger` the TLS engines free their record buffers, after
/// `upstreamLinger` the upstream goes back to the pool, and after `idleTimeout` the connection closes. During an
/// exchange, the first stage frees the record buffers after `bufferLinger` without bytes moving (the timer restarts
/// whenever they move) and the exchange times out after `exchangeTimeout`.
struct LegTimers {
    /// Seconds of the current idle period whose stages have fired.
    var idleElapsed: Double = 0
    /// This idle period's stages that have run: the TLS engines freed their record buffers; the upstream went back
    /// to the pool.
    var idleBuffersReleased = false
    var idleUpstreamReleased = false
    /// During an exchange: no bytes moved for `bufferLinger` (an origin thinking, a long poll), so the TLS engines
    /// freed their record buffers; the exchange timer runs on for the rest of `exchangeTimeout`. Cleared when
    /// bytes move again.
    var quietBuffersReleased = false

    /// A request (or an exchange) ends the idle period: its stages start over next time.
    mutating func endIdlePeriod() {
        idleElapsed = 0
        idleBuffersReleased = false
        idleUpstreamReleased = false
    }
}

/// The leg's timer: the exchange timeout and its quiet stage, and the staged release of an idle leg's buffers and
/// upstream. An owner with a timer of its own (an HTTP/1.1 client: header and idle timeouts) asks for the leg's
/// stages and arms one timer for both; a stream's leg arms its own (`updateOwnTimer`).
extension ExchangeLeg {
    /// What a fired timer meant for the leg.
    enum TimerOutcome {
        /// An exchange stage or an idle stage ran (or the exchange timed out and was ended): nothing for the owner.
        case handled
        /// The leg is idle and its idle timeout passed: the owner closes (or, for a stream, the leg is done).
        case idleExpired
    }

    /// The timer fired. `stages`: the owner is between requests in a phase where idle stages apply;
    /// `clientEngine`: the owner holds a client TLS engine whose buffers the stages release too.
    mutating func timerFired(stages: Bool, clientEngine: Bool) -> TimerOutcome {
        if exchange != nil, quietStageArmed(clientEngine: clientEngine) {
            // Quiet for `bufferLinger` in the middle of an exchange: free the buffers, keep waiting.
            timers.quietBuffersReleased = true
            return .handled
        }
        if let exchange {
            if exchange.state.responseStarted || !exchange.state.isForwarding {
                // Recorded by `shutDown` with this reason: the client sees the connection end.
                exchange.outcome.result = .failed
                exchange.outcome.errorCode = exchange.outcome.errorCode ?? NSURLErrorCode.timedOut.rawValue
                exchange.outcome.rule =
                    "no progress for \(services.settings.exchangeTimeout) s (--exchange-timeout) \(exchange.state.responseStarted ? "after the response head" : "while the exchange was under way"); the connection was closed"
                shutDown()
            } else {
                // Nothing from the origin in time: -1001, 504, named by the stage that did not finish. With the
                // connection open, either the request body stopped moving (the client stopped sending it, or the
                // server stopped reading it: back-pressure cannot tell which) or no response head came.
                let failure: TransportFailure
                if case .ready = upstream.state {
                    failure =
                        exchange.state.requestComplete
                        ? .noResponse : .requestStalled(bodyBytes: exchange.bytesFromClient)
                } else {
                    failure = .timedOut
                }
                letGoOfUpstream()
                let requirements = exchange.attempt.requirements ?? Self.cleartextRequirements
                failExchange(
                    verdict: UpstreamVerdict.failed(
                        .transport(failure), requirements: requirements, url: exchange.url,
                        host: exchange.target.host))
                // Still current: the 504 could not end it (its request body is still arriving).
                if self.exchange === exchange { shutDown() }
            }
            return .handled
        }
        guard stages else { return .idleExpired }
        let stage = nextIdleStage(stages: true, clientEngine: clientEngine)
        guard stage.at < services.settings.idleTimeout else { return .idleExpired }
        // An idle stage, not the end: give back what has lingered long enough and time the rest.
        timers.idleElapsed = stage.at
        // The TLS buffers go when the holds are next updated, once this event is handled; the event list goes now.
        if stage.releasesBuffers {
            timers.idleBuffersReleased = true
            eventList.release()
        }
        if stage.releasesUpstream {
            // The next request takes a connection from the pool again.
            timers.idleUpstreamReleased = true
            releaseOrCloseUpstream()
        }
        return .handled
    }

    /// Seconds until the exchange timer's next stage (the leg has an exchange). Ends the idle period.
    mutating func exchangeTimerSeconds(clientEngine: Bool) -> Double {
        timers.endIdlePeriod()
        var timeout = services.settings.exchangeTimeout
        if case .handshaking = upstream.state { timeout = min(timeout, services.settings.connectTimeout) }
        if quietStageArmed(clientEngine: clientEngine) { return services.settings.bufferLinger }
        if timers.quietBuffersReleased { return max(timeout - services.settings.bufferLinger, 0.001) }
        return timeout
    }

    /// Seconds from now to the next idle stage (the leg has no exchange).
    func idleTimerSeconds(stages: Bool, clientEngine: Bool) -> Double {
        max(nextIdleStage(stages: stages, clientEngine: clientEngine).at - timers.idleElapsed, 0.001)
    }

    /// The next stage of the idle timer (seconds from the start of the idle period) and what it gives back.
    /// Without `stages` (a tunnel's client handshake, a passthrough probe) the period is timed whole.
    func nextIdleStage(stages: Bool, clientEngine: Bool) -> (at: Double, releasesBuffers: Bool, releasesUpstream: Bool)
    {
        let settings = services.settings
        var at = settings.idleTimeout
        guard stages else { return (at, false, false) }
        let buffers =
            !timers.idleBuffersReleased && settings.bufferLinger > 0 && (clientEngine || upstreamEngine != nil)
        let upstream = !timers.idleUpstreamReleased && settings.upstreamLinger > 0 && holdsIdleUpstream
        if buffers { at = min(at, settings.bufferLinger) }
        if upstream { at = min(at, settings.upstreamLinger) }
        return (at, buffers && settings.bufferLinger <= at, upstream && settings.upstreamLinger <= at)
    }

    /// During an exchange, the exchange timer's first stage frees the TLS record buffers after `bufferLinger`.
    func quietStageArmed(clientEngine: Bool) -> Bool {
        guard carriesExchanges, !timers.quietBuffersReleased, clientEngine || upstreamEngine != nil else {
            return false
        }
        let linger = services.settings.bufferLinger
        return linger > 0 && linger < services.settings.exchangeTimeout
    }

    /// Whether TLS engines keep their record buffers between records: while exchanges are busy, until a stage
    /// released them.
    var holdsRecordBuffers: Bool {
        !timers.idleBuffersReleased && !timers.quietBuffersReleased && services.settings.bufferLinger > 0
    }

    /// The TLS engine of a ready HTTP/1.1 upstream of the leg's own.
    var upstreamEngine: TLSConnection? {
        if case .ready(_, let tls) = upstream.state { return tls }
        return nil
    }

    /// Between requests with an idle upstream connection of its own that the pool could take back.
    var holdsIdleUpstream: Bool {
        guard exchange == nil, upstream.idle, upstream.shareable, upstream.pendingBytes.isEmpty, carriesExchanges else {
            return false
        }
        return upstream.isReady
    }

    /// The upstream is opening (TCP or TLS): client bytes would only pile up in memory.
    var upstreamPending: Bool { upstream.isOpening }

    /// Whether the owner's client reads should pause: an exchange waits for its upstream to open. Appends the
    /// pause or resume command when that changes.
    mutating func updateClientReadPause() {
        let wantsPause = exchange != nil && upstreamPending
        if wantsPause != clientReadsPaused {
            clientReadsPaused = wantsPause
            commands.append(wantsPause ? .pauseClientReads : .resumeClientReads)
        }
    }

    /// After every event of a stream's leg: its own timer (exchange or idle stages), its engine's buffer hold and
    /// the stream's read pause.
    mutating func updateOwnTimer() {
        if case .closed = mode { return }
        if exchange != nil {
            commands.append(.armTimer(seconds: exchangeTimerSeconds(clientEngine: false)))
        } else {
            commands.append(.armTimer(seconds: idleTimerSeconds(stages: true, clientEngine: false)))
        }
        let engine = upstreamEngine
        engine?.holdsRecordBuffers = holdsRecordBuffers
        updateClientReadPause()
    }

    /// A timer event of a stream's leg: the idle timeout ends the leg.
    mutating func ownTimerFired() {
        switch timerFired(stages: true, clientEngine: false) {
        case .handled: break
        case .idleExpired: shutDown()
        }
    }
}
