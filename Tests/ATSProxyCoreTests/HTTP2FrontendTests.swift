import ATSHTTP2
import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// Playbook tests of the HTTP/2 client side of `ProxySession` (`HTTP2Frontend` and its per-stream lanes): events in,
/// commands out, no sockets. A client-role `HTTP2Session` speaks through an in-memory client TLS engine (ALPN h2) to
/// the session's intercepted tunnel; every lane's upstream is an in-memory origin TLS engine answering raw HTTP/1.1.
@Suite struct HTTP2FrontendTests {
    /// The CONNECT host of every tunnel.
    static let host = "api.example.com"

    // MARK: - Harness

    /// One lane's upstream as the harness plays it: the origin it reaches and everything the lane asked for.
    /// Single-threaded, owned by one `Harness`.
    final class LaneUpstream {
        /// How bytes the lane writes upstream reach the origin.
        enum Mode {
            /// The lane has not asked for a connection yet.
            case none
            /// A fresh connection: an origin TLS server engine.
            case tls(TLSConnection)
            /// HTTP/1.1 in the clear: a parked cleartext connection the pool handed over.
            case plaintext
            /// A channel of a shared HTTP/2 link (handed over by the pool, or the lane's own connection promoted to
            /// one): the lane sends request parts and receives response parts, no text. The harness writes the parts
            /// down as HTTP/1.1 (`received`) and parses the origin's HTTP/1.1 answers into parts, so that the
            /// scenarios read the same for every mode.
            case channel
        }

        var mode: Mode = .none
        /// The plaintext the origin received.
        var received: [UInt8] = []
        /// The TLS engine a `promoteUpstream` handed to the pool (the harness plays the shared link's side of it).
        var link: TLSConnection?
        /// Body framing of the request being written down from channel parts.
        var requestWriter: HTTP1BodyWriter?
        /// Whether channel parts are written down as HTTP/1.1 text in `received`; when false they are only kept in
        /// `sentParts` (the text-free path tests count HTTP/1.1 heads, and the harness must write none).
        var writesDownParts = true
        /// Every request part sent on the channel, in order.
        var sentParts: [HTTPPart] = []
        /// Parses the origin's answers on a channel into the parts a link would hand over.
        var responseParser = HTTP1Parser(role: .response)

        /// Writes request parts down as the HTTP/1.1 text an HTTP/1.1 origin would have received.
        func receive(parts: [HTTPPart]) {
            guard case .channel = mode else {
                Issue.record("the lane sent request parts without a channel")
                return
            }
            sentParts += parts
            guard writesDownParts else { return }
            for part in parts {
                switch part {
                case .request(let head, let framing):
                    HTTP1Serializer.writeRequestHead(head, into: &received)
                    requestWriter = HTTP1BodyWriter(framing: framing)
                    responseParser.requestSent(method: head.method)
                case .body(let slice):
                    try? requestWriter?.write(slice, into: &received)
                case .trailers(let trailers):
                    try? requestWriter?.finish(trailers: trailers, into: &received)
                    requestWriter = nil
                case .messageEnd:
                    try? requestWriter?.finish(into: &received)
                    requestWriter = nil
                case .response, .upgraded, .failed:
                    Issue.record("not a request part: \(part)")
                }
            }
        }

        /// The parts a link would hand over for the origin's HTTP/1.1 `bytes`: an interim head alone (no end).
        func responseParts(_ bytes: [UInt8]) -> [HTTPPart] {
            var parts: [HTTPPart] = []
            var pending = responseParser.feed(bytes)[...]
            var afterInterim = false
            while let event = pending.popFirst() {
                switch event {
                case .response(let head, _):
                    afterInterim = head.isInterim
                    parts.append(event)
                case .messageEnd:
                    if afterInterim {
                        afterInterim = false
                        pending = (responseParser.resume() + pending)[...]
                    } else {
                        parts.append(event)
                        if responseParser.isPaused { pending = (responseParser.resume() + pending)[...] }
                    }
                default:
                    parts.append(event)
                }
            }
            return parts
        }

        /// Feeds bytes the lane wrote; returns the origin's TLS reply (handshake records), if any.
        func deliver(_ bytes: [UInt8]) -> [UInt8]? {
            switch mode {
            case .none:
                Issue.record("the lane wrote upstream before asking for a connection")
                return nil
            case .plaintext:
                received += bytes
                return nil
            case .channel:
                Issue.record("the lane wrote bytes on an HTTP/2 channel")
                return nil
            case .tls(let origin):
                origin.receive(bytes)
                if origin.state != .established {
                    if case .failed(let failure) = origin.handshake() {
                        Issue.record("origin handshake failed: \(failure)")
                    }
                }
                if origin.state == .established {
                    while case .data(let plain) = origin.read() { received += plain }
                }
                return origin.hasOutbound ? origin.takeOutbound() : nil
            }
        }
    }

    /// A `ProxySession` whose client negotiated h2 inside an intercepted tunnel to `host`, the client's TLS and
    /// HTTP/2 engines, and one in-memory origin per lane. `send` runs an event and everything it sets off (client
    /// replies such as SETTINGS ACK and WINDOW_UPDATE, origin handshake records) until nothing moves, and returns
    /// every command of that cascade. Upstream connects are answered only when a test says so (`connect`).
    /// Single-threaded: one test owns one harness.
    final class Harness {
        let proxyCA: CertificateAuthority
        let originCA: CertificateAuthority
        var session: ProxySession
        var now = Date()
        let clientTLS: TLSConnection
        /// The client's HTTP/2 engine; nil for raw-frame tests, whose decrypted input lands in `rawFromProxy`.
        let client: HTTP2Session?
        /// Every event of the client engine, in order.
        var clientEvents: [HTTP2Event] = []
        /// Whether the client acknowledges received DATA at once (false: it sends no WINDOW_UPDATE).
        var clientConsumes = true
        /// DATA bytes the client received and has not acknowledged, per stream.
        var unconsumed: [Int32: Int] = [:]
        /// Decrypted bytes from the proxy when `client` is nil.
        var rawFromProxy: [UInt8] = []
        /// Raw frames queued for the proxy when `client` is nil.
        var rawToProxy: [UInt8] = []
        /// The proxy closed the client TLS (close_notify).
        var clientTLSClosed = false
        /// Every command the session returned, in order.
        var commands: [ProxyCommand] = []
        /// The upstream of each lane that has appeared in a command.
        var lanes: [Int32: LaneUpstream] = [:]
        /// What origins of new connections select in ALPN.
        var originALPN = ["http/1.1"]
        private let originKey: PrivateKey
        private let originLeaf: Certificate

