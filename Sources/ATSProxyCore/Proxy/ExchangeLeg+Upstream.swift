import ATSPolicy
import ATSTLS
import Foundation

/// The upstream connection: asking for one (new or pooled), its TLS handshake and the ATS verdict on it, a lost connection and the one retry it allows.
extension ExchangeLeg {
    // MARK: - Upstream

    /// The upstream TCP connection the leg asked for is up: a tunnel opens, a cleartext origin gets the queued
    /// request, a TLS origin gets a ClientHello under the host's ATS requirements. Valid only while `.connecting`;
    /// with no upstream the event is stale and ignored; a second one for a connection past `.connecting` traps.
    mutating func upstreamConnected() {
        exchange?.timings.connected = now
        switch upstream.state {
        case .connecting(let key):
            if case .tunnelConnecting = mode {
                upstream.ready(key, tls: nil)
                tunnelOpened()
                return
            }
            guard let requirements = key.requirements else {
                upstream.ready(key, tls: nil)
                upstream.shareable = true
                flushPendingUpstream()
                return
            }
            do {
                let offered = key.permissive ? Self.permissive(requirements) : requirements
                let tls = try services.upstreamTLS.makeConnection(
                    requirements: offered, host: key.host, port: key.port, alpn: key.http1Only ? ["http/1.1"] : nil)
                upstream.handshake(key, tls)
                continueUpstreamHandshake(key, tls, [])
            } catch {
                // The connection is up but unusable: let go of it, so nothing it sends reaches this leg.
                upstream.release()
                commands.append(.closeUpstream)
                let verdict = UpstreamVerdict.failed(
                    .transport(.other("cannot create the upstream TLS engine: \(error)")),
                    requirements: requirements, url: exchange?.url ?? "", host: key.host)
                failExchange(verdict: verdict)
            }
        case .none:
            // Stale: the leg let go of that connection (its close command and this event crossed).
            return
        case .handshaking, .ready:
            preconditionFailure("ExchangeLeg: a second 'connected' for an upstream that is already \(upstream.state)")
        }
    }

    /// The upstream connection the leg asked for could not be made: the exchange fails with the transport error a
    /// device would report (an upstream proxy's failure keeps its own code). Only while `.connecting`; otherwise
    /// the report is stale (the leg already let go of that attempt) and is ignored.
    mutating func upstreamConnectFailed(_ failure: UpstreamConnectFailure) {
        guard case .connecting(let key) = upstream.state else { return }
        upstream.release()
        let transport: TransportFailure
        switch failure {
        case .nameNotResolved: transport = .nameNotResolved(key.host)
        case .refused: transport = .refused
        case .timedOut: transport = .timedOut
        case .reset: transport = .reset
        case .unreachable: transport = .other("the network or the host is unreachable")
        case .proxyResources(let detail):
            transport = .other(
                "ats-proxy could not open a connection (\(detail)): the proxy ran out of its own descriptors or memory and never contacted the server; raise its limit (ulimit -n) or lower the load"
            )
        case .other(let detail): transport = .other(detail)
        case .upstreamProxy(let code, let detail):
            // An upstream proxy's failure keeps its code; a refusal keeps its own words (its status, or that it
            // wants credentials).
            switch code {
            case .cannotFindHost: transport = .nameNotResolved(key.host)
            case .timedOut: transport = .timedOut
            case .networkConnectionLost: transport = .reset
            default: transport = .other(detail)
            }
        }
        let requirements = key.requirements ?? exchange?.decision.requirements ?? Self.cleartextRequirements
        let verdict = UpstreamVerdict.failed(
            .transport(transport), requirements: requirements, url: exchange?.url ?? "", host: key.host)
        failExchange(verdict: verdict)
    }

    /// Bytes from the upstream connection: handshake input, TLS records or cleartext response bytes. With no
    /// upstream they are stale and dropped; bytes before the connection was reported connected trap.
    mutating func upstreamBytes(_ bytes: [UInt8]) {
        switch upstream.state {
        case .handshaking(let key, let tls):
            continueUpstreamHandshake(key, tls, bytes)
        case .ready(_, let tls):
            if let tls {
                drainUpstreamTLS(tls, bytes)
            } else {
                upstreamPlain(bytes)
            }
        case .none:
            return  // Stale: bytes of a connection the leg has already closed.
        case .connecting:
            preconditionFailure("ExchangeLeg: upstream bytes before the connection was reported connected")
        }
    }

