import ATSPolicy
import ATSTLS
import Foundation

/// The connection's one timer: the header timeout of the session's own, and the leg's exchange and idle stages
/// (which also release the client TLS engine's buffers), merged into one armed timer.
extension ProxySession {
    mutating func timerFired() {
        if case .detecting(let detection) = phase { return tunnelDetectionTimedOut(detection) }
        if case .socks = phase {
            endedByProxy = "its timeout (--header-timeout)"
            return close()
        }
        var stages = false
        if case .http = phase { stages = parser.isIdle }
        if leg.exchange != nil || stages {
            switch leg.timerFired(stages: stages, clientEngine: clientTLS != nil) {
            case .handled:
                if leg.timers.idleBuffersReleased { eventList.release() }
                handleSignals()
                return
            case .idleExpired:
                break
            }
        }
        if case .http = phase, !parser.isIdle {
            answerLocally(
                status: 408, reason: "Request Timeout", body: "ats-proxy: request head not received in time\n",
                keepAlive: false)
            return
        }
        endedByProxy = "its timeout (--idle-timeout, --header-timeout)"
        close()
    }

    /// Which timer is armed: the idle and exchange timers restart on every event (inactivity); the header timer
    /// runs from the first byte of a head until it is complete, so a client trickling a byte at a time cannot hold
    /// the connection.
    mutating func updateTimer() {
        let clientEngine = clientTLS != nil
        switch phase {
        case .http, .clientHandshake, .tunnel:
            if case .tunnel = phase, leg.isRelaying {
                headerTimerRunning = false
                leg.commands.append(.cancelTimer)
            } else if leg.exchange != nil {
                headerTimerRunning = false
                leg.commands.append(.armTimer(seconds: leg.exchangeTimerSeconds(clientEngine: clientEngine)))
            } else if parser.isIdle {
                headerTimerRunning = false
                var stages = false
                if case .http = phase { stages = true }
                leg.commands.append(
                    .armTimer(seconds: leg.idleTimerSeconds(stages: stages, clientEngine: clientEngine)))
            } else if !headerTimerRunning {
                headerTimerRunning = true
                leg.commands.append(.armTimer(seconds: services.settings.headerTimeout))
            }
        case .socks:
            // A SOCKS5 handshake must end within the header timeout from its first byte, like a request head.
            if !headerTimerRunning {
                headerTimerRunning = true
                leg.commands.append(.armTimer(seconds: services.settings.headerTimeout))
            }
        case .detecting(let detection):
            // The bounded wait for the tunnel's first bytes is the idle timeout (a client may take its time before
            // its ClientHello); once some came, the rest of what tells the protocol must follow within the header
            // timeout, so a client trickling bytes cannot hold the connection.
            if detection.sniffer.held.isEmpty {
                headerTimerRunning = false
                leg.commands.append(.armTimer(seconds: services.settings.idleTimeout))
            } else if !headerTimerRunning {
                headerTimerRunning = true
                leg.commands.append(.armTimer(seconds: services.settings.headerTimeout))
            }
        case .h2:
            // Streams time out on their own legs; the connection's timer is the idle one, or the header timer while
            // a header block is left open (HEADERS without END_HEADERS): CONTINUATIONs trickled in do not push it.
            if h2?.session.isReceivingHeaderBlock ?? false {
                if !headerTimerRunning {
                    headerTimerRunning = true
                    leg.commands.append(.armTimer(seconds: services.settings.headerTimeout))
                }
            } else if h2?.hasServedStreams ?? false {
                headerTimerRunning = false
                leg.commands.append(.cancelTimer)
            } else {
                headerTimerRunning = false
                leg.commands.append(.armTimer(seconds: services.settings.idleTimeout))
            }
        case .closed:
            break
        }
        var hold = false
        if case .http = phase { hold = leg.holdsRecordBuffers }
        // The engines are taken out first: setting them while `self` is borrowed made the compiler copy the
        // whole session (every reference in it retained and released) on every event.
        let engines = (client: clientTLS, upstream: leg.upstreamEngine)
        engines.client?.holdsRecordBuffers = hold
        engines.upstream?.holdsRecordBuffers = hold
        leg.updateClientReadPause()
    }
}