        init(client configuration: HTTP2Configuration? = HTTP2Configuration()) throws {
            proxyCA = try CertificateAuthority.generate()
            originCA = try CertificateAuthority.generate()
            let evaluator = ATSEvaluator(
                configuration: ATSConfigurationParser().parse(.dictionary([:])),
                options: EvaluationOptions(platform: Platform(parsing: "ios:18.0")!))
            let services = ProxyServices(
                policy: PolicyStore(.init(evaluator: evaluator, sourceSummary: "test", processName: "Tester")),
                settings: ProxySettings(),
                serverTLS: try ServerTLSContext(
                    leaves: try LeafCertificateCache(authority: proxyCA),
                    alpn: ServerTLSContext.preferring(["h2", "http/1.1"])),
                upstreamTLS: UpstreamTLSClient(
                    trust: try TrustStore(systemRoots: false, extraAnchors: [originCA.certificate]),
                    alpn: ["h2", "http/1.1"], sessions: nil),
                processID: 100)
            session = ProxySession(services: services, clientAddress: "127.0.0.1:5000", connectionNumber: 1)
            originKey = try PrivateKey.generate(.p256)
            var spec = CertificateSpec(
                notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(86400 * 30))
            spec.commonName = HTTP2FrontendTests.host
            spec.dnsNames = [HTTP2FrontendTests.host]
            originLeaf = try CertificateMinter.mint(
                spec, subjectKey: originKey, issuer: originCA.certificate, issuerKey: originCA.privateKey)
            let clientContext = try TLSContext(role: .client)
            try clientContext.setVersions(minimum: .tls12, maximum: .tls13)
            try clientContext.setClientALPN(["h2"])
            clientTLS = try TLSConnection(context: clientContext, serverName: HTTP2FrontendTests.host)
            client = try configuration.map { try HTTP2Session(role: .client, configuration: $0) }
            try establish()
        }

        /// CONNECT, the client TLS handshake (ALPN h2), then the HTTP/2 prefaces both ways.
        private func establish() throws {
            _ = session.start()
            let host = HTTP2FrontendTests.host
            let connect = session.handle(
                .clientBytes(Array("CONNECT \(host):443 HTTP/1.1\r\nHost: \(host):443\r\n\r\n".utf8)), now: now)
            commands += connect
            let answer = Transcript(connect).clientText
            #expect(answer == "HTTP/1.1 200 Connection established\r\n\r\n")
            for _ in 0..<10 {
                if case .failed(let failure) = clientTLS.handshake() {
                    Issue.record("client handshake failed: \(failure)")
                    return
                }
                let hello = clientTLS.takeOutbound()
                if hello.isEmpty { break }
                let reply = session.handle(.clientBytes(hello), now: now)
                commands += reply
                clientTLS.receive(Transcript(reply).clientBytes)
            }
            try #require(clientTLS.state == .established)
            #expect(clientTLS.negotiatedALPN == "h2")
            readFromProxy()
            flushClient()
        }

        // MARK: Driving

        /// Runs `event` and everything it sets off until nothing moves; returns every command of the cascade.
        @discardableResult
        func send(_ event: ProxyEvent) -> [ProxyCommand] {
            var queue = [event]
            var produced: [ProxyCommand] = []
            var steps = 0
            while !queue.isEmpty {
                steps += 1
                if steps > 100_000 {
                    Issue.record("the playbook did not settle")
                    break
                }
                let out = session.handle(queue.removeFirst(), now: now)
                produced += out
                queue += route(out)
            }
            commands += produced
            return produced
        }

        /// Sends what the client has queued (frames, WINDOW_UPDATEs, raw bytes) and runs the cascade.
        @discardableResult
        func flushClient() -> [ProxyCommand] {
            let bytes = clientOutbound()
            return bytes.isEmpty ? [] : send(.clientBytes(bytes))
        }

        /// Opens a request stream and sends it; returns its id and the commands it caused.
        func request(
            _ path: String = "/path", method: String = "GET", authority: String = HTTP2FrontendTests.host,
            headers: [HTTP2Header] = [], body: [UInt8]? = nil, endStream: Bool = true
        ) throws -> (stream: Int32, commands: [ProxyCommand]) {
            let client = try #require(client)
            var fields = [HTTP2Header(":method", method)]
            if method == "CONNECT" {
                fields.append(HTTP2Header(":authority", authority))
            } else {
                fields += [
                    HTTP2Header(":scheme", "https"), HTTP2Header(":authority", authority), HTTP2Header(":path", path),
                ]
            }
            fields += headers
            let stream: Int32
            if let body {
                stream = try client.submitRequest(fields, endStream: false)
                try client.submitData(stream: stream, bytes: body, endStream: endStream)
            } else {
                stream = try client.submitRequest(fields, endStream: endStream)
            }
            return (stream, flushClient())
        }

        /// Answers the lane's connectUpstream with a fresh TCP connection; the TLS handshake runs in the cascade.
        @discardableResult
        func connect(lane: Int32) -> [ProxyCommand] {
            send(.stream(lane, .upstreamConnected))
        }

        /// Answers the lane's connectUpstream with a pooled connection (plaintext from then on) or an HTTP/2 channel.
        @discardableResult
        func reuse(lane: Int32, _ lease: UpstreamLease) -> [ProxyCommand] {
            upstream(lane).mode = lease.wire == .h2 ? .channel : .plaintext
            return send(.stream(lane, .upstreamReused(lease)))
        }

        /// The lane's origin sends `text`.
        @discardableResult
        func respond(lane: Int32, _ text: String) -> [ProxyCommand] {
            respond(lane: lane, Array(text.utf8))
        }

        /// The lane's origin sends `bytes` (encrypted on a TLS connection).
        @discardableResult
        func respond(lane: Int32, _ bytes: [UInt8]) -> [ProxyCommand] {
            switch upstream(lane).mode {
            case .none:
                Issue.record("lane \(lane) has no upstream to answer from")
                return []
            case .plaintext:
                return send(.stream(lane, .upstreamBytes(bytes)))
            case .channel:
                return send(.stream(lane, .upstreamParts(upstream(lane).responseParts(bytes))))
            case .tls(let origin):
                HTTP2FrontendTests.write(bytes, to: origin)
                return send(.stream(lane, .upstreamBytes(origin.takeOutbound())))
            }
        }

        /// The client acknowledges every DATA byte it received so far and sends the WINDOW_UPDATEs.
        @discardableResult
        func consumeReceived() -> [ProxyCommand] {
            for (stream, count) in unconsumed { client?.consume(stream: stream, bytes: count) }
            unconsumed = [:]
            return flushClient()
        }

        // MARK: Views

        /// The harness's record of lane `id` (created on first use).
        func upstream(_ id: Int32) -> LaneUpstream {
            if let lane = lanes[id] { return lane }
            let lane = LaneUpstream()
            lanes[id] = lane
            return lane
        }

        /// What the origin of lane `id` received, as text.
        func received(lane id: Int32) -> String { HTTP2FrontendTests.text(lanes[id]?.received ?? []) }

        /// The client's view of one stream.
        func stream(_ id: Int32) -> ClientStream {
            var view = ClientStream()
            for event in clientEvents {
                switch event {
                case .headers(id, .informational, _):
                    view.shape += "I"
                case .headers(id, .response, let fields):
                    view.head = fields
                    view.shape += "H"
                case .headers(id, .trailers, let fields):
                    view.trailers = fields
                    view.shape += "T"
                case .data(id, let bytes):
                    view.body += bytes
                    if !view.shape.hasSuffix("D") { view.shape += "D" }
                case .streamEnded(id):
                    view.shape += "E"
                case .streamReset(id, let error):
                    view.reset = error
                    view.shape += "R"
                default:
                    break
                }
            }
            return view
        }

        // MARK: Plumbing