    /// Feeds the origin's `ciphertext` to the upstream handshake and sends what the engine answers; once complete,
    /// judges it, then hands an h2 engine to a shared link or reads what came with the last flight itself.
    mutating func continueUpstreamHandshake(_ key: UpstreamKey, _ tls: TLSConnection, _ ciphertext: [UInt8]) {
        let progress = TLSLayer(tls).handshake(ciphertext)
        flushUpstreamTLS(tls)
        switch progress {
        case .needsInput:
            return
        case .failed(let failure):
            upstream.release()
            commands.append(.closeUpstream)
            let requirements = key.requirements ?? Self.cleartextRequirements
            if let setting = services.settings.systemServices, key.requirements != nil,
                setting.applies(host: key.host, port: key.port)
            {
                exchange?.outcome.systemServices = setting.profile.noHandshake(
                    UpstreamVerdict.failed(.handshake(failure), requirements: requirements, url: "", host: key.host)
                        .rule)
            }
            failExchange(
                verdict: UpstreamVerdict.failed(
                    .handshake(failure), requirements: requirements, url: exchange?.url ?? "", host: key.host))
        case .complete:
            guard let requirements = key.requirements else { return }
            let summary = services.upstreamTLS.summarize(tls, host: key.host, time: now)
            let verdict = UpstreamVerdict.judging(
                summary, requirements: requirements, url: exchange?.url ?? "", host: key.host)
            exchange?.outcome.tls = Self.tlsFacts(summary, detailed: services.settings.detailedRecords)
            if let setting = services.settings.systemServices, setting.applies(host: key.host, port: key.port) {
                exchange?.outcome.tls = SystemServicesSetting.adding(
                    setting.profile.judge(summary), to: exchange?.outcome.tls)
            }
            // Certificate Transparency's outcome where it applies ("CT not evaluated: …" without a current list).
            if let ct = UpstreamJudge(requirements: requirements).ctStatus(summary).text {
                exchange?.outcome.tls?["ct"] = ct
            }
            exchange?.timings.secured = now
            if let appTrust = services.appTrust, appTrust.evaluatesPinning, !summary.resumedSession,
                let pinning = appTrust.pinning(host: key.host, realChain: tls.peerCertificates, at: now)
            {
                // `--af-policy`: would the app accept this chain, and the one the proxy shows it instead? (A resumed
                // session sends no chain; its full handshake was evaluated.)
                exchange?.outcome.appTrust = AppTrustRecord(pinning: pinning)
            }
            if verdict.isBlocked {
                let policy = exchange?.policy ?? services.policy.snapshot
                let verdict = verdict.withFix(url: exchange?.url ?? "", evaluator: policy.evaluator)
                if services.settings.mode == .report {
                    exchange?.outcome.result = .reported
                    exchange?.outcome.errorCode = verdict.error?.rawValue
                    exchange?.outcome.streamError = verdict.streamError
                    exchange?.outcome.rule = verdict.rule
                    exchange?.outcome.fix = verdict.fix
                    let lines = verdict.consoleLines(
                        platform: policy.evaluator.options.platform, context: consoleContext())
                    exchange?.outcome.consoleLines = lines
                } else {
                    upstream.release()
                    commands.append(.closeUpstream)
                    failExchange(verdict: verdict)
                    return
                }
            }
            if case .probe(let host, let port) = mode {
                // The probe passed: drop it and open the raw tunnel.
                upstream.release()
                commands.append(.closeUpstream)
                mode = .tunnelConnecting(host: host, port: port)
                openUpstream(
                    UpstreamKey(host: host, port: port, requirements: nil, permissive: false), reusable: false)
                return
            }
            upstream.facts = exchange?.outcome.tls
            upstream.shareable = !verdict.isBlocked && !key.permissive
            if tls.negotiatedALPN == "h2" {
                // The leg hands its request parts to a channel; a shared link of the loop's pool speaks h2 for it.
                upstream.ready(key, tls: nil, wire: .h2)
                commands.append(
                    .promoteUpstream(
                        UpstreamLease(
                            key: key, tls: tls, facts: upstream.facts, wire: .h2,
                            shareable: upstream.shareable)))
                flushPendingUpstream()
                return
            }
            upstream.ready(key, tls: tls)
            // Not an HTTP/2 link: requests held for this key in case it became one connect themselves.
            commands.append(.upstreamSettled)
            flushPendingUpstream()
            drainUpstreamTLS(tls, [])
        }
    }

