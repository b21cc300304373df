import ATSPolicy
import ATSTLS
import Foundation

/// Requests: a request the owner accepted decided by the policy and answered, upgraded or forwarded; its body and
/// end as parts for the upstream, encoded for whichever upstream it turns out to be.
extension ExchangeLeg {
    /// A request the owner's client side has accepted (target checked, not for the proxy itself).
    struct Request {
        /// The head as the client sent it (origin-form inside a tunnel, absolute-form from a proxy client).
        let head: HTTPRequestHead
        let framing: HTTPBodyFraming
        /// The request's URL and target.
        let url: String
        let target: RequestTarget
        /// The task number (N of `Task <UUID>.<N>`).
        let number: Int
        let clientKeepAlive: Bool
        /// Traffic to a host the host filter leaves alone: forwarded as it is, never judged nor recorded.
        let leftAlone: Bool
    }

    /// Starts an exchange for `request` (the leg must be between exchanges): answers it when the policy blocks
    /// it, otherwise forwards its head and waits for its body parts (`requestBody`, `requestEnd`).
    mutating func start(_ request: Request) {
        precondition(exchange == nil && carriesExchanges, "ExchangeLeg.start: \(mode), exchange in flight")
        timers.endIdlePeriod()
        lastNumber = request.number
        let head = request.head
        let source = requestSource(head)
        let (decision, policy) = decide(request.target, source: source)
        let exchange = Exchange(
            number: request.number, start: now, method: head.method, url: request.url, target: request.target,
            decision: decision, policy: policy, source: source, requestHeaders: head.headers,
            state: .forwarding(request: .receiving, response: .awaitingResponse),
            clientKeepAlive: request.clientKeepAlive, requestEncoder: HTTP1RequestEncoder(framing: request.framing),
            rule: decision.ruleSummary)
        exchange.requestFraming = request.framing
        exchange.isUpgradeRequest =
            head.headers.contains("Upgrade") && head.headers.hasListElement("Connection", "upgrade")
        exchange.requestHasBody = request.framing != .none
        exchange.clientIsHTTP10 = !head.version.isAtLeastHTTP11
        let target = request.target
        if request.leftAlone {
            exchange.unrecorded = true
            startForward(exchange, head: head, host: target.host, port: target.port, requirements: nil)
            return
        }
        switch decision.outcome {
        case .cleartextBlocked:
            switch (services.settings.mode, services.settings.cleartext) {
            case (.report, _):
                exchange.outcome.result = .reported
                exchange.outcome.errorCode = NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue
                exchange.outcome.fix = decision.fix
                exchange.outcome.consoleLines = cleartextConsole(decision, number: exchange.number)
                startForward(exchange, head: head, host: target.host, port: target.port, requirements: nil)
            case (.enforce, .upgrade):
                upgradeCleartext(exchange, head: head)
            case (.enforce, .block):
                exchange.outcome.result = .blockedCleartext
                exchange.outcome.errorCode = NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue
                exchange.outcome.fix = decision.fix
                exchange.outcome.consoleLines = cleartextConsole(decision, number: exchange.number)
                let response = ATSErrorResponse.cleartextBlocked(decision, consoleLines: exchange.outcome.consoleLines)
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

    /// Which client the request is from, as the policy's source rules see it.
    func requestSource(_ head: HTTPRequestHead) -> RequestSource {
        switch services.settings.source {
        case .auto: RequestSourceDetector.detect(userAgent: head.headers.first("User-Agent"))
        case .fixed(let source): source
        }
    }

    /// `--cleartext upgrade`: fetch the https:// twin under that host's ATS requirements.
    mutating func upgradeCleartext(_ original: Exchange, head: HTTPRequestHead) {
        let port = services.settings.upgradePort
        let host = RequestTarget.uriHost(original.target.host)
        var path = "/"
        if case .absolute(_, _, let pathAndQuery) = head.target, !pathAndQuery.isEmpty { path = pathAndQuery }
        let url = "https://\(host)\(port == 443 ? "" : ":\(port)")\(path.hasPrefix("/") ? path : "/" + path)"
        guard let target = try? RequestTarget(parsing: url) else {
            sendLocal(
                LocalResponse.text(status: 400, reason: "Bad Request", "ats-proxy: cannot upgrade \(original.url)\n"),
                keepAlive: false)
            shutDown()
            return
        }
        let (decision, policy) = decide(target, source: original.source)
        let exchange = Exchange(
            number: original.number, start: original.start, method: original.method, url: url, target: target,
            decision: decision, policy: policy, source: original.source, requestHeaders: original.requestHeaders,
            state: .forwarding(request: .receiving, response: .awaitingResponse),
            clientKeepAlive: original.clientKeepAlive, requestEncoder: original.requestEncoder,
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

    /// Makes `exchange` current and sends its head towards an upstream for `host:port` under `requirements`: the
    /// current one when it has the same key, otherwise a pooled or new one.
    mutating func startForward(
        _ exchange: Exchange, head: HTTPRequestHead, host: String, port: Int, requirements: TLSRequirements?
    ) {
        exchange.attempt.requirements = requirements
        if let requirements, !requirements.isSatisfiable, services.settings.mode == .enforce {
            self.exchange = exchange
            let verdict = UpstreamVerdict.unsatisfiable(requirements: requirements, url: exchange.url, host: host)
            failExchange(verdict: verdict)
            return
        }
        let permissive = services.settings.mode == .report && requirements != nil
        // Upgrades and connection-oriented authentication need a connection of their own: HTTP/1.1 only, never
        // a stream of a shared HTTP/2 link (servers refuse NTLM over h2 with HTTP_1_1_REQUIRED); so do origins
        // that already answered this leg with HTTP_1_1_REQUIRED.
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
            exchange.response.upstreamKeepAlive = false
        }
        exchange.response.parser.requestSent(method: head.method)
        exchange.attempt.key = key
        if Self.idempotentMethods.contains(head.method) && !exchange.requestHasBody && !exchange.isUpgradeRequest {
            exchange.attempt.retryHead = upstreamHead
        }
        // One key comparison here per request (it compares the TLS requirements, cipher lists and all); UpstreamLeg
        // compares again only when a connection is opened or adopted.
        var sameUpstream = false
        if case .ready(let current, _) = upstream.state, current == key { sameUpstream = true }
        if sameUpstream {
            exchange.outcome.tls = upstream.facts
            exchange.attempt.onReusedUpstream = true
        }
        self.exchange = exchange
        switch upstream.state {
        case .ready where sameUpstream:
            upstream.idle = false
        case .none:
            upstream.pendingBytes = []
            upstream.pendingParts = []
            openUpstream(key)
        case .connecting, .handshaking, .ready:
            releaseOrCloseUpstream()
            upstream.pendingBytes = []
            upstream.pendingParts = []
            openUpstream(key)
        }
        sendRequestPart(.request(upstreamHead, body: exchange.requestFraming))
    }

    /// Asks for an upstream connection; a `reusable` one may come from the loop's pool (same key only).
    mutating func openUpstream(_ key: UpstreamKey, reusable: Bool = true) {
        upstream.connect(key)
        exchange?.timings.connectStart = now
        commands.append(
            .connectUpstream(host: key.host, port: key.port, reuse: reusable && !key.permissive ? key : nil))
    }

    /// The pool handed over an established connection (or an HTTP/2 channel) for the key asked for.
    mutating func upstreamReused(_ lease: UpstreamLease) {
        guard case .connecting(let key) = upstream.state, key == lease.key else {
            // Not waiting for it any more: give it straight back.
            commands.append(.releaseUpstream(lease))
            return
        }
        upstream.adopt(lease)
        exchange?.outcome.tls = lease.facts
        exchange?.attempt.onReusedUpstream = true
        flushPendingUpstream()
    }

    /// A piece of the current request's body: counted, captured, and forwarded unless the proxy answered the
    /// request itself. A body longer than its Content-Length is a bad request that ends the client connection.
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
                sendLocal(
                    LocalResponse.text(
                        status: 400, reason: "Bad Request", "ats-proxy: request body longer than declared\n"),
                    keepAlive: false)
                shutDown()
                return
            }
            sendRequestPart(.body(slice))
        }
    }

    /// The end of the current request (with `trailers`, which finish the body; the message end follows them).
    /// Returns false when there is no current exchange (the owner's own answers have no leg-side end).
    @discardableResult
    mutating func requestEnd(trailers: HTTPFields?) -> Bool {
        guard let exchange else { return false }
        switch exchange.state {
        case .probing:
            // The CONNECT's own message end: the CONNECT is the probe's whole request.
            return true
        case .forwarding(let request, _):
            // Trailers, when there are any, finish the body; the message end after them ends the request.
            if let trailers {
                if request == .receiving {
                    exchange.state.requestTrailersForwarded()
                    sendRequestPart(.trailers(trailers))
                }
                return true
            }
            sendRequestPart(.messageEnd)
            guard self.exchange === exchange else { return true }
        case .answeredLocally, .recorded:
            // Answered by the proxy: the end of the dropped body (trailers change nothing).
            if trailers != nil { return true }
        }
        guard !exchange.state.isRecorded else { return true }
        exchange.state.requestEnded()
        finishIfComplete()
        return true
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
}
