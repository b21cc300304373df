import ATSPolicy
import ATSTLS
import Foundation

/// CONNECT: answered and handed to protocol detection (`+Detection`: TLS is intercepted with a minted leaf), the
/// passthrough probe and the blind tunnel.
extension ProxySession {
    // MARK: - CONNECT

    /// A CONNECT: refused, left alone (a blind tunnel), passed through after a probe, or answered with 200 and read
    /// (the client's first bytes decide: TLS is intercepted with a minted leaf, cleartext HTTP is decided as such).
    mutating func connect(_ head: HTTPRequestHead) {
        guard case .authority(let authority) = head.target, !inTunnel else {
            answerLocally(
                status: 400, reason: "Bad Request", body: "ats-proxy: CONNECT needs host:port\n", keepAlive: false)
            close()
            return
        }
        let host = RequestTarget.canonicalHost(authority.host)
        let port = authority.port ?? 443
        if host == OnboardingSite.host {
            answerLocally(
                status: 400, reason: "Bad Request",
                body: "ats-proxy: open http://\(OnboardingSite.host)/ (plain http) to install the CA\n",
                keepAlive: false)
            close()
            return
        }
        if isSelf(host: host, port: port) {
            answerLocally(
                status: 508, reason: "Loop Detected", body: "ats-proxy: CONNECT to the proxy itself\n", keepAlive: false
            )
            close()
            return
        }
        if services.settings.localTargets.refuses(host: host, clientAddress: clientAddress) {
            return refuse(head, status: 403, reason: "Forbidden", text: Self.localTargetText(host))
        }
        if services.settings.hostFilter.ignores(host: host, port: port) {
            // Left alone: a blind tunnel without a probe or a record (only counted).
            services.settings.hostFilter.countIgnored(host: host)
            phase = .tunnel
            leg.openTunnel(host: host, port: port)
            return
        }
        let url = "https://\(RequestTarget.uriHost(host))\(port == 443 ? "" : ":\(port)")/"
        guard let target = try? RequestTarget(parsing: url) else {
            answerLocally(status: 400, reason: "Bad Request", body: "ats-proxy: bad CONNECT target\n", keepAlive: false)
            close()
            return
        }
        let source = leg.requestSource(head)
        let (decision, policy) = leg.decide(target, source: source)
        let passthrough =
            services.settings.isPassthroughHost(host)
            || (services.settings.passthroughPinnedDomains && decision.requirements.pins != nil)
        if passthrough {
            leg.route = .tunnel(entry, .tls)
            let exchange = Exchange(
                number: requestCount + 1, start: now, method: "CONNECT", url: url, target: target, decision: decision,
                policy: policy,
                source: source, requestHeaders: head.headers, state: .probing, clientKeepAlive: false,
                requestEncoder: HTTP1RequestEncoder(framing: .none),
                rule: "passthrough tunnel (\(decision.requirements.pins != nil ? "pinned domain" : "--passthrough"))")
            exchange.attempt.requirements = decision.requirements
            let key = UpstreamKey(
                host: host, port: port, requirements: decision.requirements,
                permissive: services.settings.mode == .report)
            // The probe connects: its record names the server it reached, as a forwarded request's does.
            exchange.attempt.key = key
            phase = .tunnel
            leg.startProbe(exchange, key: key, host: host, port: port)
            return
        }
        // The engine (and a `--challenge` pick) is made now, as for every CONNECT; what the client speaks inside is
        // read from its first bytes (`+Detection`), and only TLS is handed to it.
        let engine: TLSConnection
        do {
            engine = try clientEngine(forConnectTo: host)
        } catch {
            answerLocally(status: 500, reason: "Internal Server Error", body: "ats-proxy: \(error)\n", keepAlive: false)
            close()
            return
        }
        let tunnel = InterceptedTunnel(host: host, port: port, target: target, origin: String(url.utf8.dropLast())!)
        // Intercepted until the first bytes say otherwise (a challenge's records name this tunnel).
        role = .intercepted(tunnel)
        phase = .detecting(TunnelDetection(tunnel: tunnel, engine: engine, source: source, start: now))
        headerTimerRunning = false
        grantTunnel()
        parser = HTTP1Parser(role: .request)
    }

    /// Tells the client its tunnel is open: `200 Connection established` for an HTTP CONNECT, a SOCKS5 success
    /// reply for a SOCKS5 one.
    mutating func grantTunnel() {
        switch entry {
        case .httpConnect, .tlsConnect:
            var granted: [UInt8] = []
            HTTP1Serializer.writeResponseHead(
                HTTPResponseHead(status: 200, reason: "Connection established"), into: &granted)
            leg.commands.append(.writeToClient(granted))
        case .socks5:
            precondition(socksReplyPending, "ProxySession.grantTunnel: the SOCKS5 reply was sent already")
            socksReplyPending = false
            leg.commands.append(.writeToClient(SOCKS5Reply.bytes(.succeeded)))
        }
    }

    // MARK: - Passthrough

    /// The leg opened the tunnel's connection: the CONNECT is answered, and what the client sent after it (held by
    /// the parser) follows the bytes the leg held.
    mutating func tunnelOpened() {
        // A raw tunnel's CONNECT was answered before its client's first bytes were read.
        if case .rawTunnel = role {
        } else {
            grantTunnel()
        }
        if parser.isPaused {
            let held = parser.upgrade()
            if !held.isEmpty { leg.relayFromClient(Array(held)) }
        }
    }
}