        /// Carries out the commands that have a peer in the harness; returns the events they cause. An origin's TLS
        /// reply reaches its lane only if the lane still owns the connection: after `promoteUpstream` in the same
        /// batch (a TLS 1.3 ticket answering the client Finished) it goes to the lease's engine, as the pool's
        /// shared link would take it.
        private func route(_ commands: [ProxyCommand]) -> [ProxyEvent] {
            var next: [ProxyEvent] = []
            var originReplies: [(lane: Int32, bytes: [UInt8])] = []
            for command in commands {
                switch command {
                case .writeToClient(let bytes):
                    clientTLS.receive(bytes)
                    readFromProxy()
                    let reply = clientOutbound()
                    if !reply.isEmpty { next.append(.clientBytes(reply)) }
                case .stream(let id, let inner):
                    let lane = upstream(id)
                    switch inner {
                    case .connectUpstream:
                        do {
                            lane.mode = .tls(try makeOrigin())
                        } catch {
                            Issue.record("cannot make an origin: \(error)")
                        }
                    case .writeToUpstream(let bytes):
                        if let reply = lane.deliver(bytes) { originReplies.append((id, reply)) }
                    case .sendToUpstreamChannel(let parts):
                        lane.receive(parts: parts)
                    case .promoteUpstream(let lease):
                        lane.mode = .channel
                        lane.link = lease.tls
                    default:
                        break
                    }
                default:
                    break
                }
            }
            for (id, bytes) in originReplies {
                if case .tls = upstream(id).mode {
                    next.append(.stream(id, .upstreamBytes(bytes)))
                } else if let link = upstream(id).link {
                    link.receive(bytes)
                    if case .data(let plain) = link.read() {
                        Issue.record("the origin sent \(plain.count) application bytes before any request")
                    }
                }
            }
            return next
        }

        /// Decrypts what the proxy sent and hands it to the client engine (or to `rawFromProxy`).
        private func readFromProxy() {
            while true {
                switch clientTLS.read() {
                case .data(let plain):
                    if let client {
                        record(client.receive(plain))
                    } else {
                        rawFromProxy += plain
                    }
                case .needsInput:
                    return
                case .closed:
                    clientTLSClosed = true
                    return
                case .failed(let failure):
                    Issue.record("client TLS failed: \(failure)")
                    return
                }
            }
        }

        private func record(_ events: [HTTP2Event]) {
            for event in events {
                clientEvents.append(event)
                if case .data(let stream, let bytes) = event {
                    if clientConsumes {
                        client?.consume(stream: stream, bytes: bytes.count)
                    } else {
                        unconsumed[stream, default: 0] += bytes.count
                    }
                }
            }
        }

        /// The client's pending output, encrypted.
        private func clientOutbound() -> [UInt8] {
            var plain = rawToProxy
            rawToProxy = []
            if let client {
                plain += client.takeOutbound()
                record(client.takeEvents())
            }
            guard !plain.isEmpty, !clientTLSClosed else { return [] }
            HTTP2FrontendTests.write(plain, to: clientTLS)
            return clientTLS.takeOutbound()
        }

        /// A fresh origin TLS server engine for `host` that selects from `originALPN`.
        private func makeOrigin() throws -> TLSConnection {
            let context = try TLSContext(role: .server)
            try context.setVersions(minimum: .tls12, maximum: .tls13)
            try context.useCertificate(originLeaf, key: originKey)
            context.setALPNSelector(ServerTLSContext.preferring(originALPN))
            return try TLSConnection(context: context, serverName: nil)
        }
    }

    /// What the client engine saw on one stream. `shape` spells the events in order: I interim head, H response head,
    /// D data (consecutive frames once), T trailers, E end of stream, R reset by the proxy.
    struct ClientStream {
        var head: [HTTP2Header]?
        var body: [UInt8] = []
        var trailers: [HTTP2Header]?
        var reset: HTTP2ErrorCode?
        var shape = ""
        /// The body as text.
        var text: String { HTTP2FrontendTests.text(body) }
    }

    /// One `connectUpstream` of a lane.
    // MARK: - Command helpers

    /// Encrypts all of `plain` (the engine takes at most one record per call).
    static func write(_ plain: [UInt8], to connection: TLSConnection) {
        var offset = 0
        while offset < plain.count {
            let written = connection.write(Array(plain[offset...]))
            guard written > 0 else {
                Issue.record("TLS write failed after \(offset) of \(plain.count) bytes")
                return
            }
            offset += written
        }
    }

    /// nil when `actual == expected`, else a short account of the first difference (bodies are too long to print).
    static func difference(_ actual: [UInt8], _ expected: [UInt8]) -> String? {
        guard actual != expected else { return nil }
        let common = zip(actual, expected).prefix { $0 == $1 }.count
        return "\(actual.count) bytes instead of \(expected.count), first difference at offset \(common)"
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// `Transcript.names` without timer commands and client writes: the commands whose order a scenario is about.
    static func outline(_ commands: [ProxyCommand]) -> [String] {
        Transcript(commands).names.filter {
            !$0.hasSuffix("Timer") && !$0.contains("armTimer") && $0 != "writeToClient"
                && !$0.hasSuffix("upstreamSettled")
        }
    }

    /// The HTTP/1.1 requests in what an origin received: heads, de-chunked bodies, trailers, and whether each ended.
    static func parseRequests(_ bytes: [UInt8]) -> [OriginRequest] {
        var requests: [OriginRequest] = []
        for event in HTTP1ParseRun(bytes).events {
            switch event {
            case .request(let head, let framing):
                requests.append(OriginRequest(head: head, framing: framing))
            case .body(let slice):
                requests[requests.count - 1].body += slice
            case .trailers(let trailers):
                requests[requests.count - 1].trailers = trailers
            case .messageEnd:
                requests[requests.count - 1].ended = true
            case .response, .upgraded, .failed:
                Issue.record("the origin received something that is not an HTTP/1.1 request: \(event)")
            }
        }
        return requests
    }

    /// One request as an origin received it.
    struct OriginRequest: CustomStringConvertible {
        let head: HTTPRequestHead
        let framing: HTTPBodyFraming
        var body: [UInt8] = []
        var trailers: HTTPFields?
        var ended = false

        /// A one-line summary (failure messages would otherwise print whole bodies).
        var description: String {
            "\(head.method) \(head.target) \(framing), \(body.count) body bytes, ended: \(ended)"
        }
    }

    /// A request header list for `path` on the tunnel host.
    static func requestFields(_ path: String, method: String = "GET") -> [HTTP2Header] {
        [
            HTTP2Header(":method", method), HTTP2Header(":scheme", "https"), HTTP2Header(":authority", host),
            HTTP2Header(":path", path),
        ]
    }

    /// `<UUID>` of a task id `<UUID>>.<N>`.
    static func taskUUID(_ record: RequestRecord) -> Substring {
        record.taskID.prefix { $0 != "." }
    }
}

// MARK: - Streams become requests

extension HTTP2FrontendTests {
    /// One way an origin frames its response, and what the client must see on the stream.
    struct ResponseCase: Sendable, CustomTestStringConvertible {
        let name: String
        let wire: String
        let head: [HTTP2Header]
        let body: String
        let trailers: [HTTP2Header]?
        let shape: String
        var testDescription: String { name }
    }

    static let responseCases = [
        ResponseCase(
            name: "content-length",
            wire: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world",
            head: [
                HTTP2Header(":status", "200"), HTTP2Header("content-type", "text/plain"),
                HTTP2Header("content-length", "11"),
            ],
            body: "hello world", trailers: nil, shape: "HDE"),
        ResponseCase(
            name: "chunked",
            wire:
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            head: [HTTP2Header(":status", "200"), HTTP2Header("content-type", "text/plain")],
            body: "hello world", trailers: nil, shape: "HDE"),
        ResponseCase(
            name: "chunked with trailers",
            wire:
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\nb\r\nhello world\r\n0\r\nX-Checksum: abc\r\n\r\n",
            head: [HTTP2Header(":status", "200")],
            body: "hello world", trailers: [HTTP2Header("x-checksum", "abc")], shape: "HDTE"),
    ]

