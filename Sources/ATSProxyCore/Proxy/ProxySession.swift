import ATSPolicy
import ATSTLS
import Foundation

/// The state machine of one client connection to the proxy (sans-io): it parses HTTP/1.1 from
/// the client, decides each request with the ATS policy, answers blocked loads itself, runs TLS
/// with the client (minted leaf) and with the upstream (requirements from the decision), judges
/// the upstream handshake, and relays messages. It never touches a socket or a clock: the driver
/// feeds `ProxyEvent`s with the current time and executes the returned `ProxyCommand`s in order.
///
/// Not thread-safe: one driver owns it on one serial queue. It owns its TLS engines.
public struct ProxySession {
    /// What the client connection is doing.
    enum Phase {
        /// Reading HTTP/1.1 requests (cleartext, or decrypted inside an intercepted tunnel).
        case http
        /// CONNECT answered with 200; the TLS handshake with the client is in progress.
        case clientHandshake
        /// CONNECT to a passthrough host: probing the upstream before answering.
        case passthroughProbe(host: String, port: Int)
        /// Probe passed; opening the raw tunnel connection.
        case passthroughConnecting(host: String, port: Int)
        /// Bytes relayed both ways without parsing (passthrough tunnel, or after 101).
        case relay
        /// The intercepted client negotiated HTTP/2: `h2` owns the streams, one per request.
        case h2
        /// The connection is being closed; further events are ignored.
        case closed
    }

    /// What the upstream leg is doing.
    enum Upstream {
        /// No upstream connection.
        case none
        /// TCP connect in progress.
        case connecting(UpstreamKey)
        /// TCP open; TLS handshake in progress.
        case handshaking(UpstreamKey, TLSConnection)
        /// Ready for requests (TLS established when the key has requirements).
        case ready(UpstreamKey, TLSConnection?)
    }

    typealias UpstreamKey = ATSProxyCore.UpstreamKey

    /// What the current exchange does with the upstream.
    enum ExchangeKind {
        /// Forwarded to the origin.
        case forward
        /// Answered by the proxy itself; any request body is discarded.
        case local
        /// The TLS probe of a passthrough CONNECT.
        case probe
    }

    /// One request/response exchange. A class, so the session mutates the one it holds in place: a struct of
    /// this size was copied (and its parser's buffer retained twice, then copied on write) on every event.
    /// Owned by the session that created it; never shared with another session.
    final class Exchange {
        let number: Int
        let start: Date
        let method: String
        let url: String
        let target: RequestTarget
        let decision: ATSDecision
        let source: RequestSource
        let requestHeaders: HTTP1Headers
        var kind: ExchangeKind
        var clientKeepAlive: Bool
        var requestWriter: HTTP1BodyWriter
        /// How the client framed the request body: the framing of the request head part sent upstream.
        var requestFraming: HTTP1BodyFraming = .none
        /// Request body bytes passed on so far (checked against a declared Content-Length).
        var requestBodyForwarded = 0
        /// The HTTP/1.1 encoding of the request body was finished (last chunk, trailers) for the current upstream.
        var requestEncodingFinished = false
        var requestDone = false
        /// The client's request end (or its trailers) was passed on upstream; `requestEncodingFinished` tracks the
        /// HTTP/1.1 writer.
        var requestBodyFinished = false
        var responseParser = HTTP1Parser(role: .response)
        var responseWriter: HTTP1BodyWriter?
        var responseStarted = false
        var responseDone = false
        var responseStatus: Int?
        var responseHeaders = HTTP1Headers()
        var upstreamKeepAlive = true
        var bytesFromClient = 0
        var bytesToClient = 0
        var tls: [String: String]?
        var result: RequestRecord.Result = .completed
        var errorCode: Int?
        var streamError: String?
        var rule: String
        var fix: String?
        var consoleLines: [String] = []
        var isUpgradeRequest = false
        /// An HTTP/1.0 client cannot read chunked bodies: they are de-chunked and end with close.
        var clientIsHTTP10 = false
        /// Whether the request carries a body (one not yet received blocks keep-alive after a local answer).
        var requestHasBody = false
        /// The requirements the upstream is judged against (nil for cleartext).
        var requirements: TLSRequirements?
        /// The upstream the request was sent for.
        var upstreamKey: UpstreamKey?
        /// The request head as sent upstream, kept while the request may be retried once on another
        /// connection (a fresh one after a lost reused one, or an HTTP/1.1 one after HTTP_1_1_REQUIRED): an
        /// idempotent request without a body that is not an upgrade (RFC 9110 §9.2.2). Nil otherwise, and
        /// once it was retried.
        var retryHead: HTTP1RequestHead?
        /// The upstream carrying the request was reused (kept alive, or from the pool), not opened for it.
        var onReusedUpstream = false
        /// Some of the response arrived (after that a lost connection is never retried).
        var responseBytesSeen = false
        /// The request was sent again on another connection (logged with the record).
        var retried = false
        /// Traffic to a host the host filter leaves alone: forwarded, never logged as a request.
        var unrecorded = false
        /// The request's Authorization names NTLM or Negotiate (`namesConnectionAuthentication`).
        var authenticatesConnection = false
        /// When the upstream phases ended (reported only with `ProxySettings.detailedRecords`).
        var timings = PhaseTimes()
        /// The first bytes of each body (`ProxySettings.captureBodyLimit`; empty otherwise).
        var bodies = CapturedBodies()
        /// Its record was written (`logExchange`): every exchange ends in exactly one.
        var recorded = false

        init(
            number: Int, start: Date, method: String, url: String, target: RequestTarget, decision: ATSDecision,
            source: RequestSource, requestHeaders: HTTP1Headers, kind: ExchangeKind, clientKeepAlive: Bool,
            requestWriter: HTTP1BodyWriter, rule: String
        ) {
            self.number = number
            self.start = start
            self.method = method
            self.url = url
            self.target = target
            self.decision = decision
            self.source = source
            self.requestHeaders = requestHeaders
            self.kind = kind
            self.clientKeepAlive = clientKeepAlive
            self.requestWriter = requestWriter
            self.rule = rule
        }
    }

