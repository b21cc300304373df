import ATSProxyCore
import ATSProxyIO
import Foundation

/// The live flow view: a small HTTP/1.1 server on its own event loop (`--web HOST:PORT`) that
/// serves one self-contained page, the downloads, and `/events`, a Server-Sent Events stream of
/// every flow the proxy finishes.
///
/// The flows come from a `FlowStore` the proxy's record observer feeds. While no page is open the
/// server does nothing per request (the store's one-shot notification stays disarmed). With pages
/// open, the first new flow wakes this loop once; the loop waits `flushInterval`, then sends
/// every subscriber what it has not seen, at most `batchBytes` per turn (the rest when the
/// connection has drained, so a slow page holds a bounded queue and never stalls the proxy).
/// The minimal dictionary is asked for at most once per `dictionaryInterval`, and pushed only when
/// its text changed. So with pages open the work is bounded per flush, not per request: at most
/// `liveFlowsPerFlush` events encoded per page (plus the ring's replay when a page opens), one
/// wake-up per `flushInterval`, one dictionary refresh per `dictionaryInterval`.
///
/// Threading: `start()` from any thread; everything else runs on `loop`, which is the invariant
/// behind `@unchecked Sendable` (subscribers and timers are touched only there).
public final class WebServer: @unchecked Sendable {
    /// Listener and pacing settings.
    public struct Configuration: Sendable {
        public var address: ListenAddress
        /// Clients accepted on a non-loopback address (nil: private and link-local ranges).
        public var allowList: ClientAllowList?
        /// Delay between the first new flow and the batch that carries it to the pages.
        public var flushInterval: Duration = .milliseconds(100)
        /// Least time between two minimal-dictionary updates.
        public var dictionaryInterval: Duration = .seconds(1)
        /// Bytes of events written to one page before waiting for its connection to drain.
        public var batchBytes = 512 * 1024
        /// Flows sent to a page per flush once it has caught up with the ring; beyond that the
        /// oldest pending ones are skipped (the page shows how many). With `flushInterval` this caps
        /// the page's share of the machine (about 1,000 flows a second) however fast the proxy runs;
        /// the HAR and the report still hold every flow of the ring.
        public var liveFlowsPerFlush = 100
        /// Headers are shown unredacted (`--log-secrets`).
        public var allowSecrets = false
        /// Interval of the comment line that keeps idle event streams alive through proxies and
        /// exchange timeouts (the page may be opened through ats-proxy itself).
        public var heartbeatInterval: Duration = .seconds(15)

        public init(address: ListenAddress, allowList: ClientAllowList? = nil) {
            self.address = address
            self.allowList = allowList
        }
    }

    /// One open event stream.
    final class Subscriber {
        let connection: TCPConnection
        /// The newest flow id this page has been sent.
        var cursor: Int
        /// A batch filled the connection's queue; the rest waits for `connectionDidDrain`.
        var waitingForDrain = false
        /// The newest flow when the page connected: the ring up to it is replayed in full (paced by
        /// drains); later flows are live and capped per flush.
        let replayThrough: Int

        init(connection: TCPConnection, cursor: Int, replayThrough: Int) {
            self.connection = connection
            self.cursor = cursor
            self.replayThrough = replayThrough
        }
    }

    public let configuration: Configuration
    let store: FlowStore
    let content: WebContent
    let group: EventLoopGroup
    /// The loop every web connection, timer and subscriber lives on.
    public let loop: EventLoop
    /// Requests for `/api/verify` waiting for the run in flight (loop-confined).
    private var verifyWaiting: [(TCPConnection, HTTPRequestHead)] = []
    /// Where `/api/verify` runs: off the loop, one at a time.
    private let verifyQueue = DispatchQueue(label: "ats-proxy.web.verify")
    private var listener: TCPListener?
    private var subscribers: [UInt64: Subscriber] = [:]
    private var flushScheduled = false
    private var dictionaryScheduled = false
    private var heartbeatScheduled = false
    private var dictionaryText = ""
    private var dictionaryFlowID = -1
    private var dictionaryTime: ContinuousClock.Instant?
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    /// - Parameter backend: the event-loop backend the proxy runs on (the web server gets one loop of it).
    public init(configuration: Configuration, store: FlowStore, content: WebContent, backend: EventLoopBackend) {
        self.configuration = configuration
        self.store = store
        self.content = content
        group = EventLoopGroup(loopCount: 1, backend: backend)
        loop = group.loops[0]
    }