    @Test(arguments: responseCases)
    func aGetStreamIsForwardedAsHTTP1AndItsResponseComesBackOnTheStream(_ response: ResponseCase) throws {
        let harness = try Harness()
        let settings = harness.clientEvents.compactMap { if case .settings(let entries) = $0 { entries } else { nil } }
        #expect(settings.count == 1)
        let proxySettings = try #require(settings.first)
        #expect(proxySettings.contains(HTTP2Setting(.maxConcurrentStreams, 100)))
        #expect(proxySettings.contains(HTTP2Setting(.initialWindowSize, 65_535)))
        #expect(harness.clientEvents.contains(.settingsAcknowledged))

        let (stream, opened) = try harness.request(
            "/path?q=1", headers: [HTTP2Header("accept", "text/plain"), HTTP2Header("user-agent", "Tester/1")])
        #expect(stream == 1)
        let connects = Transcript(opened).laneConnects
        #expect(connects.count == 1)
        let connect = try #require(connects.first)
        #expect(connect.lane == 1 && connect.host == Self.host && connect.port == 443)
        let key = try #require(connect.reuse)
        #expect(key.host == Self.host && key.port == 443 && key.requirements != nil && !key.permissive)
        #expect(harness.received(lane: 1).isEmpty)

        harness.connect(lane: 1)
        let forwarded = harness.received(lane: 1)
        #expect(forwarded.hasPrefix("GET /path?q=1 HTTP/1.1\r\n"))
        let requests = Self.parseRequests(harness.lanes[1]?.received ?? [])
        #expect(requests.count == 1)
        let request = try #require(requests.first)
        #expect(request.head.method == "GET" && request.head.target == .origin("/path?q=1"))
        #expect(request.head.version == .http11 && request.framing == .none && request.ended)
        #expect(request.head.headers.first("Host") == Self.host)
        #expect(request.head.headers.first("Accept") == "text/plain")
        #expect(request.head.headers.first("User-Agent") == "Tester/1")
        #expect(!request.head.headers.fields.isEmpty)
        #expect(request.head.headers.fields.allSatisfy { !$0.name.hasPrefix(":") })
        #expect(!forwarded.contains(":authority") && !forwarded.contains(":path"))

        let answered = harness.respond(lane: 1, response.wire)
        let view = harness.stream(stream)
        #expect(view.shape == response.shape)
        #expect(view.head == response.head)
        #expect(view.text == response.body)
        #expect(view.trailers == response.trailers)

        let records = Transcript(answered).records
        #expect(records.count == 1)
        let record = try #require(records.first)
        #expect(record.httpProtocol == "h2")
        #expect(record.method == "GET")
        #expect(record.url == "https://api.example.com/path?q=1")
        #expect(record.status == 200 && record.result == .completed)
        #expect(record.taskID.hasSuffix(".1"))
        #expect(record.bytesToClient == 11)
        #expect(record.tls?["version"] == "TLSv1.3")
    }

    @Test func concurrentStreamsGetTheirOwnLanesAndAnswersInReverseOrderReachTheRightStreams() throws {
        let harness = try Harness()
        let (first, openedFirst) = try harness.request("/one")
        let (second, openedSecond) = try harness.request("/two")
        #expect(Transcript(openedFirst).laneConnects.map(\.lane) == [1])
        #expect(Transcript(openedSecond).laneConnects.map(\.lane) == [2])
        harness.connect(lane: 1)
        harness.connect(lane: 2)
        #expect(harness.received(lane: 1).hasPrefix("GET /one HTTP/1.1\r\n"))
        #expect(harness.received(lane: 2).hasPrefix("GET /two HTTP/1.1\r\n"))

        let secondDone = harness.respond(lane: 2, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo")
        #expect(harness.stream(second).shape == "HDE" && harness.stream(second).text == "two")
        #expect(harness.stream(first).shape == "")
        let firstDone = harness.respond(lane: 1, "HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\none")
        #expect(harness.stream(first).shape == "HDE" && harness.stream(first).text == "one")
        #expect(harness.stream(first).head?.first == HTTP2Header(":status", "201"))
        #expect(harness.stream(second).text == "two")

        let records = Transcript(secondDone).records + Transcript(firstDone).records
        #expect(records.map(\.url) == ["https://api.example.com/two", "https://api.example.com/one"])
        #expect(records.map(\.status) == [200, 201])
        #expect(records.map { String($0.taskID.suffix(2)) } == [".2", ".1"])
        #expect(Set(records.map(Self.taskUUID)).count == 1)
    }

    @Test func anIdleLaneHandsItsUpstreamBackAfterTheLingerAndItsNextStreamAsksThePool() throws {
        let harness = try Harness()
        let (first, _) = try harness.request("/first")
        harness.connect(lane: 1)
        let done = harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
        #expect(harness.stream(first).shape == "HDE")
        // The idle lane's timer runs in stages, like an idle HTTP/1.1 client's: after 50 ms its upstream engine
        // frees its record buffers, after the linger (1 s) the upstream goes back to the pool.
        #expect(Transcript(done).names.last { $0.hasPrefix("1:armTimer") } == "1:armTimer(0.05)")
        let buffersFreed = Transcript(harness.send(.stream(1, .timerFired))).names
        #expect(!buffersFreed.contains("1:releaseUpstream"), "\(buffersFreed)")
        #expect(buffersFreed.last { $0.hasPrefix("1:armTimer") } == "1:armTimer(0.95)")

        let fired = Transcript(harness.send(.stream(1, .timerFired))).names
        #expect(fired.contains("1:releaseUpstream"), "\(fired)")
        #expect(!fired.contains("1:closeClient"))
        #expect(fired.last { $0.hasPrefix("1:armTimer") } == "1:armTimer(59)")

        // The lane's next stream asks the pool for the same key.
        let (second, opened) = try harness.request("/second")
        let connects = Transcript(opened).laneConnects
        #expect(connects.map(\.lane) == [1])
        #expect(connects.first?.reuse != nil)
        harness.connect(lane: 1)
        harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb")
        #expect(harness.stream(second).shape == "HDE" && harness.stream(second).text == "b")
    }

    @Test func aSequentialStreamReusesTheIdleLaneAndItsUpstream() throws {
        let harness = try Harness()
        let (first, _) = try harness.request("/first")
        harness.connect(lane: 1)
        let firstDone = harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
        #expect(harness.stream(first).shape == "HDE")
        #expect(!Transcript(firstDone).names.contains("1:closeClient"))

        let (second, opened) = try harness.request("/second")
        #expect(second == 3)
        #expect(Transcript(opened).laneConnects.isEmpty)
        let laneNames = Transcript(opened).names.filter { $0.contains(":") }
        #expect(!laneNames.isEmpty)
        #expect(laneNames.allSatisfy { $0.hasPrefix("1:") })
        #expect(laneNames.contains("1:writeToUpstream"))
        let requests = Self.parseRequests(harness.lanes[1]?.received ?? [])
        #expect(requests.map(\.head.target) == [.origin("/first"), .origin("/second")])

        let secondDone = harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb")
        #expect(harness.stream(second).shape == "HDE" && harness.stream(second).text == "b")
        #expect(Transcript(harness.commands).laneConnects.count == 1)
        let records = Transcript(firstDone).records + Transcript(secondDone).records
        #expect(records.count == 2)
        #expect(records.map { String($0.taskID.suffix(2)) } == [".1", ".2"])
        #expect(records.allSatisfy { $0.tls?["version"] == "TLSv1.3" })
    }
}

// MARK: - Streams the proxy answers itself

extension HTTP2FrontendTests {
    @Test(arguments: ["other.example.com", "api.example.com:8443"])
    func aStreamForAnotherAuthorityGets421WhileItsNeighbourSucceeds(authority: String) throws {
        let harness = try Harness()
        let (normal, _) = try harness.request("/ok")
        let (misdirected, refused) = try harness.request("/elsewhere", authority: authority)
        #expect(!refused.isEmpty)
        #expect(!Transcript(refused).touchesALane)
        let text =
            "ats-proxy: this connection's certificate covers api.example.com only; open a new connection for \(authority)\n"
        let view = harness.stream(misdirected)
        #expect(view.shape == "HDE")
        #expect(
            view.head == [
                HTTP2Header(":status", "421"), HTTP2Header("content-type", "text/plain; charset=utf-8"),
                HTTP2Header("content-length", String(text.utf8.count)),
            ])
        #expect(view.text == text)
        let records = Transcript(refused).records
        #expect(records.count == 1)
        let record = try #require(records.first)
        #expect(record.status == 421 && record.result == .refused && record.httpProtocol == "h2")
        #expect(record.url == "https://\(authority)/elsewhere")
        #expect(record.taskID.hasSuffix(".2"))

