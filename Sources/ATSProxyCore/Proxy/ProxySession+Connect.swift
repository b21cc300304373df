import ATSPolicy
import ATSTLS
import Foundation

/// CONNECT: interception (the client-side TLS with a minted leaf), the passthrough probe and the blind tunnel.
extension ProxySession {
    // MARK: - CONNECT

    mutating func connect(_ head: HTTP1RequestHead) {
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
            phase = .passthroughConnecting(host: host, port: port)
            openUpstream(UpstreamKey(host: host, port: port, requirements: nil, permissive: false), reusable: false)
            return
        }
        let url = "https://\(RequestTarget.uriHost(host))\(port == 443 ? "" : ":\(port)")/"
        guard let target = try? RequestTarget(parsing: url) else {
            answerLocally(status: 400, reason: "Bad Request", body: "ats-proxy: bad CONNECT target\n", keepAlive: false)
            close()
            return
        }
        let source = requestSource(head)
        let (decision, policy) = decide(target, source: source)
        let passthrough =
            services.settings.isPassthroughHost(host)
            || (services.settings.passthroughPinnedDomains && decision.requirements.pins != nil)
        if passthrough {
            let exchange = Exchange(
                number: requestCount + 1, start: now, method: "CONNECT", url: url, target: target, decision: decision,
                policy: policy,
                source: source, requestHeaders: head.headers, state: .probing, clientKeepAlive: false,
                requestWriter: HTTP1BodyWriter(framing: .none),
                rule: "passthrough tunnel (\(decision.requirements.pins != nil ? "pinned domain" : "--passthrough"))")
            exchange.requirements = decision.requirements
            let key = UpstreamKey(
                host: host, port: port, requirements: decision.requirements,
                permissive: services.settings.mode == .report)
            // The probe connects: its record names the server it reached, as a forwarded request's does.
            exchange.upstreamKey = key
            self.exchange = exchange
            phase = .passthroughProbe(host: host, port: port)
            openUpstream(key, reusable: false)
            return
        }
        do {
            clientTLS = try services.serverTLS.makeConnection(connectHost: host)
        } catch {
            answerLocally(status: 500, reason: "Internal Server Error", body: "ats-proxy: \(error)\n", keepAlive: false)
            close()
            return
        }
        role = .intercepted(
            InterceptedTunnel(host: host, port: port, target: target, origin: String(url.utf8.dropLast())!))
        phase = .clientHandshake
        commands.append(.writeToClient(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)))
        parser = HTTP1Parser(role: .request)
    }

    // MARK: - Passthrough

    mutating func finishPassthroughSetup() {
        commands.append(.writeToClient(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)))
        if let exchange {
            exchange.responseStatus = 200
            exchange.state.tunnelOpened()
            logExchange()
        }
        exchange = nil
        phase = .relay
        flushPendingUpstream()
        if parser.isPaused {
            let held = parser.upgrade()
            if !held.isEmpty { sendToUpstream(Array(held)) }
        }
    }
}