    /// Binds, starts accepting, and subscribes to the store. Returns the bound address.
    /// - Throws: `IOError` when the address cannot be bound.
    public func start() throws(IOError) -> SocketAddress {
        var listenerConfiguration = TCPListener.Configuration(address: configuration.address)
        listenerConfiguration.allowList = configuration.allowList
        listenerConfiguration.maxConnections = 64
        let listener = try TCPListener(
            configuration: listenerConfiguration, group: group,
            onAccept: { [self] connection in
                connection.handler = WebConnection(server: self)
            })
        self.listener = listener
        store.setListener { [self] in loop.execute { self.scheduleFlush() } }
        listener.start()
        return listener.boundAddress
    }

    /// Stops accepting and closes every page's connection.
    public func stop() {
        store.setListener(nil)
        loop.execute { [self] in
            listener?.stop()
            for subscriber in subscribers.values { subscriber.connection.close() }
            subscribers.removeAll()
        }
    }

    /// Open event streams (for tests and the status line).
    public var subscriberCount: Int { loop.submitAndWait { subscribers.count } }

    // MARK: - Requests

    /// Answers one request head on `connection` (called by `WebConnection`, on the loop).
    func respond(to head: HTTPRequestHead, on connection: TCPConnection, lastEventID: Int?) {
        loop.assertInLoop()
        // GET and HEAD everywhere; POST only for the page's one action (`/api/verify`, checked there).
        let isVerify = head.target.description.hasPrefix("/api/verify") && head.method == "POST"
        guard head.method == "GET" || head.method == "HEAD" || isVerify else {
            return finish(connection, .text(405, "Method Not Allowed", "ats-proxy web view: GET only\n"), head)
        }
        guard Self.isAcceptableHost(head.headers.first("host")) else {
            return finish(
                connection,
                .text(421, "Misdirected Request", "ats-proxy web view: open it by IP address or localhost\n"), head)
        }
        let path: String
        var query = ""
        switch head.target {
        case .origin(let text):
            path = String(text.prefix { $0 != "?" && $0 != "#" })
            query = Self.query(of: text)
        case .absolute(_, _, let pathAndQuery):
            path = String(pathAndQuery.prefix { $0 != "?" && $0 != "#" })
            query = Self.query(of: pathAndQuery)
        case .authority, .asterisk: path = ""
        }
        if path == "/api/flows" || path.hasPrefix("/api/flows/") {
            return finish(
                connection,
                FlowAPI(store: store, allowSecrets: configuration.allowSecrets).respond(path: path, query: query), head)
        }
        switch path {
        case "/", "/flows", "/index.html":
            finish(
                connection,
                WebResponse(
                    status: 200, reason: "OK", contentType: "text/html; charset=utf-8",
                    body: Array(
                        WebPage.html(
                            title: content.title, capacity: store.capacity,
                            proxy: connection.localAddress.flatMap { content.autoConfig?.proxyAddress(forLocal: $0) }?
                                .description
                        ).utf8)), head)
        case "/events":
            guard head.method == "GET" else { return finish(connection, .text(200, "OK", ""), head) }
            subscribe(connection, after: lastEventID ?? 0)
        case "/session.har":
            finish(
                connection,
                WebResponse(
                    status: 200, reason: "OK", contentType: "application/json", body: Array(content.har()),
                    fileName: "ats-proxy.har"), head)
        case "/report.json":
            finish(
                connection,
                WebResponse(
                    status: 200, reason: "OK", contentType: "application/json", body: Array(content.reportJSON()),
                    fileName: "report.json"), head)
        case "/report.html":
            finish(
                connection,
                WebResponse(
                    status: 200, reason: "OK", contentType: "text/html; charset=utf-8",
                    body: Array(content.reportHTML().utf8), fileName: "report.html"), head)
        case "/metrics":
            guard let metrics = content.metrics else {
                return finish(connection, .text(404, "Not Found", "ats-proxy web view: no such page\n"), head)
            }
            finish(
                connection,
                WebResponse(
                    status: 200, reason: "OK", contentType: "text/plain; version=0.0.4; charset=utf-8",
                    body: metrics.exposition()), head)
        case "/ats-proxy-ca.pem":
            finish(
                connection,
                WebResponse(
                    status: 200, reason: "OK", contentType: "application/x-pem-file", body: content.caPEM,
                    fileName: "ats-proxy-ca.pem"), head)
        case "/api/verify":
            guard let verify = content.verify else {
                return finish(connection, .text(404, "Not Found", "ats-proxy web view: no such page\n"), head)
            }
            // It contacts servers again: only the page's own POST (a custom header makes a browser ask first, so
            // another site cannot start it), and one run at a time whose answer every request waiting gets.
            guard head.method == "POST", head.headers.first("X-ATS-Proxy-Action") == "verify" else {
                return finish(
                    connection,
                    .text(405, "Method Not Allowed", "ats-proxy web view: POST with X-ATS-Proxy-Action: verify\n"),
                    head)
            }
            verifyWaiting.append((connection, head))
            guard verifyWaiting.count == 1 else { return }
            let loop = loop
            verifyQueue.async { [self] in
                let body = verify()
                loop.execute { [self] in
                    let waiting = verifyWaiting
                    verifyWaiting = []
                    for (connection, head) in waiting {
                        finish(
                            connection,
                            WebResponse(status: 200, reason: "OK", contentType: "application/json", body: Array(body)),
                            head)
                    }
                }
            }
        case ProxyAutoConfig.path:
            guard let autoConfig = content.autoConfig else {
                return finish(connection, .text(404, "Not Found", "ats-proxy web view: no such page\n"), head)
            }
            finish(connection, autoConfig.response(forLocal: connection.localAddress), head)
        default:
            finish(connection, .text(404, "Not Found", "ats-proxy web view: no such page\n"), head)
        }
    }