        harness.connect(lane: 1)
        let done = harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(harness.stream(normal).shape == "HDE" && harness.stream(normal).text == "ok")
        #expect(Transcript(done).records.map(\.status) == [200])
        #expect(Transcript(harness.commands).laneConnects.count == 1)
    }

    @Test func aConnectStreamInsideTheTunnelGets405AndNothingUpstream() throws {
        let harness = try Harness()
        let (stream, commands) = try harness.request(
            method: "CONNECT", authority: "db.example.com:5432", endStream: false)
        #expect(!commands.isEmpty)
        #expect(!Transcript(commands).touchesALane)
        let view = harness.stream(stream)
        #expect(view.shape == "HDE")
        #expect(view.head?.first == HTTP2Header(":status", "405"))
        #expect(view.text == "ats-proxy: CONNECT is not supported inside an intercepted HTTP/2 tunnel\n")
        let records = Transcript(commands).records
        #expect(records.count == 1)
        #expect(records.first?.method == "CONNECT" && records.first?.status == 405)
        #expect(records.first?.httpProtocol == "h2")
    }

    @Test func aHeaderBlockWithoutPathIsResetWithProtocolErrorAndNothingGoesUpstream() throws {
        let harness = try Harness(client: nil)
        let authority: [UInt8] = [0x41] + RawH2.hpackString(Self.host)
        harness.rawToProxy = RawH2.clientStart + RawH2.headers(stream: 1, block: [0x82, 0x87] + authority)
        let commands = harness.flushClient()
        #expect(!commands.isEmpty)
        #expect(RawH2.resets(in: harness.rawFromProxy) == [RawH2.RawReset(stream: 1, code: 0x1)])
        #expect(RawH2.goAwayCodes(in: harness.rawFromProxy).isEmpty)
        #expect(!Transcript(commands).touchesALane)
        #expect(Transcript(commands).records.isEmpty)
        #expect(!Transcript(commands).names.contains("closeClient"))

        // The connection still serves a well-formed stream.
        harness.rawToProxy = RawH2.headers(stream: 3, block: [0x82, 0x87, 0x84] + authority)
        let next = harness.flushClient()
        #expect(Transcript(next).laneConnects.map(\.lane) == [1])
    }
}

// MARK: - Streams that end early

extension HTTP2FrontendTests {
    @Test func aClientResetMidResponseClosesTheLaneAndLogsTheAbandonedRequest() throws {
        let harness = try Harness()
        let client = try #require(harness.client)
        let (stream, _) = try harness.request("/slow")
        harness.connect(lane: 1)
        harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
        #expect(harness.stream(stream).shape == "HD" && harness.stream(stream).text == "hello")

        try client.resetStream(stream: stream, error: .cancel)
        let reset = harness.flushClient()
        #expect(Self.outline(reset) == ["log", "1:closeUpstream", "1:closeClient"])
        let records = Transcript(reset).records
        #expect(records.count == 1)
        let record = try #require(records.first)
        #expect(record.result == .failed)
        // Named as what happened (issue 29): the client reset one stream; its connection stays open.
        #expect(record.rule == "the client reset its stream (RST_STREAM CANCEL) before the response was complete")
        #expect(record.url == "https://api.example.com/slow" && record.status == 200)

        // The closed lane is not reused, and late bytes of its upstream go nowhere.
        #expect(!Transcript(harness.send(.stream(1, .upstreamBytes(Array("world".utf8))))).touchesALane)
        let (_, next) = try harness.request("/next")
        #expect(Transcript(next).laneConnects.map(\.lane) == [2])
    }