    /// Methods a lost connection may repeat (RFC 9110 §9.2.2), when the request has no body.
    static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]

    /// An origin as upstream keys name it: host and port, whatever the TLS requirements.
    struct OriginAuthority: Hashable {
        let host: String
        let port: Int
    }

    public let services: ProxyServices
    public let clientAddress: String
    /// N of `Connection N:` in console lines.
    public let connectionNumber: Int
    private(set) var taskUUID = TaskUUIDs.next()
    /// `<UUID>>.<` of every task ID of this connection, formatted once (uuidString formats with vfprintf).
    private(set) var taskIDPrefix: String
    /// Set for the per-stream sessions of an HTTP/2 client (`HTTP2Frontend`): requests arrive parsed, already
    /// inside the intercepted tunnel, and what the session writes to the client is re-framed as HTTP/2.
    var isStreamSession = false
    /// The client-side protocol recorded for this session's requests.
    var clientProtocol = "http/1.1"
    /// The HTTP/2 side of an intercepted tunnel whose client negotiated h2.
    var h2: HTTP2Frontend?
    var requestCount = 0
    var phase: Phase = .http
    var parser = HTTP1Parser(role: .request)
    var clientTLS: TLSConnection?
    /// The CONNECT authority of an intercepted tunnel.
    var tunnel: (host: String, port: Int)?
    /// The tunnel's origin as a target (URL `https://host[:port]/`), parsed once at CONNECT: every
    /// request inside the tunnel goes there, so only its URL changes from request to request.
    var tunnelTarget: RequestTarget?
    /// `tunnelTarget`'s URL without the final "/": what the paths of requests in the tunnel follow.
    var tunnelOrigin = ""
    var exchange: Exchange?
    var upstream: Upstream = .none
    /// Plaintext waiting for the upstream to become ready.
    var pendingUpstream: [UInt8] = []
    /// Request parts of the current exchange waiting for the upstream to be ready: they are encoded for it (HTTP/1.1
    /// text, or handed to an HTTP/2 channel as they are) only once it is known which one it is.
    var pendingParts: [HTTP1Event] = []
    /// Plaintext for the client's TLS engine (`sendToClient`, `writeToClient`), sealed by `flushClientTLS` once
    /// the event is handled or before anything that must follow it: a response head and its small body leave as
    /// one record, not one record each.
    var clientPlain: [UInt8] = []
    /// Storage for parser events, reused from feed to feed (`takeEventList`).
    var eventList: [HTTP1Event] = []
    /// TLS facts of the current upstream connection (recorded on every request it carries).
    var upstreamFacts: [String: String]?
    /// `http/1.1`, or `h2` when the upstream is a channel of a shared HTTP/2 link.
    var upstreamProtocol = "http/1.1"
    /// Whether the current upstream may go back to the loop's pool when this session is done with it.
    var upstreamShareable = false
    /// The current upstream is ready and carries no exchange.
    var upstreamIdle = false
    var clientReadsPaused = false
    var headerTimerRunning = false
    /// Seconds of the current idle period (between requests) whose timer stages have fired.
    var idleElapsed: Double = 0
    /// This idle period's stages that have run: the TLS engines freed their record buffers
    /// (`bufferLinger`); the upstream went back to the pool (`upstreamLinger`).
    var idleBuffersReleased = false
    var idleUpstreamReleased = false
    /// During an exchange: no bytes moved for `bufferLinger` (an origin thinking, a long poll), so the TLS
    /// engines freed their record buffers; the exchange timer runs on for the rest of `exchangeTimeout`.
    /// Cleared when bytes move again.
    var quietBuffersReleased = false
    /// Set by `drain`: close as soon as the current exchange ends.
    var draining = false
    /// Origins that reset a request's HTTP/2 stream with HTTP_1_1_REQUIRED: for the rest of this session every
    /// request to them asks for an HTTP/1.1-only upstream (`UpstreamKey.http1Only`), as browsers remember it.
    /// Learned per session, never shared: each lane of an HTTP/2 client learns it for itself (and keeps it while
    /// it serves later streams).
    var http11Origins: Set<OriginAuthority> = []
    /// This connection's last decision, what it was made for and under which policy generation: the requests
    /// of a tunnel all go to one origin, so nearly all of them reuse it without the policy store's locks.
    var lastDecision: (generation: Int, key: DecisionCache.Key, decision: ATSDecision)?
    var commands: [ProxyCommand] = []
    var now = Date(timeIntervalSince1970: 0)

    public init(services: ProxyServices, clientAddress: String, connectionNumber: Int) {
        self.services = services
        self.clientAddress = clientAddress
        self.connectionNumber = connectionNumber
        taskIDPrefix = taskUUID.uuidString + "."
    }

    /// Commands to run right after the connection is accepted (arms the idle timer).
    public mutating func start() -> [ProxyCommand] {
        [.armTimer(seconds: services.settings.idleTimeout)]
    }

    /// A per-stream session of an HTTP/2 client of `parent` (same task UUID, tunnel and client).
    init(streamOf parent: ProxySession) {
        self.init(
            services: parent.services, clientAddress: parent.clientAddress, connectionNumber: parent.connectionNumber)
        taskUUID = parent.taskUUID
        taskIDPrefix = parent.taskIDPrefix
        tunnel = parent.tunnel
        tunnelTarget = parent.tunnelTarget
        tunnelOrigin = parent.tunnelOrigin
        isStreamSession = true
        clientProtocol = "h2"
    }

    /// A stream session between requests, with nothing in flight (its upstream may be kept for reuse).
    var isIdleForReuse: Bool {
        guard exchange == nil, pendingUpstream.isEmpty else { return false }
        if case .http = phase { return true }
        return false
    }

    /// Whether requests arrive from inside an intercepted tunnel (decrypted, origin-form).
    var inTunnel: Bool { clientTLS != nil || isStreamSession }

    /// Handles one event at time `now` and returns what the driver must do, in order.
    public mutating func handle(_ event: ProxyEvent, now: Date) -> [ProxyCommand] {
        var out: [ProxyCommand] = []
        handle(event, now: now, into: &out)
        return out
    }

    /// `handle(_:now:)` appending to `out`, an empty list whose storage the caller keeps from event to
    /// event: no command list is allocated per event.
    public mutating func handle(_ event: ProxyEvent, now: Date, into out: inout [ProxyCommand]) {
        swap(&commands, &out)
        run(now: now) { $0.dispatch(event) }
        swap(&commands, &out)
    }

    /// Feeds an HTTP/2 stream's request, already parsed, as request number `number` (stream sessions only).
    mutating func handleStreamRequest(_ events: [HTTP1Event], number: Int?, now: Date) -> [ProxyCommand] {
        run(now: now) { session in
            if let number { session.requestCount = number - 1 }
            session.process(events)
        }
        let out = commands
        commands = []
        return out
    }

    /// Runs `body` for one event and what follows every event (sealing client plaintext, the timer),
    /// appending to `commands`, which the caller empties.
    private mutating func run(now: Date, _ body: (inout ProxySession) -> Void) {
        self.now = now
        if case .closed = phase { return }
        body(&self)
        if case .closed = phase {
        } else {
            if let tls = clientTLS { flushClientTLS(tls) }
            updateTimer()
        }
    }

    private mutating func dispatch(_ event: ProxyEvent) {
        switch event {
        case .clientBytes(let bytes):
            quietBuffersReleased = false
            clientBytes(bytes)
        case .clientEOF: clientEOF()
        case .upstreamConnected: upstreamConnected()
        case .upstreamReused(let lease): upstreamReused(lease)
        case .upstreamConnectFailed(let code, let detail): upstreamConnectFailed(code, detail: detail)
        case .upstreamParts(let parts): upstreamParts(parts)
        case .upstreamBytes(let bytes):
            quietBuffersReleased = false
            upstreamBytes(bytes)
        case .upstreamEOF: upstreamEOF(reset: false)
        case .upstreamReset: upstreamEOF(reset: true)
        case .upstreamRequiresHTTP11: upstreamRequiresHTTP11()
        case .timerFired: timerFired()
        case .clientGone: clientGone()
        case .drain: drain()
        case .stream(let lane, let inner): streamEvent(lane: lane, inner)
        case .upstreamWritable: break  // Lanes only (see the event); their frontend takes it.
        }
    }

    /// Whether the session wants the driver to stop reading from the client.
    public var wantsClientReadsPaused: Bool { clientReadsPaused }

    // MARK: - Client input

    private mutating func clientBytes(_ bytes: [UInt8]) {
        switch phase {
        case .http:
            if let tls = clientTLS {
                tls.receive(bytes)
                drainClientTLS(tls)
            } else {
                feedParser(bytes)
            }
        case .clientHandshake:
            guard let tls = clientTLS else { return close() }
            tls.receive(bytes)
            continueClientHandshake(tls)
        case .relay:
            if let tls = clientTLS {
                tls.receive(bytes)
                drainClientTLS(tls)
            } else {
                sendToUpstream(bytes)
            }
        case .passthroughProbe, .passthroughConnecting:
            pendingUpstream.append(contentsOf: bytes)
        case .h2:
            guard let tls = clientTLS else { return close() }
            tls.receive(bytes)
            drainClientTLS(tls)
        case .closed:
            break
        }
    }

    private mutating func continueClientHandshake(_ tls: TLSConnection) {
        let progress = tls.handshake()
        flushClientTLS(tls)
        switch progress {
        case .needsInput:
            break
        case .complete:
            if tls.negotiatedALPN == "h2" {
                startHTTP2()
            } else {
                phase = .http
            }
            drainClientTLS(tls)
        case .failed(let failure):
            logClientHandshakeFailure(failure)
            close()
        }
    }

    /// Reads every decrypted byte the client TLS engine holds and processes it.
    private mutating func drainClientTLS(_ tls: TLSConnection) {
        while true {
            switch tls.read() {
            case .data(let plain):
                switch phase {
                case .relay: sendToUpstream(plain)
                case .h2: http2Bytes(plain)
                case .http, .clientHandshake, .passthroughProbe, .passthroughConnecting, .closed: feedParser(plain)
                }
                if case .closed = phase { return }
            case .needsInput:
                flushClientTLS(tls)
                return
            case .closed:
                clientEOF()
                return
            case .failed:
                close()
                return
            }
        }
    }

    private mutating func feedParser(_ bytes: [UInt8]) {
        var events = takeEventList()
        parser.feed(bytes[...], into: &events)
        process(events)
        giveBackEventList(&events)
    }

    /// The parser event list kept between feeds (taken while in use: a feed nested inside `process`
    /// finds it gone and makes a list of its own).
    private mutating func takeEventList() -> [HTTP1Event] {
        var events: [HTTP1Event] = []
        swap(&events, &eventList)
        return events
    }

    private mutating func giveBackEventList(_ events: inout [HTTP1Event]) {
        events.removeAll(keepingCapacity: true)
        swap(&events, &eventList)
    }

    private mutating func process(_ events: [HTTP1Event]) {
        for event in events {
            if case .closed = phase { return }
            switch event {
            case .request(let head, let framing):
                requestHead(head, framing: framing)
            case .response:
                close()
            case .body(let slice):
                requestBody(slice)
            case .trailers(let trailers):
                requestEnd(trailers: trailers)
            case .messageEnd:
                requestEnd(trailers: nil)
            case .upgraded(let remaining):
                if case .clientHandshake = phase, let tls = clientTLS {
                    tls.receive(Array(remaining))
                    continueClientHandshake(tls)
                } else if !remaining.isEmpty {
                    pendingUpstream.append(contentsOf: remaining)
                }
            case .failed(let error):
                answerLocally(
                    status: error.status, reason: error.reason, body: "ats-proxy: \(error.reason)\n", keepAlive: false)
                close()
            }
        }
    }

    // MARK: - Requests

    private mutating func requestHead(_ head: HTTP1RequestHead, framing: HTTP1BodyFraming) {
        // A new request ends the idle period, whether or not it becomes an exchange (a local answer does not).
        endIdlePeriod()
        if head.method == "CONNECT" {
            // CONNECT is not a task in CFNetwork's numbering; the requests inside the tunnel are.
            connect(head)
            return
        }
        requestCount += 1
        let clientKeepAlive = HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        if !isStreamSession, let tunnel {
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
        if inTunnel, let tunnelTarget {
            // The CONNECT target was parsed and checked against the proxy's own addresses already.
            target = tunnelTarget.withURL(url)
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
        let decision = decide(target, source: source)
        let exchange = Exchange(
            number: requestCount, start: now, method: head.method, url: url, target: target, decision: decision,
            source: source, requestHeaders: head.headers, kind: .forward, clientKeepAlive: clientKeepAlive,
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
                exchange.kind = .local
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

    /// The policy's decision for `target`, reusing the last one when it is for the same scheme, host, port
    /// and source under the same policy.
    private mutating func decide(_ target: RequestTarget, source: RequestSource) -> ATSDecision {
        let generation = services.policy.generation
        let key = DecisionCache.Key(target, source: source)
        if let last = lastDecision, last.generation == generation, last.key == key {
            return last.decision.retargeted(target)
        }
        let decision = services.policy.snapshot.decide(target, source: source)
        lastDecision = (generation, key, decision)
        return decision
    }

    private func tunnelURL(path: String) -> String {
        guard tunnelTarget != nil else { return "https://invalid/" }
        var url = tunnelOrigin
        if !(path.isEmpty || path.utf8.first == UInt8(ascii: "/")) { url += "/" }
        url += path
        return url
    }

    private func requestSource(_ head: HTTP1RequestHead) -> RequestSource {
        switch services.settings.source {
        case .auto: RequestSourceDetector.detect(userAgent: head.headers.first("User-Agent"))
        case .fixed(let source): source
        }
    }

    private func isSelf(host: String, port: Int) -> Bool {
        // Any spelling of an address the proxy listens on: `127.1`, `0x7f000001`, `[::ffff:127.0.0.1]`.
        var canonical = RequestTarget.canonicalHost(host)
        if let mapped = IPAddress(parsing: canonical)?.mappedIPv4 { canonical = mapped.description }
        return services.settings.selfAuthorities.contains("\(RequestTarget.uriHost(canonical)):\(port)")
    }

    /// `--cleartext upgrade`: fetch the https:// twin under that host's ATS requirements.
    private mutating func upgradeCleartext(_ original: Exchange, head: HTTP1RequestHead) {
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
        let decision = decide(target, source: original.source)
        let exchange = Exchange(
            number: original.number, start: original.start, method: original.method, url: url, target: target,
            decision: decision, source: original.source, requestHeaders: original.requestHeaders, kind: .forward,
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

    private mutating func startForward(
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
    private mutating func openUpstream(_ key: UpstreamKey, reusable: Bool = true) {
        upstream = .connecting(key)
        upstreamFacts = nil
        upstreamProtocol = "http/1.1"
        upstreamShareable = false
        upstreamIdle = false
        exchange?.timings.connectStart = now
        commands.append(
            .connectUpstream(host: key.host, port: key.port, reuse: reusable && !key.permissive ? key : nil))
    }

    /// The pool handed over an established connection (or an HTTP/2 channel) for the key asked for.
    private mutating func upstreamReused(_ lease: UpstreamLease) {
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

    private mutating func requestBody(_ slice: ArraySlice<UInt8>) {
        guard let exchange else { return }
        exchange.bytesFromClient += slice.count
        if services.settings.captureBodyLimit > 0 { exchange.bodies.request(slice, services.settings.captureBodyLimit) }
        switch exchange.kind {
        case .local, .probe:
            break  // Answered locally or a probe: the body is counted and dropped.
        case .forward:
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

    private mutating func requestEnd(trailers: HTTP1Headers?) {
        guard let exchange else {
            // A CONNECT's messageEnd, or the end of a message answered locally without exchange.
            resumeParserIfIdle()
            return
        }
        if exchange.kind == .forward && !exchange.requestDone {
            // Trailers, when there are any, finish the body; the message end after them ends the request.
            if let trailers {
                if !exchange.requestBodyFinished {
                    exchange.requestBodyFinished = true
                    sendRequestPart(.trailers(trailers))
                }
                return
            }
            exchange.requestBodyFinished = true
            sendRequestPart(.messageEnd)
            guard self.exchange != nil else { return }
        }
        if trailers != nil { return }
        exchange.requestDone = true
        finishIfComplete()
    }

    // MARK: - CONNECT

    private mutating func connect(_ head: HTTP1RequestHead) {
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
        let decision = decide(target, source: source)
        let passthrough =
            services.settings.isPassthroughHost(host)
            || (services.settings.passthroughPinnedDomains && decision.requirements.pins != nil)
        if passthrough {
            let exchange = Exchange(
                number: requestCount + 1, start: now, method: "CONNECT", url: url, target: target, decision: decision,
                source: source, requestHeaders: head.headers, kind: .probe, clientKeepAlive: false,
                requestWriter: HTTP1BodyWriter(framing: .none),
                rule: "passthrough tunnel (\(decision.requirements.pins != nil ? "pinned domain" : "--passthrough"))")
            exchange.requestDone = true
            exchange.requirements = decision.requirements
            self.exchange = exchange
            phase = .passthroughProbe(host: host, port: port)
            openUpstream(
                UpstreamKey(
                    host: host, port: port, requirements: decision.requirements,
                    permissive: services.settings.mode == .report), reusable: false)
            return
        }
        do {
            clientTLS = try services.serverTLS.makeConnection(connectHost: host)
        } catch {
            answerLocally(status: 500, reason: "Internal Server Error", body: "ats-proxy: \(error)\n", keepAlive: false)
            close()
            return
        }
        tunnel = (host, port)
        tunnelTarget = target
        tunnelOrigin = String(url.utf8.dropLast())!
        phase = .clientHandshake
        commands.append(.writeToClient(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)))
        parser = HTTP1Parser(role: .request)
    }

    // MARK: - Upstream

    private mutating func upstreamConnected() {
        exchange?.timings.connected = now
        switch upstream {
        case .connecting(let key):
            if case .passthroughConnecting = phase {
                upstream = .ready(key, nil)
                finishPassthroughSetup()
                return
            }
            guard let requirements = key.requirements else {
                upstream = .ready(key, nil)
                upstreamShareable = true
                flushPendingUpstream()
                return
            }
            do {
                let offered = key.permissive ? Self.permissive(requirements) : requirements
                let tls = try services.upstreamTLS.makeConnection(
                    requirements: offered, host: key.host, port: key.port, alpn: key.http1Only ? ["http/1.1"] : nil)
                upstream = .handshaking(key, tls)
                continueUpstreamHandshake(key, tls)
            } catch {
                let verdict = UpstreamVerdict.failed(
                    .transport(.other("cannot create the upstream TLS engine: \(error)")),
                    requirements: requirements, url: exchange?.url ?? "", host: key.host)
                failExchange(verdict: verdict)
            }
        case .none, .handshaking, .ready:
            break
        }
    }

    private mutating func upstreamConnectFailed(_ code: NSURLErrorCode, detail: String) {
        guard case .connecting(let key) = upstream else { return }
        upstream = .none
        let transport: TransportFailure
        switch code {
        case .cannotFindHost: transport = .nameNotResolved(key.host)
        case .cannotConnectToHost: transport = .refused
        case .timedOut: transport = .timedOut
        case .networkConnectionLost: transport = .reset
        case .badServerResponse, .appTransportSecurityRequiresSecureConnection, .secureConnectionFailed,
            .serverCertificateHasBadDate,
            .serverCertificateUntrusted, .serverCertificateHasUnknownRoot, .serverCertificateNotYetValid,
            .clientCertificateRejected, .clientCertificateRequired:
            transport = .other(detail)
        }
        let requirements = key.requirements ?? exchange?.decision.requirements ?? Self.cleartextRequirements
        let verdict = UpstreamVerdict.failed(
            .transport(transport), requirements: requirements, url: exchange?.url ?? "", host: key.host)
        failExchange(verdict: verdict)
    }

    private mutating func upstreamBytes(_ bytes: [UInt8]) {
        switch upstream {
        case .handshaking(let key, let tls):
            tls.receive(bytes)
            continueUpstreamHandshake(key, tls)
        case .ready(_, let tls):
            if let tls {
                tls.receive(bytes)
                drainUpstreamTLS(tls)
            } else {
                upstreamPlain(bytes)
            }
        case .none, .connecting:
            break
        }
    }

    private mutating func continueUpstreamHandshake(_ key: UpstreamKey, _ tls: TLSConnection) {
        let progress = tls.handshake()
        flushUpstreamTLS(tls)
        switch progress {
        case .needsInput:
            return
        case .failed(let failure):
            upstream = .none
            commands.append(.closeUpstream)
            let requirements = key.requirements ?? Self.cleartextRequirements
            failExchange(
                verdict: UpstreamVerdict.failed(
                    .handshake(failure), requirements: requirements, url: exchange?.url ?? "", host: key.host))
        case .complete:
            guard let requirements = key.requirements else { return }
            let summary = services.upstreamTLS.summarize(tls, host: key.host, time: now)
            let verdict = UpstreamVerdict.judging(
                summary, requirements: requirements, url: exchange?.url ?? "", host: key.host)
            exchange?.tls = Self.tlsFacts(summary, detailed: services.settings.detailedRecords)
            exchange?.timings.secured = now
            if verdict.isBlocked {
                let verdict = verdict.withFix(url: exchange?.url ?? "", evaluator: services.policy.snapshot.evaluator)
                if services.settings.mode == .report {
                    exchange?.result = .reported
                    exchange?.errorCode = verdict.error?.rawValue
                    exchange?.streamError = Self.pair(verdict)
                    exchange?.rule = verdict.rule
                    exchange?.fix = verdict.fix
                    let lines = verdict.consoleLines(
                        platform: services.policy.snapshot.evaluator.options.platform, context: consoleContext())
                    exchange?.consoleLines = lines
                } else {
                    upstream = .none
                    commands.append(.closeUpstream)
                    failExchange(verdict: verdict)
                    return
                }
            }
            if case .passthroughProbe(let host, let port) = phase {
                // The probe passed: drop it and open the raw tunnel.
                upstream = .none
                commands.append(.closeUpstream)
                phase = .passthroughConnecting(host: host, port: port)
                openUpstream(
                    UpstreamKey(host: host, port: port, requirements: nil, permissive: false), reusable: false)
                return
            }
            upstreamFacts = exchange?.tls
            upstreamShareable = !verdict.isBlocked && !key.permissive
            if tls.negotiatedALPN == "h2" {
                // The session keeps speaking HTTP/1.1; a shared link of the loop's pool speaks h2 for it.
                upstream = .ready(key, nil)
                upstreamProtocol = "h2"
                commands.append(
                    .promoteUpstream(
                        UpstreamLease(
                            key: key, tls: tls, facts: upstreamFacts, protocolName: "h2",
                            shareable: upstreamShareable)))
                flushPendingUpstream()
                return
            }
            upstream = .ready(key, tls)
            flushPendingUpstream()
            drainUpstreamTLS(tls)
        }
    }

    private mutating func drainUpstreamTLS(_ tls: TLSConnection) {
        while true {
            switch tls.read() {
            case .data(let plain):
                upstreamPlain(plain)
                if case .closed = phase { return }
            case .needsInput:
                flushUpstreamTLS(tls)
                return
            case .closed:
                upstreamEOF(reset: false)
                return
            case .failed:
                upstreamEOF(reset: true)
                return
            }
        }
    }

    private mutating func upstreamPlain(_ bytes: [UInt8]) {
        if case .relay = phase {
            sendToClient(bytes)
            return
        }
        guard let exchange else { return }
        if !exchange.responseBytesSeen { exchange.timings.firstByte = now }
        exchange.responseBytesSeen = true
        var events = takeEventList()
        exchange.responseParser.feed(bytes[...], into: &events)
        processResponse(events)
        giveBackEventList(&events)
    }

    /// Response parts from the upstream's HTTP/2 channel: the same events the HTTP/1.1 response parser reports,
    /// without text in between.
    private mutating func upstreamParts(_ parts: [HTTP1Event]) {
        guard case .http = phase, let exchange, upstreamIsChannel else { return }
        if !exchange.responseBytesSeen { exchange.timings.firstByte = now }
        exchange.responseBytesSeen = true
        processResponse(parts)
    }

    /// The response of the current exchange, part by part (from the HTTP/1.1 response parser or an HTTP/2
    /// channel), to the client: as HTTP/1.1 text for an HTTP/1.1 client, or as parts for the HTTP/2 frontend when
    /// this session is a stream's lane.
    private mutating func processResponse(_ events: [HTTP1Event]) {
        var pending = events[...]
        while let event = pending.popFirst() {
            guard let exchange else { return }
            if isStreamSession, relayPartToStream(event, exchange) { continue }
            switch event {
            case .response(var head, let framing):
                if upstreamIsChannel && head.reason.isEmpty {
                    // An HTTP/2 origin sends no reason phrase; an HTTP/1.1 client gets the standard one.
                    head.reason = HTTP1ReasonPhrase.standard(head.status)
                }
                if head.isInterim {
                    var bytes: [UInt8] = []
                    HTTP1Serializer.writeResponseHead(head, into: &bytes)
                    sendToClient(bytes)
                    continue
                }
                exchange.responseStarted = true
                exchange.responseStatus = head.status
                exchange.responseHeaders = head.headers
                if exchange.authenticatesConnection
                    || Self.namesConnectionAuthentication(head.headers.values("WWW-Authenticate"))
                {
                    // Connection-oriented authentication: this upstream belongs to this client from now on.
                    upstreamShareable = false
                }
                var clientHead = head
                var clientFraming = framing
                var bytes: [UInt8] = []
                if clientTLS != nil, case .contentLength(let length) = framing, length <= 16_384 {
                    // The head's buffer becomes the TLS plaintext and the body is appended to it: room for both.
                    bytes.reserveCapacity(512 + length)
                }
                if head.status == 101 {
                    clientHead.headers = HTTP1ProxyHeaders.removingHopByHop(
                        head.headers, options: HTTP1ProxyHeaders.Options(upgrading: true))
                    clientFraming = .tunnel
                    clientHead.version = .http11
                    HTTP1Serializer.writeResponseHead(clientHead, into: &bytes)
                } else {
                    if exchange.clientIsHTTP10 && (framing == .chunked || framing == .untilClose) {
                        // HTTP/1.0 knows no chunked coding: send the body raw and end it by closing.
                        exchange.clientKeepAlive = false
                    }
                    let dechunk = exchange.clientIsHTTP10 && framing == .chunked
                    let rechunk = framing == .untilClose && exchange.clientKeepAlive
                    // The hop-by-hop fields are skipped while the head is written: no copy of the field list.
                    let hopByHop = HTTP1ProxyHeaders.HopByHopFilter(
                        head.headers, options: HTTP1ProxyHeaders.Options(reframing: rechunk || dechunk))
                    var extra: [HTTP1Field] = []
                    if rechunk {
                        extra.append(HTTP1Field(name: "Transfer-Encoding", value: "chunked"))
                        clientFraming = .chunked
                    } else if dechunk {
                        clientFraming = .untilClose
                    }
                    if !upstreamIsChannel {
                        // An HTTP/2 channel's `.untilClose` ends with the stream, not the connection.
                        exchange.upstreamKeepAlive =
                            exchange.upstreamKeepAlive && framing != .untilClose
                            && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
                    }
                    if !exchange.requestDone { exchange.clientKeepAlive = false }
                    if !exchange.clientKeepAlive { extra.append(HTTP1Field(name: "Connection", value: "close")) }
                    if exchange.result == .reported {
                        extra += ATSErrorResponse.reportedFields(
                            errorCode: exchange.errorCode, streamError: exchange.streamError, rule: exchange.rule,
                            fix: exchange.fix)
                    }
                    clientHead.version = .http11
                    HTTP1Serializer.writeResponseHead(clientHead, dropping: hopByHop, appending: extra, into: &bytes)
                }
                exchange.responseWriter = HTTP1BodyWriter(framing: clientFraming)
                sendToClient(bytes)
            case .body(let slice):
                exchange.bytesToClient += slice.count
                if services.settings.captureBodyLimit > 0 {
                    exchange.bodies.response(slice, services.settings.captureBodyLimit)
                }
                writeToClient { try? exchange.responseWriter?.write(slice, into: &$0) }
            case .trailers(let trailers):
                writeToClient { try? exchange.responseWriter?.finish(trailers: trailers, into: &$0) }
                exchange.responseWriter = nil
            case .messageEnd:
                if !exchange.responseStarted {
                    // End of an interim (1xx) response: the final one follows. (A channel reports no end after
                    // an interim head.)
                    guard !upstreamIsChannel else { continue }
                    let more = exchange.responseParser.resume()
                    pending = (more + pending)[...]
                    continue
                }
                if var writer = exchange.responseWriter {
                    writeToClient { try? writer.finish(into: &$0) }
                    exchange.responseWriter = nil
                }
                exchange.responseDone = true
                finishIfComplete()
            case .upgraded(let remaining):
                // 101 Switching Protocols: relay raw bytes both ways from here on.
                exchange.responseDone = true
                exchange.requestDone = true
                logExchange()
                self.exchange = nil
                phase = .relay
                if parser.isPaused {
                    let held = parser.upgrade()
                    if !held.isEmpty { sendToUpstream(Array(held)) }
                }
                if !remaining.isEmpty { sendToClient(Array(remaining)) }
            case .request:
                closeUpstreamAndClient()
            case .failed(let error):
                if exchange.responseStarted {
                    closeUpstreamAndClient()
                } else {
                    upstream = .none
                    commands.append(.closeUpstream)
                    failWithBadResponse("the origin's response is not valid HTTP/1.1 (\(error.reason))")
                }
            }
        }
    }

    /// A lane's response goes to its HTTP/2 stream as parts (`ProxyCommand.respond`), never as HTTP/1.1 text:
    /// returns whether `event` was handled that way (everything but an upgrade, which no stream carries, and the
    /// parser's own failures). The bookkeeping is `processResponse`'s.
    private mutating func relayPartToStream(_ event: HTTP1Event, _ exchange: Exchange) -> Bool {
        switch event {
        case .response(var head, let framing):
            guard head.status != 101 else { return false }
            if !head.isInterim {
                exchange.responseStarted = true
                exchange.responseStatus = head.status
                exchange.responseHeaders = head.headers
            }
            // The stream's HEADERS carry no hop-by-hop field (RFC 9113 §8.2.2); most heads have none to drop.
            head.headers = HTTP1ProxyHeaders.removingHopByHop(head.headers)
            if head.isInterim {
                respondToStream(.response(head, body: framing))
                return true
            }
            if exchange.authenticatesConnection
                || Self.namesConnectionAuthentication(head.headers.values("WWW-Authenticate"))
            {
                upstreamShareable = false
            }
            if !upstreamIsChannel {
                exchange.upstreamKeepAlive =
                    exchange.upstreamKeepAlive && framing != .untilClose
                    && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
            }
            if !exchange.requestDone { exchange.clientKeepAlive = false }
            if exchange.result == .reported {
                // `--mode report`: the stream's answer says what would have failed, as an HTTP/1.1 client's does.
                head.headers.fields += ATSErrorResponse.reportedFields(
                    errorCode: exchange.errorCode, streamError: exchange.streamError, rule: exchange.rule,
                    fix: exchange.fix)
            }
            respondToStream(.response(head, body: framing))
            return true
        case .body(let slice):
            guard exchange.responseStarted else { return true }
            exchange.bytesToClient += slice.count
            if services.settings.captureBodyLimit > 0 {
                exchange.bodies.response(slice, services.settings.captureBodyLimit)
            }
            respondToStream(event)
            return true
        case .trailers:
            guard exchange.responseStarted else { return true }
            respondToStream(event)
            return true
        case .messageEnd:
            guard exchange.responseStarted else { return false }  // An interim response's end: the parser resumes.
            respondToStream(event)
            exchange.responseDone = true
            finishIfComplete()
            return true
        case .upgraded, .request, .failed:
            return false
        }
    }

    /// Appends a response part for the lane's stream, joining consecutive parts into one command.
    private mutating func respondToStream(_ part: HTTP1Event) {
        if case .respond(var parts)? = commands.last {
            commands.removeLast()
            parts.append(part)
            commands.append(.respond(parts))
        } else {
            commands.append(.respond([part]))
        }
    }

    private mutating func upstreamEOF(reset: Bool) {
        if case .relay = phase {
            upstream = .none
            close()
            return
        }
        if case .handshaking(let key, let tls) = upstream {
            // Closed mid-handshake: let the engine say so (closed without alert, -9816).
            tls.receiveEOF()
            continueUpstreamHandshake(key, tls)
            if case .handshaking = upstream {
                upstream = .none
                commands.append(.closeUpstream)
            }
            return
        }
        if case .none = upstream {
        } else {
            commands.append(.closeUpstream)
        }
        upstream = .none
        guard let exchange, exchange.kind == .forward else { return }
        if exchange.responseStarted {
            let events = exchange.responseParser.inputClosed()
            exchange.upstreamKeepAlive = false
            if events.contains(where: { if case .failed = $0 { true } else { false } }) || events.isEmpty {
                if !(self.exchange?.responseDone ?? true) { closeUpstreamAndClient() }
                return
            }
            processResponse(events)
        } else if exchange.onReusedUpstream, !exchange.responseBytesSeen, let head = exchange.retryHead,
            let key = exchange.upstreamKey
        {
            // A reused connection the origin closed as the request arrived (its keep-alive timeout): like
            // CFNetwork, send the idempotent request once more, on a connection opened for it.
            sendAgain(exchange, head: head, on: key, reusable: false)
        } else {
            let requirements = exchange.requirements ?? Self.cleartextRequirements
            failExchange(
                verdict: UpstreamVerdict.failed(
                    .transport(.reset), requirements: requirements, url: exchange.url, host: exchange.target.host))
        }
    }

    /// The origin reset the request's HTTP/2 stream with HTTP_1_1_REQUIRED (RFC 9113 §8.7): it is remembered for
    /// the rest of the session, and a request that can be replayed (`retryHead`) and of which nothing came back
    /// is sent once more on an HTTP/1.1-only upstream for the same origin and decision, which the pool may hand
    /// over. Anything else (a body, a response under way, a request sent once more already) is a reset.
    private mutating func upstreamRequiresHTTP11() {
        guard case .http = phase, case .ready(let key, _) = upstream, !key.http1Only else {
            return upstreamEOF(reset: true)
        }
        http11Origins.insert(OriginAuthority(host: key.host, port: key.port))
        guard let exchange, exchange.kind == .forward, !exchange.responseStarted, !exchange.responseBytesSeen,
            let head = exchange.retryHead
        else {
            return upstreamEOF(reset: true)
        }
        commands.append(.closeUpstream)
        upstream = .none
        var http1Key = key
        http1Key.http1Only = true
        exchange.upstreamKey = http1Key
        exchange.tls = nil  // The HTTP/1.1 upstream's facts replace the h2 link's.
        sendAgain(exchange, head: head, on: http1Key, reusable: true)
    }

    /// Sends `exchange`'s request (`head`, its replayable head) once more, on an upstream for `key`, and
    /// marks it so: never a third time, and logged as retried.
    private mutating func sendAgain(
        _ exchange: Exchange, head: HTTP1RequestHead, on key: UpstreamKey, reusable: Bool
    ) {
        exchange.retryHead = nil
        exchange.onReusedUpstream = false
        exchange.retried = true
        // Only requests without a body are sent again: a fresh writer frames the (empty) body on the new upstream.
        exchange.requestWriter = HTTP1BodyWriter(framing: .none)
        exchange.requestEncodingFinished = false
        pendingUpstream = []
        pendingParts = []
        openUpstream(key, reusable: reusable)
        sendRequestPart(.request(head, body: .none))
        if exchange.requestBodyFinished { sendRequestPart(.messageEnd) }
    }

    // MARK: - Passthrough

    private mutating func finishPassthroughSetup() {
        commands.append(.writeToClient(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)))
        if let exchange {
            exchange.responseStatus = 200
            exchange.responseDone = true
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

    // MARK: - Failures and local answers

    /// Answers the current exchange with the verdict's 502/504 and the X-ATS-* headers.
    private mutating func failExchange(verdict: UpstreamVerdict) {
        guard let exchange else { return close() }
        let verdict = verdict.withFix(url: exchange.url, evaluator: services.policy.snapshot.evaluator)
        let platform = services.policy.snapshot.evaluator.options.platform
        let context = consoleContext()
        exchange.result = .failed
        exchange.errorCode = verdict.error?.rawValue
        exchange.streamError = Self.pair(verdict)
        exchange.rule = verdict.rule
        exchange.fix = verdict.fix
        exchange.consoleLines = verdict.consoleLines(platform: platform, context: context)
        let response = ATSErrorResponse.upstreamFailure(
            url: exchange.url, error: verdict.error ?? .secureConnectionFailed, streamDomain: verdict.streamDomain,
            streamCode: verdict.streamCode, rule: verdict.rule, explanation: verdict.reasons.joined(separator: "; "),
            fix: verdict.fix, consoleLines: exchange.consoleLines)
        let wasProbe = exchange.kind == .probe
        exchange.kind = .local
        pendingUpstream = []
        pendingParts = []
        if wasProbe {
            sendLocal(LocalResponse(response), keepAlive: false)
            self.exchange?.responseStatus = response.status
            self.exchange?.responseDone = true
            logExchange()
            close()
            return
        }
        respondLocally(response)
    }

    /// Answers the current exchange with 502 and -1011 (NSURLErrorBadServerResponse): the origin
    /// answered, but not with HTTP the client could use.
    private mutating func failWithBadResponse(_ reason: String) {
        guard let exchange else { return close() }
        let code = NSURLErrorCode.badServerResponse
        let platform = services.policy.snapshot.evaluator.options.platform
        var context = consoleContext()
        context.taskNumber = exchange.number
        exchange.result = .failed
        exchange.errorCode = code.rawValue
        exchange.streamError = nil
        exchange.rule = reason
        exchange.fix = nil
        exchange.consoleLines = [
            "\(context.prefix) \(context.taskName) finished with error [\(code.rawValue)] "
                + CFNetworkConsole.errorText(
                    code: code, url: exchange.url, host: exchange.target.host, platform: platform, context: context)
        ]
        exchange.kind = .local
        pendingUpstream = []
        pendingParts = []
        respondLocally(
            ATSErrorResponse.upstreamFailure(
                url: exchange.url, error: code, streamDomain: nil, streamCode: nil, rule: reason, explanation: reason,
                fix: nil, consoleLines: exchange.consoleLines))
    }

    /// Sends a locally generated response for the current exchange and finishes it.
    private mutating func respondLocally(_ response: ATSErrorResponse) {
        guard let exchange else { return }
        if exchange.responseStarted {
            closeUpstreamAndClient()
            return
        }
        if !exchange.requestDone && exchange.requestHasBody { exchange.clientKeepAlive = false }
        exchange.responseStarted = true
        exchange.responseStatus = response.status
        exchange.responseHeaders = HTTP1Headers(response.headers.map { HTTP1Field(name: $0.name, value: $0.value) })
        let local = LocalResponse(response)
        exchange.bytesToClient += local.body.count
        exchange.responseDone = true
        exchange.upstreamKeepAlive = false
        sendLocal(local, keepAlive: exchange.clientKeepAlive, headOnly: exchange.method == "HEAD")
        finishIfComplete()
    }

    /// Delivers a response the proxy makes itself: to a lane's stream as parts, to an HTTP/1.1 client as text.
    private mutating func sendLocal(_ response: LocalResponse, keepAlive: Bool, headOnly: Bool = false) {
        let parts = response.parts(keepAlive: keepAlive, headOnly: headOnly)
        if isStreamSession {
            for part in parts { respondToStream(part) }
            return
        }
        var bytes: [UInt8] = []
        for part in parts {
            switch part {
            case .response(let head, _): HTTP1Serializer.writeResponseHead(head, into: &bytes)
            case .body(let slice): bytes.append(contentsOf: slice)
            case .messageEnd: break
            case .request, .trailers, .upgraded, .failed:
                preconditionFailure("sendLocal: \(part) is not part of a local response")
            }
        }
        sendToClient(bytes)
    }

    /// A response that is not part of an exchange (bad requests, loops); closes afterwards when
    /// `keepAlive` is false.
    private mutating func answerLocally(status: Int, reason: String, body: String, keepAlive: Bool) {
        sendLocal(LocalResponse.text(status: status, reason: reason, body), keepAlive: keepAlive)
        if !keepAlive { close() }
    }

    /// A request or CONNECT the proxy refuses before any upstream is involved (misdirected inside a tunnel, a
    /// target on the proxy host for a client elsewhere): answered with `status`, recorded as failed, closed.
    private mutating func refuse(_ head: HTTP1RequestHead, status: Int, reason: String, text: String) {
        let body = "ats-proxy: \(text)\n"
        let url: String
        switch head.target {
        case .authority(let authority): url = "https://\(authority)/"
        case .absolute, .asterisk: url = head.target.description
        case .origin(let path): url = tunnelOrigin.isEmpty ? path : tunnelOrigin + path
        }
        let number = head.method == "CONNECT" ? requestCount + 1 : requestCount
        commands.append(
            .log(
                RequestRecord(
                    time: now, clientAddress: clientAddress, taskID: taskIDPrefix + String(number), method: head.method,
                    url: url, httpProtocol: clientProtocol, source: .urlsession, result: .failed, atsRequired: false,
                    ruleChain: [], rule: text, status: status, requestHeaders: head.headers.fields,
                    bytesToClient: body.utf8.count)))
        answerLocally(status: status, reason: reason, body: body, keepAlive: false)
        close()
    }

    /// Why a client on another machine may not reach `host`.
    static func localTargetText(_ host: String) -> String {
        "\(host) is the machine the proxy runs on; clients on other machines may not reach its own services (start ats-proxy with --allow-local-targets to allow it)"
    }

    /// Serves the CA onboarding site (never proxied).
    private mutating func answerOnboarding(_ head: HTTP1RequestHead, path: String, framing: HTTP1BodyFraming) {
        guard let site = services.onboarding else {
            answerProxyInfo(head, framing: framing)
            return
        }
        let keepAlive = framing == .none && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        let page: OnboardingSite.Page
        if head.method == "GET" || head.method == "HEAD" {
            page = site.page(for: path.hasPrefix("/") ? path : "/" + path)
        } else {
            page = OnboardingSite.Page(
                status: 405, reason: "Method Not Allowed", contentType: "text/plain; charset=utf-8", fileName: nil,
                body: Array("ats-proxy: onboarding pages answer GET only\n".utf8))
        }
        sendLocal(LocalResponse(page), keepAlive: keepAlive, headOnly: head.method == "HEAD")
        if keepAlive { resumeParserIfIdle() } else { close() }
    }

    /// A request addressed to the proxy itself (origin-form): the onboarding site, or a short page
    /// saying what this is.
    private mutating func answerProxyInfo(_ head: HTTP1RequestHead, framing: HTTP1BodyFraming) {
        if services.onboarding != nil, case .origin(let path) = head.target {
            answerOnboarding(head, path: path, framing: framing)
            return
        }
        let snapshot = services.policy.snapshot
        let body = """
            ats-proxy is running: an HTTP proxy that enforces App Transport Security.
            Policy: \(snapshot.sourceSummary)
            Platform: \(snapshot.evaluator.options.platform)
            Configure this address as the HTTP and HTTPS proxy of your client.

            """
        let keepAlive = framing == .none && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        if head.target == .origin("/") {
            answerLocally(status: 200, reason: "OK", body: body, keepAlive: keepAlive)
        } else {
            answerLocally(status: 404, reason: "Not Found", body: "ats-proxy: not found\n", keepAlive: keepAlive)
        }
        if keepAlive { resumeParserIfIdle() }
    }

    // MARK: - Finishing

    private mutating func finishIfComplete() {
        guard let exchange, exchange.requestDone, exchange.responseDone else { return }
        logExchange()
        self.exchange = nil
        if !exchange.upstreamKeepAlive {
            if case .none = upstream {
            } else {
                commands.append(.closeUpstream)
            }
            upstream = .none
        } else if case .ready = upstream {
            upstreamIdle = true
        }
        if !exchange.clientKeepAlive || draining {
            close()
            return
        }
        resumeParserIfIdle()
    }

    /// The client went away: log what was in flight (the app's request was abandoned).
    private mutating func clientGone() {
        if case .h2 = phase, let h2 {
            apply(h2.clientGone(now: now))
        }
        if let exchange, !exchange.responseDone {
            exchange.result = .failed
            exchange.rule = "the client closed the connection before the response was complete"
            logExchange()
            self.exchange = nil
        }
        close()
    }

    /// Shutdown: an idle connection closes now; a busy one closes when its exchange ends.
    private mutating func drain() {
        if draining {
            // A second drain: the grace period is over, whatever is in flight ends now (and is recorded).
            if case .h2 = phase, let h2 { apply(h2.clientGone(now: now)) }
            if let exchange, !exchange.recorded {
                exchange.result = .failed
                exchange.rule = "the proxy stopped (grace period over) before the exchange was complete"
            }
            close()
            return
        }
        draining = true
        if case .h2 = phase, let h2 {
            apply(h2.drain(now: now))
            return
        }
        if exchange == nil { close() }
    }

    private mutating func resumeParserIfIdle() {
        guard exchange == nil, parser.isPaused else { return }
        let events = parser.resume()
        process(events)
    }

    private mutating func logExchange() {
        guard let exchange, !exchange.unrecorded, !exchange.recorded else { return }
        exchange.recorded = true
        let redirectNote = ""
        let record = RequestRecord(
            time: exchange.start, clientAddress: clientAddress, taskID: taskIDPrefix + String(exchange.number),
            method: exchange.method, url: exchange.url, host: exchange.target.host, httpProtocol: clientProtocol,
            source: exchange.source,
            result: exchange.result, atsRequired: exchange.decision.atsRequired,
            ruleChain: exchange.decision.ruleTexts, rule: exchange.rule + redirectNote, fix: exchange.fix,
            errorCode: exchange.errorCode, streamError: exchange.streamError, status: exchange.responseStatus,
            tls: exchange.tls,
            requestHeaders: exchange.requestHeaders.fields, responseHeaders: exchange.responseHeaders.fields,
            bytesFromClient: exchange.bytesFromClient, bytesToClient: exchange.bytesToClient,
            durationMilliseconds: now.timeIntervalSince(exchange.start) * 1000, consoleLines: exchange.consoleLines,
            retriedOnNewConnection: exchange.retried ? true : nil,
            timings: services.settings.detailedRecords ? exchange.timings.record(since: exchange.start) : nil,
            bodies: exchange.bodies.record)
        commands.append(.log(record))
    }

    private mutating func logClientHandshakeFailure(_ failure: TLSFailure) {
        guard let tunnel else { return }
        let record = RequestRecord(
            time: now, clientAddress: clientAddress, taskID: taskIDPrefix + String(requestCount),
            method: "CONNECT",
            url: "https://\(tunnel.host):\(tunnel.port)/", host: tunnel.host, httpProtocol: "http/1.1",
            source: .urlsession,
            result: .clientUntrustedCA,
            atsRequired: false, ruleChain: [],
            rule:
                "the client rejected the TLS handshake with the proxy (\(failure)); install and fully trust the ats-proxy CA on the client",
            fix: "trust the proxy's CA (ats-proxy ca export) on the device or simulator")
        commands.append(.log(record))
    }

    private mutating func close() {
        if case .closed = phase { return }
        if let exchange, !exchange.recorded {
            // Cut before it ended on its own (timeout, shutdown, a client gone mid-request): still one record.
            switch exchange.result {
            case .completed, .reported:
                exchange.result = .failed
                exchange.rule = "the connection was closed before the exchange was complete"
            case .blockedCleartext, .failed, .clientUntrustedCA:
                break
            }
            logExchange()
        }
        releaseOrCloseUpstream()
        if let tls = clientTLS {
            flushClientTLS(tls)
            tls.shutdown()
            flushClientTLS(tls)
        }
        commands.append(.cancelTimer)
        commands.append(.closeClient)
        phase = .closed
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

    /// An idle, judged, shareable upstream goes back to the loop's pool; anything else is closed.
    private mutating func releaseOrCloseUpstream() {
        switch upstream {
        case .none:
            return
        case .ready(let key, let tls):
            // Whoever gets the engine next (the pool, or nobody) expects it to free its buffers when idle.
            tls?.holdsRecordBuffers = false
            var plainHTTP = false
            if case .http = phase { plainHTTP = true }
            if upstreamIdle && upstreamShareable && plainHTTP && pendingUpstream.isEmpty {
                commands.append(
                    .releaseUpstream(
                        UpstreamLease(
                            key: key, tls: tls, facts: upstreamFacts, protocolName: upstreamProtocol, shareable: true)))
            } else {
                commands.append(.closeUpstream)
            }
        case .connecting, .handshaking:
            commands.append(.closeUpstream)
        }
        upstream = .none
        upstreamIdle = false
    }

    /// The origin broke off mid-response (reset, garbage, or a close the framing does not allow): the
    /// request is logged as failed with -1005 and the client connection (or HTTP/2 stream) is ended.
    private mutating func closeUpstreamAndClient() {
        if let exchange, !exchange.responseDone {
            exchange.result = .failed
            exchange.errorCode = NSURLErrorCode.networkConnectionLost.rawValue
            exchange.rule = "the connection to the origin was lost before the response was complete"
            logExchange()
            self.exchange = nil
        }
        close()
    }

    private mutating func clientEOF() {
        switch phase {
        case .relay, .passthroughProbe, .passthroughConnecting, .clientHandshake:
            close()
        case .h2:
            clientGone()
        case .http:
            if let exchange, exchange.requestDone, !exchange.responseDone {
                self.exchange?.clientKeepAlive = false
                return
            }
            close()
        case .closed:
            break
        }
    }

    private mutating func timerFired() {
        if exchange != nil, quietStageArmed {
            // Quiet for `bufferLinger` in the middle of an exchange: free the buffers, keep waiting.
            quietBuffersReleased = true  // updateTimer lets go of them
            return
        }
        if let exchange {
            if exchange.responseStarted || exchange.kind != .forward {
                // Recorded by `close` with this reason: the client sees the connection end.
                exchange.result = .failed
                exchange.errorCode = exchange.errorCode ?? NSURLErrorCode.timedOut.rawValue
                exchange.rule =
                    "no progress for \(services.settings.exchangeTimeout) s (--exchange-timeout) \(exchange.responseStarted ? "after the response head" : "while the exchange was under way"); the connection was closed"
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
                if self.exchange != nil { close() }
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
    private mutating func updateTimer() {
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
    private var idleTimerSeconds: Double { max(nextIdleStage.at - idleElapsed, 0.001) }

    /// The next stage of the idle timer (seconds from the start of the idle period) and what it gives back.
    private var nextIdleStage: (at: Double, releasesBuffers: Bool, releasesUpstream: Bool) {
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
    private var quietStageArmed: Bool {
        guard case .http = phase, !quietBuffersReleased, holdsAnyTLSEngine else { return false }
        let linger = services.settings.bufferLinger
        return linger > 0 && linger < services.settings.exchangeTimeout
    }

    /// A request (or an exchange) ends the idle period: its stages start over next time.
    private mutating func endIdlePeriod() {
        idleElapsed = 0
        idleBuffersReleased = false
        idleUpstreamReleased = false
    }

    /// The session has a TLS engine of its own (client side, or an HTTP/1.1 upstream).
    private var holdsAnyTLSEngine: Bool { clientTLS != nil || upstreamEngine != nil }

    /// The TLS engine of a ready HTTP/1.1 upstream of the session's own. The client engine and this one keep
    /// their record buffers between records while HTTP/1.1 is busy and free them whenever they run dry when
    /// idle, relayed or HTTP/2 (`updateTimer`).
    private var upstreamEngine: TLSConnection? {
        if case .ready(_, let tls) = upstream { return tls }
        return nil
    }

    /// Between requests with an idle upstream connection of its own that the pool could take back.
    private var holdsIdleUpstream: Bool {
        guard exchange == nil, upstreamIdle, upstreamShareable, pendingUpstream.isEmpty else {
            return false
        }
        guard case .http = phase, case .ready = upstream else { return false }
        return true
    }

    /// The upstream is opening (TCP or TLS): client bytes would only pile up in memory.
    private var upstreamPending: Bool {
        switch upstream {
        case .connecting, .handshaking: true
        case .none, .ready: false
        }
    }

    // MARK: - Writing

    private mutating func sendToClient(_ plain: [UInt8]) {
        guard !plain.isEmpty else { return }
        if clientTLS != nil {
            if clientPlain.isEmpty { clientPlain = plain } else { clientPlain += plain }
        } else {
            commands.append(.writeToClient(plain))
        }
    }

    /// Lets `write` append client-bound plaintext straight to what the TLS engine seals after this event, or
    /// to the bytes of a write command for a cleartext client.
    private mutating func writeToClient(_ write: (inout [UInt8]) -> Void) {
        if clientTLS != nil {
            write(&clientPlain)
        } else {
            var bytes: [UInt8] = []
            write(&bytes)
            if !bytes.isEmpty { commands.append(.writeToClient(bytes)) }
        }
    }

    private mutating func sendToUpstream(_ plain: [UInt8]) {
        guard !plain.isEmpty else { return }
        switch upstream {
        case .ready(_, let tls):
            if let tls {
                tls.write(plain)
                flushUpstreamTLS(tls)
            } else {
                commands.append(.writeToUpstream(plain))
            }
        case .none, .connecting, .handshaking:
            pendingUpstream.append(contentsOf: plain)
        }
    }

    /// Sends what waited for the upstream: raw bytes (a tunnel's), then the exchange's request parts, encoded for
    /// the upstream it turned out to be.
    private mutating func flushPendingUpstream() {
        if !pendingUpstream.isEmpty {
            let bytes = pendingUpstream
            pendingUpstream = []
            sendToUpstream(bytes)
        }
        guard !pendingParts.isEmpty else { return }
        let parts = pendingParts
        pendingParts = []
        for part in parts { sendRequestPart(part) }
    }

    /// Whether the upstream is a channel of a shared HTTP/2 link: it takes request parts as they are.
    private var upstreamIsChannel: Bool {
        if case .ready = upstream, upstreamProtocol == "h2" { return true }
        return false
    }

    /// One part of the current exchange's request, for the upstream: held until the upstream is ready, then handed
    /// to an HTTP/2 channel as it is (consecutive parts in one command) or written as HTTP/1.1 text (the only place
    /// the request side writes HTTP/1.1).
    private mutating func sendRequestPart(_ part: HTTP1Event) {
        switch upstream {
        case .none, .connecting, .handshaking:
            pendingParts.append(part)
        case .ready where upstreamProtocol == "h2":
            if case .sendToUpstreamChannel(var parts)? = commands.last {
                commands.removeLast()
                parts.append(part)
                commands.append(.sendToUpstreamChannel(parts))
            } else {
                commands.append(.sendToUpstreamChannel([part]))
            }
        case .ready:
            guard let exchange else { return }
            var bytes: [UInt8] = []
            switch part {
            case .request(let head, _):
                HTTP1Serializer.writeRequestHead(head, into: &bytes)
            case .body(let slice):
                try? exchange.requestWriter.write(slice, into: &bytes)
            case .trailers(let trailers):
                guard !exchange.requestEncodingFinished else { return }
                exchange.requestEncodingFinished = true
                try? exchange.requestWriter.finish(trailers: trailers, into: &bytes)
            case .messageEnd:
                guard !exchange.requestEncodingFinished else { return }
                exchange.requestEncodingFinished = true
                try? exchange.requestWriter.finish(trailers: [:], into: &bytes)
            case .response, .upgraded, .failed:
                preconditionFailure("sendRequestPart: \(part) is not a request part")
            }
            sendToUpstream(bytes)
        }
    }

    /// Encrypts the plaintext `sendToClient` gathered and queues every record the engine holds.
    private mutating func flushClientTLS(_ tls: TLSConnection) {
        if !clientPlain.isEmpty {
            let plain = clientPlain
            clientPlain = []
            tls.write(plain)
        }
        if tls.hasOutbound { commands.append(.writeToClient(tls.takeOutbound())) }
    }

    private mutating func flushUpstreamTLS(_ tls: TLSConnection) {
        if tls.hasOutbound { commands.append(.writeToUpstream(tls.takeOutbound())) }
    }

    // MARK: - HTTP/2 clients

    /// The client chose h2 in ALPN: from now on `HTTP2Frontend` turns its streams into requests.
    private mutating func startHTTP2() {
        do {
            let frontend = try HTTP2Frontend(parent: self)
            h2 = frontend
            phase = .h2
            apply(frontend.start())
        } catch {
            close()
        }
    }

    private mutating func http2Bytes(_ plain: [UInt8]) {
        guard let h2 else { return close() }
        apply(h2.receive(plain, now: now))
    }

    private mutating func streamEvent(lane: Int32, _ event: ProxyEvent) {
        guard case .h2 = phase, let h2 else { return }
        apply(h2.handle(lane: lane, event: event, now: now))
    }

    private mutating func apply(_ output: HTTP2Frontend.Output) {
        commands.append(contentsOf: output.commands)
        if !output.toClient.isEmpty { sendToClient(output.toClient) }
        if output.finished { close() }
    }

    // MARK: - Helpers

    private func consoleContext() -> ConsoleContext {
        ConsoleContext(
            processName: services.policy.snapshot.processName ?? services.settings.processName,
            pid: services.processID, threadID: services.processID + connectionNumber, date: now, taskUUID: taskUUID,
            taskNumber: max(1, exchange?.number ?? requestCount), connectionNumber: connectionNumber)
    }

    private func cleartextConsole(_ decision: ATSDecision, number: Int) -> [String] {
        var context = consoleContext()
        context.taskNumber = number
        return CFNetworkConsole.cleartextBlocked(
            url: decision.target.url, host: decision.target.host, platform: decision.platform, context: context)
    }

    /// Requirements used to describe failures of cleartext connections (no TLS involved).
    static let cleartextRequirements: TLSRequirements = {
        ATSEvaluator(configuration: .empty).evaluate(RequestTarget(scheme: .https, host: "localhost")).requirements
    }()

    /// What `--mode report` offers upstream: every version and suite, so the handshake completes
    /// and the summary can be judged against the real requirements.
    static func permissive(_ requirements: TLSRequirements) -> TLSRequirements {
        requirements.updating { offered in
            offered.minimumVersion = .tls10
            offered.maximumVersion = max(offered.maximumVersion, .tls12)
            offered.cipherSuites = CipherSuite.catalogue
            offered.minimumRSAKeyBits = 0
            offered.minimumECKeyBits = 0
            offered.minimumSignatureHash = .md5
        }
    }

    /// `3:-9836` (without brackets) for a verdict that has a stream error.
    static func pair(_ verdict: UpstreamVerdict) -> String? {
        guard let domain = verdict.streamDomain, let code = verdict.streamCode else { return nil }
        return "\(domain):\(code)"
    }

    static func tlsFacts(_ summary: HandshakeSummary, detailed: Bool = false) -> [String: String] {
        var facts: [String: String] = [
            "version": summary.version.rawValue, "cipher": summary.cipher.ianaName,
            "keyExchange": summary.cipher.keyExchange.rawValue,
        ]
        if let leaf = summary.leaf {
            facts["leaf"] = leaf.subject
            facts["leafKey"] = "\(leaf.key)"
            facts["leafSignature"] = leaf.signatureAlgorithm
        }
        facts["chainLength"] = "\(summary.presentedChain.count)"
        if let alpn = summary.alpn { facts["alpn"] = alpn }
        if detailed { facts.merge(summary.detailedFacts) { kept, _ in kept } }
        return facts
    }
}