    /// The query of a request target (after `?`, before `#`).
    static func query(of target: some StringProtocol) -> String {
        guard let mark = target.firstIndex(of: "?") else { return "" }
        return String(target[target.index(after: mark)...].prefix { $0 != "#" })
    }

    private func finish(_ connection: TCPConnection, _ response: WebResponse, _ head: HTTPRequestHead) {
        connection.write(response.serialized(headOnly: head.method == "HEAD"))
        connection.closeAfterFlush()
    }

    /// Accepts `Host` values that name this server by address (an IP literal, `localhost`, or the
    /// onboarding name), so that a web page under another name (DNS rebinding) cannot read flows.
    static func isAcceptableHost(_ value: String?) -> Bool {
        guard let value, !value.isEmpty else { return true }
        var host = Substring(value)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        let name = host.lowercased()
        return name == "localhost" || name == OnboardingSite.host || SocketAddress(ipLiteral: name, port: 0) != nil
    }

    // MARK: - Event streams

    private func subscribe(_ connection: TCPConnection, after id: Int) {
        connection.write(WebResponse.eventStreamHead)
        let hello: [String: String] = ["title": content.title, "capacity": "\(store.capacity)"]
        let helloJSON = (try? encoder.encode(hello)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        connection.write(Array("retry: 2000\nevent: hello\ndata: \(helloJSON)\n\n".utf8))
        let subscriber = Subscriber(connection: connection, cursor: id, replayThrough: store.newestID)
        subscribers[connection.id] = subscriber
        pump(subscriber)
        connection.write(dictionaryEvent(dictionaryText.isEmpty ? content.minimalDictionary() : dictionaryText))
        if !flushScheduled { _ = store.armNotification(seen: .max) }
        scheduleHeartbeat()
    }

    /// While pages are open, writes an SSE comment every `heartbeatInterval`.
    private func scheduleHeartbeat() {
        guard !heartbeatScheduled else { return }
        heartbeatScheduled = true
        loop.execute(after: configuration.heartbeatInterval) { [self] in
            heartbeatScheduled = false
            guard !subscribers.isEmpty else { return }
            let comment = Array(": keep-alive\n\n".utf8)
            for subscriber in subscribers.values { subscriber.connection.write(comment) }
            scheduleHeartbeat()
        }
    }

    /// The connection of an event stream closed.
    func unsubscribe(_ connection: TCPConnection) {
        subscribers[connection.id] = nil
    }

    /// The connection of an event stream drained: send what waited.
    func drained(_ connection: TCPConnection) {
        guard let subscriber = subscribers[connection.id], subscriber.waitingForDrain else { return }
        subscriber.waitingForDrain = false
        pump(subscriber)
    }

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.execute(after: configuration.flushInterval) { [self] in flush() }
    }