    @Test func anOriginResetMidBodyResetsOnlyItsStream() throws {
        let harness = try Harness()
        let (broken, _) = try harness.request("/broken")
        let (healthy, _) = try harness.request("/healthy")
        harness.connect(lane: 1)
        harness.connect(lane: 2)
        harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        harness.respond(lane: 2, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nheal")

        let failed = harness.send(.stream(1, .upstreamReset))
        #expect(Self.outline(failed) == ["1:closeUpstream", "log", "1:closeClient"])
        let lost = try #require(Transcript(failed).records.first)
        #expect(lost.url == "https://api.example.com/broken")
        #expect(lost.result == .failed)
        #expect(lost.errorCode == -1005)
        #expect(lost.httpProtocol == "h2")
        #expect(!Transcript(failed).names.contains { $0.hasPrefix("2:") })
        let brokenView = harness.stream(broken)
        #expect(brokenView.shape == "HDR")
        #expect(brokenView.reset == .internalError)
        #expect(brokenView.text == "partial")
        #expect(harness.stream(healthy).shape == "HD")

        let done = harness.respond(lane: 2, "thy!")
        #expect(harness.stream(healthy).shape == "HDE" && harness.stream(healthy).text == "healthy!")
        #expect(Transcript(done).records.map(\.url) == ["https://api.example.com/healthy"])
    }

    @Test func anOriginsSwitchingProtocolsOnAStreamIsABadResponseNotText() throws {
        let harness = try Harness()
        let (stream, _) = try harness.request("/socket")
        harness.connect(lane: 1)
        let answered = harness.respond(
            lane: 1, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        let record = try #require(Transcript(answered).records.first)
        #expect(record.result == .failed)
        #expect(record.errorCode == -1011)
        #expect(record.status == 502)
        #expect(Transcript(answered).lane(1).clientBytes.isEmpty)  // no HTTP/1.1 text from the lane
        let view = harness.stream(stream)
        #expect(view.shape == "HDE")
        #expect(view.head?.first { $0.name == ":status" }?.value == "502")
    }
}

// MARK: - Bodies and flow control

extension HTTP2FrontendTests {
    @Test(arguments: [false, true])
    func aRequestBodyArrivesIntactAndIsNotAcknowledgedWhileTheUpstreamOpens(declaresLength: Bool) throws {
        let harness = try Harness()
        let client = try #require(harness.client)
        let first = testBody(seed: 7, count: 40_000)
        let rest = testBody(seed: 8, count: 1_000)
        var headers = [HTTP2Header("content-type", "application/octet-stream")]
        if declaresLength { headers.append(HTTP2Header("content-length", "41000")) }
        let (stream, opened) = try harness.request(
            "/upload", method: "POST", headers: headers, body: first, endStream: false)
        #expect(Transcript(opened).laneConnects.map(\.lane) == [1])
        #expect(client.sendWindow(stream: stream) == 65_535 - 40_000)

        harness.connect(lane: 1)
        #expect(client.sendWindow(stream: stream) == 65_535)
        try client.submitData(stream: stream, bytes: rest, endStream: true)
        harness.flushClient()

        let requests = Self.parseRequests(harness.lanes[1]?.received ?? [])
        #expect(requests.count == 1)
        let request = try #require(requests.first)
        #expect(request.head.method == "POST" && request.head.target == .origin("/upload"))
        #expect(request.ended)
        #expect(Self.difference(request.body, first + rest) == nil)
        if declaresLength {
            #expect(request.framing == .contentLength(41_000))
            #expect(request.head.headers.first("Content-Length") == "41000")
            #expect(!request.head.headers.contains("Transfer-Encoding"))
        } else {
            #expect(request.framing == .chunked)
            #expect(request.head.headers.first("Transfer-Encoding") == "chunked")
            #expect(!request.head.headers.contains("Content-Length"))
        }

        let done = harness.respond(lane: 1, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        #expect(harness.stream(stream).shape == "HE")
        #expect(harness.stream(stream).head?.first == HTTP2Header(":status", "201"))
        let records = Transcript(done).records
        #expect(records.count == 1)
        #expect(records.first?.method == "POST" && records.first?.status == 201)
        #expect(records.first?.bytesFromClient == 41_000)
    }

    @Test func anUpstreamThatBacksUpWithholdsOnlyItsOwnStreamsCredit() throws {
        // Amounts over half the 65,535 window: nghttp2 sends WINDOW_UPDATE once half of it is consumed.
        let harness = try Harness()
        let client = try #require(harness.client)
        let headers = [HTTP2Header("content-type", "application/octet-stream")]
        let first = testBody(seed: 1, count: 40_000)
        let second = testBody(seed: 2, count: 40_000)
        let (slow, _) = try harness.request("/slow", method: "POST", headers: headers, body: first, endStream: false)
        harness.connect(lane: 1)
        #expect(client.sendWindow(stream: slow) == 65_535)

        // Lane 1's upstream stops taking bytes: what its stream sends now is forwarded but not acknowledged.
        harness.send(.stream(1, .upstreamWritable(false)))
        try client.submitData(stream: slow, bytes: second, endStream: false)
        harness.flushClient()
        #expect(client.sendWindow(stream: slow) == 65_535 - 40_000)

        // Another stream of the same connection keeps its full credit.
        let (fast, _) = try harness.request(
            "/fast", method: "POST", headers: headers, body: testBody(seed: 3, count: 40_000), endStream: true)
        harness.connect(lane: 2)
        #expect(client.sendWindow(stream: fast) == 65_535)
        #expect(client.sendWindow(stream: slow) == 65_535 - 40_000)

        // Drained: the held credit goes back to the client.
        harness.send(.stream(1, .upstreamWritable(true)))
        #expect(client.sendWindow(stream: slow) == 65_535)
        try client.submitData(stream: slow, bytes: [], endStream: true)
        harness.flushClient()
        let received = Self.parseRequests(harness.lanes[1]?.received ?? [])
        #expect(received.first?.ended == true)
        #expect(Self.difference(received.first?.body ?? [], first + second) == nil)
    }

    @Test func aClientThatStopsReadingPausesTheLaneUpstreamUntilItsWindowReopens() throws {
        var configuration = HTTP2Configuration()
        configuration.initialWindowSize = 4_096
        let harness = try Harness(client: configuration)
        harness.clientConsumes = false
        let body = testBody(seed: 3, count: 400_000)
        let (stream, _) = try harness.request("/large")
        harness.connect(lane: 1)

        let head = Array("HTTP/1.1 200 OK\r\nContent-Length: 400000\r\n\r\n".utf8)
        let firstPart = Transcript(harness.respond(lane: 1, head + body[..<300_000])).names
        #expect(firstPart.filter { $0 == "1:pauseUpstreamReads" }.count == 1)
        #expect(!firstPart.contains("1:resumeUpstreamReads"))
        #expect(harness.stream(stream).shape == "HD")
        #expect(harness.stream(stream).body.count == 4_096)

        harness.clientConsumes = true
        let drained = Transcript(harness.consumeReceived()).names
        #expect(drained.filter { $0 == "1:resumeUpstreamReads" }.count == 1)
        #expect(!drained.contains("1:pauseUpstreamReads"))
        #expect(harness.stream(stream).body.count == 300_000)

        let rest = harness.respond(lane: 1, Array(body[300_000...]))
        #expect(!Transcript(rest).names.contains("1:pauseUpstreamReads"))
        let view = harness.stream(stream)
        #expect(view.shape == "HDE")
        #expect(Self.difference(view.body, body) == nil)
        #expect(Transcript(rest).records.first?.bytesToClient == 400_000)
    }

    @Test func unreadStreamsPauseTogetherOnceTheConnectionHoldsTooMuchButAReadStreamFlows() throws {
        var configuration = HTTP2Configuration()
        configuration.initialWindowSize = 4_096
        configuration.connectionWindowSize = 16 << 20
        let harness = try Harness(client: configuration)
        harness.clientConsumes = false
        // Responses of 300,000 bytes whose first 240,000 arrive in three reads: under the per-stream mark, and
        // unread beyond the first 4 KiB window. Together they pass the connection's 4 MiB at the 18th stream.
        let length = 300_000
        let piece = 80_000
        let mark = HTTP2Frontend.connectionResponseHighWatermark
        #expect(3 * piece < HTTP2Frontend.responseHighWatermark)
        let crossing = try #require((1...40).first { $0 * (3 * piece - 4_096) > mark })
        var streams: [Int32] = []
        for _ in 0..<crossing { streams.append(try harness.request("/part").stream) }
        let head = Array("HTTP/1.1 200 OK\r\nContent-Length: \(length)\r\n\r\n".utf8)
        func body(_ lane: Int) -> [UInt8] { testBody(seed: lane, count: length) }
        for lane in 1...crossing {
            harness.connect(lane: Int32(lane))
            var paused: [String] = []
            for part in 0..<3 {
                let bytes = Array(body(lane)[part * piece..<(part + 1) * piece])
                paused += Transcript(harness.respond(lane: Int32(lane), part == 0 ? head + bytes : bytes)).names
                    .filter { $0.hasSuffix(":pauseUpstreamReads") }
            }
            // Below the mark nothing pauses; at the crossing every stream holding unread bytes does.
            #expect(
                paused.sorted() == (lane < crossing ? [] : (1...crossing).map { "\($0):pauseUpstreamReads" }.sorted()),
                "\(lane)")
        }

        // A stream whose bytes go out at once is not held back by the others.
        let (small, _) = try harness.request("/small")
        let smallLane = Int32(crossing + 1)
        harness.connect(lane: smallLane)
        let smallBody = testBody(seed: 99, count: 6_000)
        let answer = Transcript(
            harness.respond(
                lane: smallLane,
                Array("HTTP/1.1 200 OK\r\nContent-Length: 6000\r\n\r\n".utf8) + Array(smallBody[..<3_000]))
        ).names
        #expect(!answer.contains("\(smallLane):pauseUpstreamReads"))
        #expect(harness.stream(small).body == Array(smallBody[..<3_000]))

        // As the client reads, every paused lane resumes; the rest of every body then arrives whole.
        harness.clientConsumes = true
        var resumed: Set<String> = []
        for _ in 0..<2_000 where resumed.count < crossing {
            for name in Transcript(harness.consumeReceived()).names where name.hasSuffix(":resumeUpstreamReads") {
                resumed.insert(name)
            }
        }
        #expect(resumed == Set((1...crossing).map { "\($0):resumeUpstreamReads" }))
        for lane in 1...crossing { harness.respond(lane: Int32(lane), Array(body(lane)[(3 * piece)...])) }
        harness.respond(lane: smallLane, Array(smallBody[3_000...]))
        for _ in 0..<200 { harness.consumeReceived() }
        for (index, stream) in streams.enumerated() {
            #expect(harness.stream(stream).body == body(index + 1), "stream \(stream)")
        }
        #expect(harness.stream(small).body == smallBody)
    }
}

// MARK: - Upstream hand-over

extension HTTP2FrontendTests {
    @Test func aPooledUpstreamCarriesTheStreamInPlaintextAndIsReleasedWhenTheClientLeaves() throws {
        let harness = try Harness()
        let (stream, opened) = try harness.request("/pooled")
        let key = try #require(Transcript(opened).laneConnects.first?.reuse)
        let lease = UpstreamLease(
            key: key, tls: nil, facts: ["version": "TLSv1.3"], wire: .h2, shareable: true)
        let handed = harness.reuse(lane: 1, lease)
        #expect(Transcript(handed).laneConnects.isEmpty)
        #expect(Transcript(handed).lane(1).upstreamBytes.isEmpty, "no HTTP/1.1 text on a channel")
        let written = harness.received(lane: 1)
        #expect(written.hasPrefix("GET /pooled HTTP/1.1\r\n"))
        #expect(written.contains("\r\nHost: api.example.com\r\n") || written.contains("\r\nhost: api.example.com\r\n"))

        let done = harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(harness.stream(stream).shape == "HDE" && harness.stream(stream).text == "ok")
        let records = Transcript(done).records
        #expect(records.count == 1)
        #expect(records.first?.tls == ["version": "TLSv1.3"])
        #expect(!Transcript(done).names.contains("1:releaseUpstream"))

        let gone = harness.send(.clientGone)
        #expect(Self.outline(gone) == ["1:releaseUpstream", "1:closeClient", "closeClient"])
        let released = Transcript(gone).lane(1).releases
        #expect(released.count == 1)
        let returned = try #require(released.first)
        #expect(returned.key == key && returned.tls == nil && returned.facts == ["version": "TLSv1.3"])
        #expect(returned.wire == .h2 && returned.shareable)
        #expect(Transcript(gone).records.isEmpty)
    }

    @Test func anOriginThatChoosesH2IsPromotedAndTheLaneSendsItsRequestAsParts() throws {
        let harness = try Harness()
        harness.originALPN = ["h2"]
        let (stream, opened) = try harness.request("/promoted")
        let key = try #require(Transcript(opened).laneConnects.first?.reuse)

        let lane = Transcript(harness.connect(lane: 1)).lane(1).commands
        let promotions = lane.enumerated().compactMap { index, command in
            if case .promoteUpstream(let lease) = command { (index, lease) } else { nil }
        }
        #expect(promotions.count == 1)
        let (index, lease) = try #require(promotions.first)
        #expect(lease.key == key && lease.wire == .h2 && lease.shareable)
        let tls = try #require(lease.tls)
        #expect(tls.state == .established && tls.negotiatedALPN == "h2")
        #expect(lease.facts?["version"] == "TLSv1.3")
        let after = Array(lane[(index + 1)...])
        #expect(Transcript(after).upstreamBytes.isEmpty, "no HTTP/1.1 text after the promotion")
        let parts = Transcript(after).channelParts
        guard case .request(let head, _)? = parts.first else {
            Issue.record("the lane sent no request head on its channel")
            return
        }
        #expect(head.method == "GET" && head.target == .origin("/promoted"))
        #expect(harness.received(lane: 1).hasPrefix("GET /promoted HTTP/1.1\r\n"))

        let done = harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nh2")
        #expect(harness.stream(stream).shape == "HDE" && harness.stream(stream).text == "h2")
        #expect(Transcript(done).records.first?.tls?["alpn"] == "h2")
    }
}

// MARK: - HTTP_1_1_REQUIRED

extension HTTP2FrontendTests {
    /// A lane is a session like any other: the origin's HTTP_1_1_REQUIRED sends its stream's request again over
    /// HTTP/1.1, and the lane, kept for the client's next stream, goes on speaking HTTP/1.1 to that origin.
    @Test func aLaneWhoseOriginRequiresHTTP11SendsTheStreamAgainOverHTTP1AndKeepsToIt() throws {
        let harness = try Harness()
        harness.originALPN = ["h2", "http/1.1"]
        let (stream, opened) = try harness.request("/negotiate")
        let key = try #require(Transcript(opened).laneConnects.first?.reuse)
        #expect(!key.http1Only)
        harness.reuse(
            lane: 1, UpstreamLease(key: key, tls: nil, facts: ["alpn": "h2"], wire: .h2, shareable: true))

        let refused = harness.send(.stream(1, .upstreamRequiresHTTP11))
        var http1Key = key
        http1Key.http1Only = true
        #expect(
            Transcript(refused).laneConnects == [
                Transcript.UpstreamConnect(lane: 1, host: Self.host, port: 443, reuse: http1Key)
            ])
        #expect(Self.outline(refused).first == "1:closeUpstream")
        #expect(harness.stream(stream).shape == "", "the client sees nothing of the refusal")

        harness.connect(lane: 1)
        guard case .tls(let origin) = harness.upstream(1).mode else {
            Issue.record("lane 1 did not open a connection of its own")
            return
        }
        #expect(origin.negotiatedALPN == "http/1.1")
        let done = harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(harness.stream(stream).shape == "HDE" && harness.stream(stream).text == "ok")
        let record = try #require(Transcript(done).records.first)
        #expect(record.retriedOnNewConnection == true && record.httpProtocol == "h2")
        #expect(record.tls?["alpn"] == "http/1.1")

        // The client's next stream gets the idle lane, which keeps its HTTP/1.1 connection to the origin.
        let (next, asked) = try harness.request("/again")
        #expect(Transcript(asked).laneConnects.isEmpty)
        harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nagain")
        #expect(harness.stream(next).shape == "HDE" && harness.stream(next).text == "again")
        // What the origin received: on the h2 channel, then on the HTTP/1.1 connection.
        let requests = Self.parseRequests(harness.lanes[1]?.received ?? []).map(\.head.target)
        #expect(requests == [.origin("/negotiate"), .origin("/negotiate"), .origin("/again")])
    }
}

// MARK: - Shutdown

extension HTTP2FrontendTests {
    @Test func drainSendsGoAwayLetsTheOpenStreamFinishThenClosesTheClient() throws {
        let harness = try Harness()
        let (stream, _) = try harness.request("/inflight")
        harness.connect(lane: 1)

        let drained = harness.send(.drain)
        #expect(!Transcript(drained).names.contains("closeClient"))
        let goAways = harness.clientEvents.compactMap { event -> String? in
            if case .goAway(let last, let error, _) = event { "\(last) \(error)" } else { nil }
        }
        #expect(goAways == ["1 NO_ERROR"])
        #expect(!harness.clientTLSClosed)

        let done = harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")
        #expect(harness.stream(stream).shape == "HDE" && harness.stream(stream).text == "done")
        #expect(Self.outline(done) == ["log", "1:releaseUpstream", "1:closeClient", "closeClient"])
        #expect(harness.clientTLSClosed)
    }
}

// MARK: - Defects found by these playbooks

extension HTTP2FrontendTests {
    /// A chunked upload that ends with request trailers (gRPC does this on every call).
    static func uploadWithRequestTrailers() throws {
        let harness = try Harness()
        let client = try #require(harness.client)
        let (stream, _) = try harness.request(
            "/upload", method: "POST", headers: [HTTP2Header("te", "trailers")], body: Array("payload".utf8),
            endStream: false)
        harness.connect(lane: 1)
        try client.submitTrailers(stream: stream, headers: [HTTP2Header("x-checksum", "abc")])
        harness.flushClient()
        let requests = parseRequests(harness.lanes[1]?.received ?? [])
        try #require(requests.count == 1)
        let request = try #require(requests.first)
        try #require(request.framing == .chunked && request.ended && text(request.body) == "payload")
        try #require(request.trailers?.first("X-Checksum") == "abc")
        harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        try #require(harness.stream(stream).shape == "HDE")
    }

