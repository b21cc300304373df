import ATSPolicy
import ATSTLS
import Foundation

/// Requests: each request head checked (CONNECT, the tunnel's origin, the proxy's own pages, loops, local targets)
/// and handed to the leg with its URL and target; its body and end follow it there.
extension ProxySession {
    // MARK: - Requests

    mutating func requestHead(_ head: HTTPRequestHead, framing: HTTPBodyFraming) {
        // A new request ends the idle period, whether or not it becomes an exchange (a local answer does not).
        leg.timers.endIdlePeriod()
        if challenge != nil, inTunnel {
            // The client accepted the forged server this connection presented: whatever it asks for (a CONNECT
            // too, which would otherwise be a 400 and then a pass for a client that sent no request) is the finding.
            requestCount += 1
            return challengeAccepted(head)
        }
        if head.method == "CONNECT" {
            if !inTunnel && !proxyAuthorized(head) { return requireProxyAuthentication(head) }
            // CONNECT is not a task in CFNetwork's numbering; the requests inside the tunnel are.
            connect(head)
            return
        }
        requestCount += 1
        let clientKeepAlive = HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        if let tunnel = role.tunnel {
            switch TunnelRequestCheck.check(head, host: tunnel.host, port: tunnel.port, cleartext: role.isCleartext) {
            case .sameOrigin: break
            case .misdirected(let text): return refuse(head, status: 421, reason: "Misdirected Request", text: text)
            case .unsupportedScheme(let text):
                return refuse(head, status: 400, reason: "Bad Request", text: text, code: .unsupportedURL)
            }
        }
        let url: String
        switch head.target {
        case .absolute(let scheme, let authority, let pathAndQuery):
            if !inTunnel && authority.host.lowercased() == OnboardingSite.host {
                answerOnboarding(head, path: pathAndQuery.isEmpty ? "/" : pathAndQuery, framing: framing)
                return
            }
            guard !inTunnel else {
                url = tunnelURL(path: pathAndQuery.isEmpty ? "/" : pathAndQuery)
                break
            }
            if !proxyAuthorized(head) { return requireProxyAuthentication(head) }
            let path = pathAndQuery.isEmpty ? "/" : (pathAndQuery.hasPrefix("?") ? "/" + pathAndQuery : pathAndQuery)
            url = "\(scheme.lowercased())://\(authority)\(path)"
        case .origin(let path):
            guard inTunnel else {
                answerProxyInfo(head, framing: framing)
                return
            }
            url = tunnelURL(path: path)
        case .asterisk:
            guard inTunnel else {
                answerLocally(
                    status: 400, reason: "Bad Request", body: "ats-proxy: OPTIONS * is not proxied\n", keepAlive: false)
                return
            }
            // Asterisk-form's target URI has an empty path (RFC 9112 §3.3): the origin alone.
            url = tunnelURL(path: "")
        case .authority:
            answerLocally(
                status: 400, reason: "Bad Request", body: "ats-proxy: authority-form target without CONNECT\n",
                keepAlive: false)
            return
        }
        let target: RequestTarget
        if let tunnel = role.tunnel {
            // The CONNECT target was parsed and checked against the proxy's own addresses already.
            target = tunnel.target.withURL(url)
        } else {
            do {
                target = try RequestTarget(parsing: url)
            } catch {
                answerLocally(status: 400, reason: "Bad Request", body: "ats-proxy: \(error)\n", keepAlive: false)
                return
            }
        }
        if !inTunnel && isSelf(host: target.host, port: target.port) {
            answerLocally(
                status: 508, reason: "Loop Detected", body: "ats-proxy: the request is addressed to the proxy itself\n",
                keepAlive: false)
            return
        }
        if !inTunnel && services.settings.localTargets.refuses(host: target.host, clientAddress: clientAddress) {
            return refuse(head, status: 403, reason: "Forbidden", text: Self.localTargetText(target.host))
        }
        let leftAlone = !inTunnel && services.settings.hostFilter.ignores(host: target.host, port: target.port)
        if leftAlone { services.settings.hostFilter.countIgnored(host: target.host) }
        leg.start(
            ExchangeLeg.Request(
                head: head, framing: framing, url: url, target: target, number: requestCount,
                clientKeepAlive: clientKeepAlive, leftAlone: leftAlone))
        handleSignals()
    }

    /// The URL of a request inside the intercepted tunnel.
    func tunnelURL(path: String) -> String {
        role.tunnel?.url(path: path) ?? "https://invalid/"
    }

    /// Whether `host:port` is an address the proxy itself listens on.
    func isSelf(host: String, port: Int) -> Bool {
        // Any spelling of an address the proxy listens on: `127.1`, `0x7f000001`, `[::ffff:127.0.0.1]`.
        var canonical = RequestTarget.canonicalHost(host)
        if let mapped = IPAddress(parsing: canonical)?.mappedIPv4 { canonical = mapped.description }
        return services.settings.selfAuthorities.contains("\(RequestTarget.uriHost(canonical)):\(port)")
    }

    /// A piece of the request body, for the leg.
    mutating func requestBody(_ slice: ArraySlice<UInt8>) {
        leg.requestBody(slice)
        handleSignals()
    }

    /// The end of a request (trailers, then the message end): the leg's exchange, or one the session answered
    /// itself, after which the parser resumes.
    mutating func requestEnd(trailers: HTTPFields?) {
        if !leg.requestEnd(trailers: trailers) {
            // A CONNECT's messageEnd, or the end of a message answered locally without exchange.
            resumeParserIfIdle()
            return
        }
        handleSignals()
    }
}