    /// Sends new flows to every page, refreshes the dictionary, and re-arms the store.
    private func flush() {
        flushScheduled = false
        guard !subscribers.isEmpty else { return }
        for subscriber in subscribers.values { pump(subscriber) }
        updateDictionary()
        if !store.armNotification(seen: subscribers.values.map(\.cursor).max() ?? 0) { scheduleFlush() }
    }

    /// Writes the flows `subscriber` has not seen, up to `batchBytes` (the rest after a drain);
    /// once it is live, at most `liveFlowsPerFlush`, skipping older pending ones with a `skipped` event.
    private func pump(_ subscriber: Subscriber) {
        guard !subscriber.waitingForDrain, subscriber.connection.isOpen else { return }
        var batch: [UInt8] = []
        var budget = Int.max
        if subscriber.cursor >= subscriber.replayThrough {
            budget = configuration.liveFlowsPerFlush
            let pending = store.newestID - subscriber.cursor
            if pending > budget {
                let skipped = pending - budget
                subscriber.cursor += skipped
                let json = (try? encoder.encode(["count": skipped])).map { Array($0) } ?? []
                batch += Array("event: skipped\ndata: ".utf8) + json + Array("\n\n".utf8)
            }
        }
        while batch.count < configuration.batchBytes && budget > 0 {
            let flows = store.flows(after: subscriber.cursor, limit: min(64, budget))
            guard let last = flows.last else { break }
            for flow in flows {
                batch += FlowView.event(flow, allowSecrets: configuration.allowSecrets, encoder: encoder)
            }
            subscriber.cursor = last.id
            if budget != .max { budget -= flows.count }
        }
        guard !batch.isEmpty else { return }
        subscriber.connection.write(batch)
        if batch.count >= configuration.batchBytes {
            subscriber.waitingForDrain = true
            // Everything went to the kernel at once: no drain will be reported, so continue on the next turn.
            let connection = subscriber.connection
            if connection.queuedBytes == 0 { loop.execute { [self] in drained(connection) } }
        }
    }

    private func updateDictionary() {
        let newest = store.newestID
        guard newest != dictionaryFlowID else { return }
        let now = ContinuousClock.now
        if let last = dictionaryTime, now - last < configuration.dictionaryInterval {
            guard !dictionaryScheduled else { return }
            dictionaryScheduled = true
            loop.execute(after: configuration.dictionaryInterval - (now - last)) { [self] in
                dictionaryScheduled = false
                if !subscribers.isEmpty { updateDictionary() }
            }
            return
        }
        dictionaryTime = now
        dictionaryFlowID = newest
        let text = content.minimalDictionary()
        guard text != dictionaryText else { return }
        dictionaryText = text
        let event = dictionaryEvent(text)
        for subscriber in subscribers.values { subscriber.connection.write(event) }
    }

    private func dictionaryEvent(_ plist: String) -> [UInt8] {
        let json = (try? encoder.encode(["plist": plist])).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return Array("event: dictionary\ndata: \(json)\n\n".utf8)
    }
}

/// One connection to the web server: reads a request head with the proxy's HTTP/1 parser and
/// hands it to the server; an event stream stays open afterwards. Loop-confined.
final class WebConnection: TCPConnectionHandler {
    private let server: WebServer
    private var parser = HTTP1Parser(role: .request)
    private var answered = false

    init(server: WebServer) { self.server = server }

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        guard !answered else { return }
        for event in parser.feed(Array(bytes)) {
            switch event {
            case .request(let head, _):
                answered = true
                let lastEventID = head.headers.first("last-event-id").flatMap { Int($0) }
                server.respond(to: head, on: connection, lastEventID: lastEventID)
                return
            case .failed:
                answered = true
                connection.write(WebResponse.text(400, "Bad Request", "bad request\n").serialized(headOnly: false))
                connection.closeAfterFlush()
                return
            case .response, .body, .trailers, .messageEnd, .upgraded:
                continue
            }
        }
    }

    /// The page went away (or sent its request and half-closed): finish what is queued, then close.
    func connectionDidReadEOF(_ connection: TCPConnection) {
        if answered { connection.closeAfterFlush() } else { connection.close() }
    }

    func connectionDidDrain(_ connection: TCPConnection) { server.drained(connection) }

    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
        server.unsubscribe(connection)
    }
}