    /// Runs in a child process: a regression would trap, which would otherwise end the whole test run.
    @Test func requestTrailersReachTheOriginAsAChunkedTrailerSection() async {
        // Regression: `.trailers` then END_STREAM's `.messageEnd` used to finish the request body writer twice
        // (a trap that took the whole proxy down; chunked HTTP/1.1 requests with trailers did the same).
        await #expect(processExitsWith: .success) {
            try HTTP2FrontendTests.uploadWithRequestTrailers()
        }
    }

    @Test func requestBytesHeldForStreamsTheClientResetAreReturnedToTheConnectionWindow() throws {
        let harness = try Harness()
        let client = try #require(harness.client)
        var streams: [Int32] = []
        for index in 0..<16 {
            let (stream, _) = try harness.request(
                "/upload/\(index)", method: "POST", body: testBody(seed: index, count: 65_535), endStream: false)
            streams.append(stream)
        }
        #expect(streams.count == 16)
        #expect(Transcript(harness.commands).laneConnects.count == 16)
        #expect(streams.allSatisfy { client.sendWindow(stream: $0) == 0 })
        for stream in streams { try client.resetStream(stream: stream, error: .cancel) }
        let resets = Transcript(harness.flushClient()).names
        #expect(resets.filter { $0.hasSuffix(":closeClient") }.count == 16)

        let (next, opened) = try harness.request("/after", method: "POST", endStream: false)
        #expect(Transcript(opened).laneConnects.count == 1)
        // Regression: bytes held while the lanes' upstreams were connecting used to be dropped with the reset
        // streams, never acknowledged, leaving the connection window spent (16 bytes) and later uploads stalled.
        #expect(client.sendWindow(stream: next) == 65_535)
    }