    mutating func upstreamEOF(reset: Bool) {
        if case .relay = mode {
            upstream.release()
            shutDown()
            return
        }
        if case .handshaking(let key, let tls) = upstream.state {
            // Closed mid-handshake: let the engine say so (closed without alert, -9816).
            TLSLayer(tls).receiveEnd()
            continueUpstreamHandshake(key, tls, [])
            if case .handshaking = upstream.state {
                upstream.release()
                commands.append(.closeUpstream)
            }
            return
        }
        letGoOfUpstream()
        guard let exchange, exchange.state.isForwarding else { return }
        if exchange.state.responseStarted {
            let events = exchange.response.parser.inputClosed()
            exchange.response.upstreamKeepAlive = false
            if events.contains(where: { if case .failed = $0 { true } else { false } }) || events.isEmpty {
                if !exchange.state.responseComplete { closeUpstreamAndClient() }
                return
            }
            processResponse(events)
        } else if exchange.attempt.onReusedUpstream, !exchange.state.responseBytesSeen,
            let head = exchange.attempt.retryHead,
            let key = exchange.attempt.key
        {
            // A reused connection the origin closed as the request arrived (its keep-alive timeout): like
            // CFNetwork, send the idempotent request once more, on a connection opened for it.
            sendAgain(exchange, head: head, on: key, reusable: false)
        } else {
            let requirements = exchange.attempt.requirements ?? Self.cleartextRequirements
            failExchange(
                verdict: UpstreamVerdict.failed(
                    .transport(.reset), requirements: requirements, url: exchange.url, host: exchange.target.host))
        }
    }

    /// The origin reset the request's HTTP/2 stream with HTTP_1_1_REQUIRED (RFC 9113 §8.7): it is remembered for
    /// the rest of the leg's life, and a request that can be replayed (`retryHead`) and of which nothing came back
    /// is sent once more on an HTTP/1.1-only upstream for the same origin and decision, which the pool may hand
    /// over. Anything else (a body, a response under way, a request sent once more already) is a reset.
    mutating func upstreamRequiresHTTP11() {
        guard carriesExchanges, case .ready(let key, _) = upstream.state, !key.http1Only else {
            return upstreamEOF(reset: true)
        }
        http11Origins.insert(OriginAuthority(host: key.host, port: key.port))
        guard let exchange, exchange.state.isForwarding, !exchange.state.responseBytesSeen,
            let head = exchange.attempt.retryHead
        else {
            return upstreamEOF(reset: true)
        }
        commands.append(.closeUpstream)
        upstream.release()
        var http1Key = key
        http1Key.http1Only = true
        exchange.attempt.key = http1Key
        exchange.outcome.tls = nil  // The HTTP/1.1 upstream's facts replace the h2 link's.
        sendAgain(exchange, head: head, on: http1Key, reusable: true)
    }

    /// Sends `exchange`'s request (`head`, its replayable head) once more, on an upstream for `key`, and
    /// marks it so: never a third time, and logged as retried.
    mutating func sendAgain(
        _ exchange: Exchange, head: HTTPRequestHead, on key: UpstreamKey, reusable: Bool
    ) {
        exchange.attempt.retryHead = nil
        exchange.attempt.onReusedUpstream = false
        exchange.attempt.retried = true
        exchange.state.resent()
        // Only requests without a body are sent again: a fresh encoder frames the (empty) body on the new upstream.
        exchange.requestEncoder = HTTP1RequestEncoder(framing: .none)
        upstream.pendingBytes = []
        upstream.pendingParts = []
        openUpstream(key, reusable: reusable)
        sendRequestPart(.request(head, body: .none))
        if exchange.state.requestEndForwarded { sendRequestPart(.messageEnd) }
    }
}
