import ATSPolicy
import ATSTLS
import Foundation

/// Requests: each request head decided by the policy and answered, upgraded or forwarded; the request body and end as parts for the upstream.
extension ProxySession {
    // MARK: - Requests

    mutating func requestHead(_ head: HTTP1RequestHead, framing: HTTP1BodyFraming) {
        // A new request ends the idle period, whether or not it becomes an exchange (a local answer does not).
        endIdlePeriod()
        if head.method == "CONNECT" {
            // CONNECT is not a task in CFNetwork's numbering; the requests inside the tunnel are.
            connect(head)
            return
        }
        requestCount += 1
        let clientKeepAlive = HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        if case .intercepted(let tunnel) = role {
            switch TunnelRequestCheck.check(head, host: tunnel.host, port: tunnel.port) {
            case .sameOrigin: break
            case .misdirected(let text): return refuse(head, status: 421, reason: "Misdirected Request", text: text)
            case .unsupportedScheme(let text): return refuse(head, status: 400, reason: "Bad Request", text: text)
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
        let source = requestSource(head)
        let (decision, policy) = decide(target, source: source)
        let exchange = Exchange(
            number: requestCount, start: now, method: head.method, url: url, target: target, decision: decision,
            policy: policy,
            source: source, requestHeaders: head.headers,
            state: .forwarding(request: .receiving, response: .awaitingResponse), clientKeepAlive: clientKeepAlive,
            requestWriter: HTTP1BodyWriter(framing: framing), rule: decision.ruleSummary)
        exchange.requestFraming = framing
        exchange.isUpgradeRequest =
            head.headers.contains("Upgrade") && head.headers.hasListElement("Connection", "upgrade")
        exchange.requestHasBody = framing != .none
        exchange.clientIsHTTP10 = !head.version.isAtLeastHTTP11

        if !inTunnel && services.settings.hostFilter.ignores(host: target.host, port: target.port) {
            // Left alone: forwarded as it is, not judged, not recorded (only counted).
            exchange.unrecorded = true
            services.settings.hostFilter.countIgnored(host: target.host)
            startForward(exchange, head: head, host: target.host, port: target.port, requirements: nil)
            return
        }
        switch decision.outcome {
        case .cleartextBlocked:
            switch (services.settings.mode, services.settings.cleartext) {
            case (.report, _):
                exchange.result = .reported
                exchange.errorCode = NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue
                exchange.fix = decision.fix
                exchange.consoleLines = cleartextConsole(decision, number: exchange.number)
                startForward(exchange, head: head, host: target.host, port: target.port, requirements: nil)
            case (.enforce, .upgrade):
                upgradeCleartext(exchange, head: head)
            case (.enforce, .block):
                exchange.result = .blockedCleartext
                exchange.errorCode = NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue
                exchange.fix = decision.fix
                exchange.consoleLines = cleartextConsole(decision, number: exchange.number)
                let response = ATSErrorResponse.cleartextBlocked(decision, consoleLines: exchange.consoleLines)
                self.exchange = exchange
                respondLocally(response)
            }
        case .cleartextAllowed:
            startForward(exchange, head: head, host: target.host, port: target.port, requirements: nil)
        case .https:
            startForward(
                exchange, head: head, host: target.host, port: target.port, requirements: decision.requirements)
        }
    }

    /// The policy's decision for `target`, and the policy that made it (the exchange keeps it: a reload while it
    /// runs changes neither its verdict nor the fix it reports). Reuses the last decision when it is for the same
    /// scheme, host, port and source under the same policy.
    mutating func decide(_ target: RequestTarget, source: RequestSource) -> (ATSDecision, PolicyStore.Snapshot) {
        let generation = services.policy.generation
        let key = DecisionCache.Key(target, source: source)
        if let last = lastDecision, last.generation == generation, last.key == key {
            return (last.decision.retargeted(target), last.policy)
        }
        let policy = services.policy.snapshot
        let decision = policy.decide(target, source: source)
        lastDecision = (generation, key, decision, policy)
        return (decision, policy)
    }

    func tunnelURL(path: String) -> String {
        role.tunnel?.url(path: path) ?? "https://invalid/"
    }

    func requestSource(_ head: HTTP1RequestHead) -> RequestSource {
        switch services.settings.source {
        case .auto: RequestSourceDetector.detect(userAgent: head.headers.first("User-Agent"))
        case .fixed(let source): source
        }
    }

    func isSelf(host: String, port: Int) -> Bool {
        // Any spelling of an address the proxy listens on: `127.1`, `0x7f000001`, `[::ffff:127.0.0.1]`.
        var canonical = RequestTarget.canonicalHost(host)
        if let mapped = IPAddress(parsing: canonical)?.mappedIPv4 { canonical = mapped.description }
        return services.settings.selfAuthorities.contains("\(RequestTarget.uriHost(canonical)):\(port)")
    }

    /// `--cleartext upgrade`: fetch the https:// twin under that host's ATS requirements.
    mutating func upgradeCleartext(_ original: Exchange, head: HTTP1RequestHead) {
        let port = services.settings.upgradePort
        let host = RequestTarget.uriHost(original.target.host)
        var path = "/"
        if case .absolute(_, _, let pathAndQuery) = head.target, !pathAndQuery.isEmpty { path = pathAndQuery }
        let url = "https://\(host)\(port == 443 ? "" : ":\(port)")\(path.hasPrefix("/") ? path : "/" + path)"
        guard let target = try? RequestTarget(parsing: url) else {
            answerLocally(
                status: 400, reason: "Bad Request", body: "ats-proxy: cannot upgrade \(original.url)\n",
                keepAlive: false)
            return
        }
        let (decision, policy) = decide(target, source: original.source)
        let exchange = Exchange(
            number: original.number, start: original.start, method: original.method, url: url, target: target,
            decision: decision, policy: policy, source: original.source, requestHeaders: original.requestHeaders,
            state: .forwarding(request: .receiving, response: .awaitingResponse),
            clientKeepAlive: original.clientKeepAlive, requestWriter: original.requestWriter,
            rule: "cleartext \(original.url) upgraded to https:// (--cleartext upgrade); \(decision.ruleSummary)")
        exchange.isUpgradeRequest = original.isUpgradeRequest
        exchange.requestFraming = original.requestFraming
        exchange.requestHasBody = original.requestHasBody
        exchange.clientIsHTTP10 = original.clientIsHTTP10
        var upstreamHead = head
        upstreamHead.target = .origin(path.hasPrefix("/") ? path : "/" + path)
        upstreamHead.headers.replaceOrAppend(name: "Host", value: port == 443 ? host : "\(host):\(port)")
        startForward(exchange, head: upstreamHead, host: target.host, port: port, requirements: decision.requirements)
    }

    mutating func startForward(
        _ exchange: Exchange, head: HTTP1RequestHead, host: String, port: Int, requirements: TLSRequirements?
    ) {
        exchange.requirements = requirements
        if let requirements, !requirements.isSatisfiable, services.settings.mode == .enforce {
            self.exchange = exchange
            let verdict = UpstreamVerdict.unsatisfiable(requirements: requirements, url: exchange.url, host: host)
            failExchange(verdict: verdict)
            return
        }
        let permissive = services.settings.mode == .report && requirements != nil
        // Upgrades and connection-oriented authentication need a connection of their own: HTTP/1.1 only, never
        // a stream of a shared HTTP/2 link (servers refuse NTLM over h2 with HTTP_1_1_REQUIRED); so do origins
        // that already answered this session with HTTP_1_1_REQUIRED.
        exchange.authenticatesConnection = Self.namesConnectionAuthentication(head.headers.values("Authorization"))
        let requiresHTTP11 =
            !http11Origins.isEmpty && http11Origins.contains(OriginAuthority(host: host, port: port))
        let key = UpstreamKey(
            host: host, port: port, requirements: requirements, permissive: permissive,
            http1Only: exchange.isUpgradeRequest || exchange.authenticatesConnection || requiresHTTP11)
        var upstreamHead = head.forOrigin()
        // The proxy speaks its own version upstream (RFC 9112 §2.5), whatever the client sent.
        upstreamHead.version = .http11
        upstreamHead.headers = HTTP1ProxyHeaders.removingHopByHop(
            upstreamHead.headers, options: HTTP1ProxyHeaders.Options(upgrading: exchange.isUpgradeRequest))
        if !exchange.clientKeepAlive && !exchange.isUpgradeRequest {
            upstreamHead.headers.append(name: "Connection", value: "close")
            // The origin will close after answering, whether or not it says so: never park this connection.
            exchange.upstreamKeepAlive = false
        }
        exchange.responseParser.requestSent(method: head.method)
        exchange.upstreamKey = key
        if Self.idempotentMethods.contains(head.method) && !exchange.requestHasBody && !exchange.isUpgradeRequest {
            exchange.retryHead = upstreamHead
        }
        // One key comparison per request: it compares the TLS requirements (cipher lists and all).
        var sameUpstream = false
        if case .ready(let current, _) = upstream, current == key { sameUpstream = true }
        if sameUpstream {
            exchange.tls = upstreamFacts
            exchange.onReusedUpstream = true
        }
        self.exchange = exchange
        switch upstream {
        case .ready where sameUpstream:
            upstreamIdle = false
        case .none:
            pendingUpstream = []
            pendingParts = []
            openUpstream(key)
        case .connecting, .handshaking, .ready:
            releaseOrCloseUpstream()
            pendingUpstream = []
            pendingParts = []
            openUpstream(key)
        }
        sendRequestPart(.request(upstreamHead, body: exchange.requestFraming))
    }

    /// Asks for an upstream connection; a `reusable` one may come from the loop's pool (same key only).
    mutating func openUpstream(_ key: UpstreamKey, reusable: Bool = true) {
        upstream = .connecting(key)
        upstreamFacts = nil
        upstreamAddress = nil
        upstreamProtocol = "http/1.1"
        upstreamShareable = false
        upstreamIdle = false
        exchange?.timings.connectStart = now
        commands.append(
            .connectUpstream(host: key.host, port: key.port, reuse: reusable && !key.permissive ? key : nil))
    }

    /// The pool handed over an established connection (or an HTTP/2 channel) for the key asked for.
    mutating func upstreamReused(_ lease: UpstreamLease) {
        guard case .connecting(let key) = upstream, key == lease.key else {
            // Not waiting for it any more: give it straight back.
            commands.append(.releaseUpstream(lease))
            return
        }
        upstream = .ready(key, lease.tls)
        upstreamFacts = lease.facts
        upstreamProtocol = lease.protocolName
        upstreamShareable = lease.shareable
        exchange?.tls = lease.facts
        exchange?.onReusedUpstream = true
        flushPendingUpstream()
    }

    mutating func requestBody(_ slice: ArraySlice<UInt8>) {
        guard let exchange else { return }
        exchange.bytesFromClient += slice.count
        if services.settings.captureBodyLimit > 0 { exchange.bodies.request(slice, services.settings.captureBodyLimit) }
        switch exchange.state {
        case .answeredLocally, .probing, .recorded:
            break  // Answered locally, a probe, or over: the body is counted and dropped.
        case .forwarding:
            exchange.requestBodyForwarded += slice.count
            if case .contentLength(let declared) = exchange.requestFraming, exchange.requestBodyForwarded > declared {
                answerLocally(
                    status: 400, reason: "Bad Request", body: "ats-proxy: request body longer than declared\n",
                    keepAlive: false)
                close()
                return
            }
            sendRequestPart(.body(slice))
        }
    }

    mutating func requestEnd(trailers: HTTP1Headers?) {
        guard let exchange else {
            // A CONNECT's messageEnd, or the end of a message answered locally without exchange.
            resumeParserIfIdle()
            return
        }
        switch exchange.state {
        case .probing:
            // The CONNECT's own message end: the CONNECT is the probe's whole request.
            return
        case .forwarding(let request, _):
            // Trailers, when there are any, finish the body; the message end after them ends the request.
            if let trailers {
                if request == .receiving {
                    exchange.state.requestTrailersForwarded()
                    sendRequestPart(.trailers(trailers))
                }
                return
            }
            sendRequestPart(.messageEnd)
            guard self.exchange === exchange else { return }
        case .answeredLocally, .recorded:
            // Answered by the proxy: the end of the dropped body (trailers change nothing).
            if trailers != nil { return }
        }
        guard !exchange.state.isRecorded else { return }
        exchange.state.requestEnded()
        finishIfComplete()
    }
}