    @Test func aClientGoAwayReleasesTheIdleLanesUpstreamToThePool() throws {
        let harness = try Harness()
        let client = try #require(harness.client)
        let (stream, _) = try harness.request("/a")
        harness.connect(lane: 1)
        harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
        #expect(harness.stream(stream).shape == "HDE")

        try client.goAway(error: .noError)
        let names = Transcript(harness.flushClient()).names
        #expect(names.contains("closeClient"))
        // The idle lane hands its judged, shareable upstream back to the pool, as on `.clientGone`.
        #expect(names.contains("1:releaseUpstream"))
        #expect(names.contains("1:closeClient"))
    }
}

extension HTTP2FrontendTests {
    /// The proxy's own answer to a HEAD stream carries no DATA (a client's HTTP/2 engine would reset the stream).
    @Test func aLocalAnswerToAHeadStreamEndsWithItsHeaders() throws {
        let harness = try Harness()
        let (stream, _) = try harness.request("/head", method: "HEAD")
        harness.send(.stream(1, .upstreamConnectFailed(.refused)))
        let view = harness.stream(stream)
        #expect(view.shape == "HE")
        #expect(view.reset == nil)
        #expect((view.head ?? []).contains(HTTP2Header(":status", "502")))
        #expect(view.body.isEmpty)
    }
}

extension HTTP2FrontendTests {
    /// More streams at once than the old idle-lane limit (16): every lane stays idle after its stream, so the
    /// client's next round of streams reuses them and their upstream connections instead of opening new ones.
    @Test func concurrentStreamsKeepTheirLanesAndUpstreamsForTheNextRound() throws {
        let harness = try Harness()
        var first: [Int32] = []
        for index in 0..<20 { first.append(try harness.request("/first/\(index)").stream) }
        for lane in Int32(1)...20 {
            harness.connect(lane: lane)
            harness.respond(lane: lane, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
        #expect(first.allSatisfy { harness.stream($0).text == "ok" })
        var asked: [ProxyCommand] = []
        var second: [Int32] = []
        for index in 0..<20 {
            let (stream, commands) = try harness.request("/second/\(index)")
            second.append(stream)
            asked += commands
        }
        #expect(Transcript(asked).laneConnects.isEmpty, "the second round reuses the idle lanes and their connections")
        for lane in Int32(1)...20 { harness.respond(lane: lane, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nagain") }
        #expect(second.allSatisfy { harness.stream($0).text == "again" })
    }
}

// MARK: - Found by fuzzing (Fuzzing/Targets/http2-frontend)

extension HTTP2FrontendTests {
    /// nghttp2 accepts bytes above 0x7F in `:path`; written as they are on the lane's HTTP/1.1 request line they made
    /// a request-target no HTTP/1.1 parser accepts (ours answered 400 invalid request target). Such a request is
    /// malformed: its stream is reset with PROTOCOL_ERROR, nothing reaches an upstream, and the connection goes on.
    @Test(arguments: ["/caf\u{E9}", "/u\u{10FF82}", "/a#fragment"])
    func aPathThatIsNoHTTP1TargetIsResetAndNothingGoesUpstream(path: String) throws {
        let harness = try Harness(client: nil)
        let authority: [UInt8] = [0x41] + RawH2.hpackString(Self.host)
        // :method GET, :scheme https, :path as a literal with the indexed name :path, :authority.
        let block: [UInt8] = [0x82, 0x87, 0x04] + RawH2.hpackString(path) + authority
        harness.rawToProxy = RawH2.clientStart + RawH2.headers(stream: 1, block: block)
        let commands = harness.flushClient()
        #expect(RawH2.resets(in: harness.rawFromProxy) == [RawH2.RawReset(stream: 1, code: 0x1)])
        #expect(!Transcript(commands).touchesALane)
        #expect(Transcript(commands).records.isEmpty)

        harness.rawToProxy = RawH2.headers(stream: 3, block: [0x82, 0x87, 0x84] + authority)
        let next = harness.flushClient()
        #expect(Transcript(next).laneConnects.map(\.lane) == [1])
    }
}
