import ATSHTTP2
import ATSTLS
import ATSTestSupport
import Testing

@testable import ATSProxyCore

/// An `UpstreamH2Link` pumped back to back in memory with a server-role `HTTP2Session` that plays the origin,
/// optionally through a pair of TLS engines. Records every link output; `pump()` moves bytes both ways until
/// nothing moves. Single-threaded: one test owns one harness.
final class H2LinkHarness {
    let link: UpstreamH2Link
    let origin: HTTP2Session
    /// The origin's TLS engine when the link runs over TLS.
    let originTLS: TLSConnection?
    /// Every event the origin reported, in order.
    var originEvents: [HTTP2Event] = []
    /// Every link output except `.network`, in order.
    var outputs: [UpstreamH2Link.Output] = []
    /// HTTP/1.1 bytes received per channel.
    var channelBytes: [UpstreamH2Link.ChannelID: [UInt8]] = [:]
    /// Request body bytes the origin received per stream.
    var requestBodies: [Int32: [UInt8]] = [:]
    /// Whether the origin acknowledges request DATA at once; false models a slow origin.
    var originConsumes = true
    /// Request DATA bytes the origin received and did not acknowledge, per stream.
    var unconsumed: [Int32: Int] = [:]
    /// Reaction to each origin event (after it is recorded).
    var onOriginEvent: (HTTP2Event) throws -> Void = { _ in }
    /// Bytes from the link not yet delivered to the origin.
    private var toOrigin: [UInt8] = []
    /// The HTTP/1.1 request parser of each channel the tests write text on, as the client side of a proxy session
    /// would hold one: it pauses after each message and resumes once the link says the channel's exchange is over.
    private var requestParsers: [UpstreamH2Link.ChannelID: HTTP1Parser] = [:]

    init(
        originConfiguration: HTTP2Configuration = HTTP2Configuration(),
        linkTLS: TLSConnection? = nil, originTLS: TLSConnection? = nil
    ) throws {
        link = try UpstreamH2Link(tls: linkTLS)
        origin = try HTTP2Session(role: .server, configuration: originConfiguration)
        self.originTLS = originTLS
        record(link.start())
    }

    /// Records outputs; queues `.network` bytes for the origin.
    func record(_ new: [UpstreamH2Link.Output]) {
        for output in new {
            switch output {
            case .network(let bytes):
                toOrigin += bytes
            case .channelParts(let channel, let parts):
                channelBytes[channel, default: []] += encodeForHTTP1Client(parts, channel: channel)
                outputs.append(output)
            case .channelReset, .channelWritable, .closeConnection:
                outputs.append(output)
            }
        }
        resumeIdleChannels()
    }

    /// Body writers of the responses being encoded, per channel; nil once the message ended.
    private var responseWriters: [UpstreamH2Link.ChannelID: HTTP1BodyWriter] = [:]

    /// Encodes a channel's response parts as HTTP/1.1 the way the proxy frames them for an HTTP/1.1 client (a body
    /// that ends with its stream becomes chunked), so that the tests can read them with the HTTP/1.1 parser.
    private func encodeForHTTP1Client(_ parts: [HTTPPart], channel: UpstreamH2Link.ChannelID) -> [UInt8] {
        var bytes: [UInt8] = []
        for part in parts {
            switch part {
            case .response(var head, let framing):
                if head.reason.isEmpty { head.reason = HTTP1ReasonPhrase.standard(head.status) }
                var writerFraming = framing
                if framing == .untilClose {
                    head.headers.append(name: "transfer-encoding", value: "chunked")
                    writerFraming = .chunked
                }
                HTTP1Serializer.writeResponseHead(head, into: &bytes)
                if head.status >= 200 { responseWriters[channel] = HTTP1BodyWriter(framing: writerFraming) }
            case .body(let slice):
                try? responseWriters[channel]?.write(slice, into: &bytes)
            case .trailers(let trailers):
                try? responseWriters[channel]?.finish(trailers: trailers, into: &bytes)
                responseWriters[channel] = nil
            case .messageEnd:
                try? responseWriters[channel]?.finish(into: &bytes)
                responseWriters[channel] = nil
            case .request, .upgraded, .failed:
                Issue.record("not a response part: \(part)")
            }
        }
        return bytes
    }

    /// Exchanges bytes until a round moves nothing.
    func pump(maxRounds: Int = 100_000) throws {
        for _ in 0..<maxRounds {
            var progressed = false
            if !toOrigin.isEmpty {
                let bytes = toOrigin
                toOrigin = []
                progressed = true
                try deliver(origin.receive(originPlaintext(bytes)))
            }
            let events = origin.takeEvents()
            progressed = progressed || !events.isEmpty
            try deliver(events)
            let reply = origin.takeOutbound()
            try deliver(origin.takeEvents())
            if !reply.isEmpty {
                progressed = true
                record(link.receive(originWire(reply)))
            }
            if !progressed { return }
        }
        Issue.record("pump did not settle")
    }

    /// What the origin's HTTP/2 session reads from `network` (decrypted when over TLS).
    private func originPlaintext(_ network: [UInt8]) -> [UInt8] {
        guard let originTLS else { return network }
        originTLS.receive(network)
        var plaintext: [UInt8] = []
        while case .data(let bytes) = originTLS.read() { plaintext += bytes }
        return plaintext
    }

    /// What goes on the wire for the origin's `plaintext` (encrypted when over TLS).
    private func originWire(_ plaintext: [UInt8]) -> [UInt8] {
        guard let originTLS else { return plaintext }
        #expect(originTLS.write(plaintext) == plaintext.count)
        return originTLS.takeOutbound()
    }

    private func deliver(_ events: [HTTP2Event]) throws {
        for event in events {
            originEvents.append(event)
            if case .data(let stream, let bytes) = event {
                requestBodies[stream, default: []] += bytes
                if originConsumes {
                    origin.consume(stream: stream, bytes: bytes.count)
                } else {
                    unconsumed[stream, default: 0] += bytes.count
                }
            }
            try onOriginEvent(event)
        }
    }

    /// Writes the HTTP/1.1 request `text` on `channel` and records the outputs.
    func write(_ text: String, channel: UpstreamH2Link.ChannelID) {
        write(Array(text.utf8), channel: channel)
    }

    /// Parses the HTTP/1.1 request `bytes` with the channel's parser and sends what it yields on `channel` as message
    /// parts (the link takes no HTTP/1.1 text); a pipelined request waits in the parser until the channel is idle.
    func write(_ bytes: [UInt8], channel: UpstreamH2Link.ChannelID) {
        var parser = requestParsers.removeValue(forKey: channel) ?? HTTP1Parser(role: .request)
        let parts = parser.feed(bytes)
        requestParsers[channel] = parser
        if !parts.isEmpty { record(link.send(parts, channel: channel)) }
        resumeIdleChannels()
    }

    /// The message parts of the one HTTP/1.1 request in `text`, as a session's parser yields them.
    static func requestParts(_ text: String) -> [HTTPPart] {
        var parser = HTTP1Parser(role: .request)
        return parser.feed(Array(text.utf8))
    }

    /// Resumes the parsers of channels whose exchange is over (the link's channel is idle again), sending the
    /// requests they held; forgets the parsers of channels the link forgot.
    private func resumeIdleChannels() {
        for (channel, var parser) in requestParsers where parser.isPaused {
            guard let state = link.channels[channel]?.state else {
                requestParsers[channel] = nil
                continue
            }
            guard case .idle = state else { continue }
            let parts = parser.resume()
            requestParsers[channel] = parser
            if !parts.isEmpty { record(link.send(parts, channel: channel)) }
        }
    }

    /// Answers `stream` from the origin: head, optional body (DATA), optional trailers.
    func respond(
        _ stream: Int32, status: Int = 200, fields: [HTTP2Header] = [], body: [UInt8]? = nil,
        trailers: [HTTP2Header]? = nil
    ) throws {
        let head = [HTTP2Header(":status", String(status))] + fields
        guard body != nil || trailers != nil else {
            try origin.submitResponse(stream: stream, headers: head, endStream: true)
            return
        }
        try origin.submitResponse(stream: stream, headers: head, endStream: false)
        try origin.submitData(stream: stream, bytes: body ?? [], endStream: trailers == nil)
        if let trailers { try origin.submitTrailers(stream: stream, headers: trailers) }
    }

    /// Request heads the origin received, by stream, in arrival order.
    var requests: [(stream: Int32, fields: [HTTP2Header])] {
        originEvents.compactMap {
            if case .headers(let stream, .request, let fields) = $0 { (stream, fields) } else { nil }
        }
    }

    /// Channel resets in order.
    var resets: [UpstreamH2Link.Output] {
        outputs.filter { if case .channelReset = $0 { true } else { false } }
    }

    /// `.channelWritable` outputs for `channel`, in order.
    func writability(_ channel: UpstreamH2Link.ChannelID) -> [Bool] {
        outputs.compactMap { if case .channelWritable(channel, let value) = $0 { value } else { nil } }
    }

    /// Whether `.closeConnection` was emitted.
    var closed: Bool { outputs.contains(.closeConnection) }

    /// Sends the origin's remaining request-body acknowledgements.
    func originConsumeAll() {
        originConsumes = true
        for (stream, count) in unconsumed { origin.consume(stream: stream, bytes: count) }
        unconsumed = [:]
    }
}

/// One response as `HTTP1Parser(role: .response)` read it from a channel.
struct ParsedH1Response {
    var head: HTTPResponseHead
    var body: [UInt8] = []
    var trailers: HTTPFields = [:]
    /// `.messageEnd` was seen (always false for 1xx heads, which have no message end of their own).
    var complete = false
}

/// Parses channel bytes as the proxy session would, after `requestSent(method:)` for each of `methods`; records
/// an issue if the parser fails.
func parseH1Responses(_ bytes: [UInt8], methods: [String]) -> [ParsedH1Response] {
    let run = HTTP1ParseRun(bytes, role: .response, methods: methods)
    #expect(run.failure == nil, "channel bytes are not valid HTTP/1.1: \(String(decoding: bytes, as: UTF8.self))")
    var result: [ParsedH1Response] = []
    var current: ParsedH1Response?
    for event in run.normalized {
        switch event {
        case .response(let head, _):
            if head.isInterim {
                result.append(ParsedH1Response(head: head))
            } else {
                current = ParsedH1Response(head: head)
            }
        case .body(let slice):
            current?.body += slice
        case .trailers(let trailers):
            current?.trailers = trailers
        case .messageEnd:
            if var finished = current {
                finished.complete = true
                result.append(finished)
            }
            current = nil
        case .request, .upgraded, .failed:
            break
        }
    }
    if let current { result.append(current) }
    return result
}

/// A simple checksum for large bodies (Fletcher-style; order-sensitive).
func bodyChecksum(_ bytes: [UInt8]) -> UInt64 {
    var a: UInt64 = 1
    var b: UInt64 = 0
    for byte in bytes {
        a = (a + UInt64(byte)) % 65_521
        b = (b + a) % 65_521
    }
    return b << 16 | a
}

/// Playbook tests of `UpstreamH2Link`: HTTP/1.1 channels in, a server `HTTP2Session` as the origin.
@Suite struct UpstreamH2LinkTests {
    static func text(_ bytes: [UInt8]?) -> String { String(decoding: bytes ?? [], as: UTF8.self) }

    // MARK: - Basic translation

    @Test func getWithContentLengthIsTranslatedBothWays() throws {
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            if case .headers(let stream, .request, _) = event {
                try h.respond(
                    stream, fields: [HTTP2Header("content-length", "5"), HTTP2Header("x-b", "2")],
                    body: Array("hello".utf8))
            }
        }
        try h.pump()
        let channel = h.link.openChannel()
        h.write(
            "GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, x-hop\r\nX-Hop: 1\r\n"
                + "Keep-Alive: timeout=5\r\nTE: trailers, gzip\r\nX-A: 1\r\n\r\n",
            channel: channel)
        try h.pump()
        #expect(h.requests.count == 1)
        #expect(
            h.requests.first?.fields == [
                HTTP2Header(":method", "GET"), HTTP2Header(":scheme", "http"),
                HTTP2Header(":authority", "example.com"), HTTP2Header(":path", "/a?b=1"),
                HTTP2Header("te", "trailers"), HTTP2Header("x-a", "1"),
            ])
        #expect(h.originEvents.contains(.streamEnded(stream: 1)))
        #expect(
            Self.text(h.channelBytes[channel]) == "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-b: 2\r\n\r\nhello")
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["GET"])
        #expect(responses.count == 1)
        #expect(responses.first?.head.status == 200)
        #expect(responses.first?.body == Array("hello".utf8))
        #expect(responses.first?.complete == true)
        #expect(h.resets.isEmpty)
        #expect(h.link.channelCount == 1)
        #expect(h.link.canOpenChannel)
        #expect(h.link.negotiatedProtocol == "h2")
    }

    @Test func responseWithoutContentLengthIsChunkedAndEmptyOneGetsZeroLength() throws {
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            guard case .headers(let stream, .request, let fields) = event else { return }
            if fields.contains(HTTP2Header(":path", "/empty")) {
                try h.respond(stream, fields: [HTTP2Header("x-e", "1")])
            } else {
                try h.origin.submitResponse(stream: stream, headers: [HTTP2Header(":status", "404")], endStream: false)
                try h.origin.submitData(stream: stream, bytes: Array("not ".utf8), endStream: false)
                h.record(h.link.receive(h.origin.takeOutbound()))  // A separate DATA frame per piece.
                try h.origin.submitData(stream: stream, bytes: Array("found".utf8), endStream: true)
            }
        }
        let channel = h.link.openChannel()
        h.write("GET /missing HTTP/1.1\r\nHost: example.com\r\n\r\n", channel: channel)
        try h.pump()
        h.write("GET /empty HTTP/1.1\r\nHost: example.com\r\n\r\n", channel: channel)
        try h.pump()
        let bytes = h.channelBytes[channel] ?? []
        #expect(Self.text(bytes).hasPrefix("HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n"))
        #expect(Self.text(bytes).hasSuffix("HTTP/1.1 200 OK\r\nx-e: 1\r\ncontent-length: 0\r\n\r\n"))
        let responses = parseH1Responses(bytes, methods: ["GET", "GET"])
        #expect(responses.count == 2)
        #expect(responses.first?.head.status == 404)
        #expect(responses.first?.body == Array("not found".utf8))
        #expect(responses.last?.head.status == 200)
        #expect(responses.last?.body == [])
        #expect(responses.allSatisfy { $0.complete })
    }

    @Test func chunkedRequestAndResponseCarryTrailersBothWays() throws {
        let h = try H2LinkHarness()
        var requestTrailers: [HTTP2Header] = []
        h.onOriginEvent = { [unowned h] event in
            switch event {
            case .headers(_, .trailers, let fields):
                requestTrailers = fields
            case .streamEnded(let stream):
                try h.respond(
                    stream, fields: [HTTP2Header("trailer", "x-sum")], body: h.requestBodies[stream] ?? [],
                    trailers: [HTTP2Header("x-sum", "42")])
            default:
                break
            }
        }
        let channel = h.link.openChannel()
        h.write(
            "POST /upload HTTP/1.1\r\nHost: example.com:8443\r\nTransfer-Encoding: chunked\r\nTrailer: X-Check\r\n\r\n"
                + "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Check: abc\r\n\r\n",
            channel: channel)
        try h.pump()
        let request = try #require(h.requests.first)
        #expect(request.fields.contains(HTTP2Header(":authority", "example.com:8443")))
        #expect(request.fields.contains(HTTP2Header(":method", "POST")))
        #expect(!request.fields.contains { $0.name == "transfer-encoding" || $0.name == "host" })
        #expect(h.requestBodies[1] == Array("hello world".utf8))
        #expect(requestTrailers == [HTTP2Header("x-check", "abc")])
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["POST"])
        #expect(responses.count == 1)
        #expect(responses.first?.body == Array("hello world".utf8))
        #expect(responses.first?.trailers.first("X-Sum") == "42")
        #expect(responses.first?.complete == true)
    }

    @Test func largeBodiesCrossTheWindowsIntactBothWays() throws {
        let size = 3 * 1024 * 1024
        let upload = testBody(seed: 7, count: size)
        let download = testBody(seed: 8, count: size)
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            if case .streamEnded(let stream) = event {
                let received = h.requestBodies[stream] ?? []
                try h.origin.submitResponse(
                    stream: stream,
                    headers: [HTTP2Header(":status", "200"), HTTP2Header("x-upload-sum", "\(bodyChecksum(received))")],
                    endStream: false)
                try h.origin.submitData(stream: stream, bytes: download, endStream: true)
            }
        }
        let channel = h.link.openChannel()
        h.write("PUT /big HTTP/1.1\r\nHost: example.com\r\nContent-Length: \(size)\r\n\r\n", channel: channel)
        var offset = 0
        while offset < size {
            let end = min(size, offset + 100_000)
            h.write(Array(upload[offset..<end]), channel: channel)
            try h.pump()
            offset = end
        }
        try h.pump()
        #expect(h.requestBodies[1]?.count == size)
        #expect(h.requestBodies[1] == upload)
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["PUT"])
        #expect(responses.count == 1)
        #expect(responses.first?.head.headers.first("x-upload-sum") == "\(bodyChecksum(upload))")
        #expect(responses.first?.head.headers.first("Transfer-Encoding") == "chunked")
        #expect(responses.first?.body.count == size)
        #expect(responses.first.map { bodyChecksum($0.body) } == bodyChecksum(download))
        #expect(responses.first?.body == download)
        #expect(h.resets.isEmpty)
    }

    @Test func headAnd204And304ResponsesHaveNoBody() throws {
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            guard case .headers(let stream, .request, let fields) = event else { return }
            let path = fields.first { $0.name == ":path" }?.value
            switch path {
            case "/head": try h.respond(stream, fields: [HTTP2Header("content-length", "1234")])
            case "/204": try h.respond(stream, status: 204)
            default: try h.respond(stream, status: 304, fields: [HTTP2Header("etag", "\"x\"")])
            }
        }
        let channel = h.link.openChannel()
        h.write(
            "HEAD /head HTTP/1.1\r\nHost: a\r\n\r\nDELETE /204 HTTP/1.1\r\nHost: a\r\n\r\n"
                + "GET /304 HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\"\r\n\r\n",
            channel: channel)
        try h.pump()
        let text = Self.text(h.channelBytes[channel])
        #expect(
            text
                == "HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n" + "HTTP/1.1 204 No Content\r\n\r\n"
                + "HTTP/1.1 304 Not Modified\r\netag: \"x\"\r\n\r\n")
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["HEAD", "DELETE", "GET"])
        #expect(responses.map(\.head.status) == [200, 204, 304])
        #expect(responses.allSatisfy { $0.complete && $0.body.isEmpty })
        #expect(h.requests.map(\.stream) == [1, 3, 5])
    }

    @Test func informationalHeadsPrecedeTheFinalResponse() throws {
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            if case .headers(let stream, .request, _) = event {
                try h.origin.submitInformational(
                    stream: stream, headers: [HTTP2Header(":status", "103"), HTTP2Header("link", "</s.css>")])
                try h.respond(stream, fields: [HTTP2Header("content-length", "2")], body: Array("ok".utf8))
            }
        }
        let channel = h.link.openChannel()
        h.write("GET / HTTP/1.1\r\nHost: a\r\n\r\n", channel: channel)
        try h.pump()
        #expect(
            Self.text(h.channelBytes[channel])
                == "HTTP/1.1 103 Early Hints\r\nlink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["GET"])
        #expect(responses.map(\.head.status) == [103, 200])
        #expect(responses.last?.body == Array("ok".utf8))
        #expect(responses.last?.complete == true)
    }

    // MARK: - Multiplexing and keep-alive

    @Test func twoChannelsShareTheConnectionWithInterleavedResponses() throws {
        let h = try H2LinkHarness()
        var open: [Int32] = []
        h.onOriginEvent = { [unowned h] event in
            guard case .headers(let stream, .request, _) = event else { return }
            open.append(stream)
            guard open.count == 2 else { return }
            // Both streams are open at once; answer them interleaved, the later one first.
            for stream in open.reversed() {
                try h.origin.submitResponse(
                    stream: stream, headers: [HTTP2Header(":status", "200")], endStream: false)
            }
            for round in 0..<3 {
                for stream in open {
                    try h.origin.submitData(
                        stream: stream, bytes: Array("s\(stream)r\(round);".utf8), endStream: round == 2)
                    h.record(h.link.receive(h.origin.takeOutbound()))
                }
            }
        }
        let first = h.link.openChannel()
        let second = h.link.openChannel()
        #expect(first != second)
        h.write("GET /one HTTP/1.1\r\nHost: a\r\n\r\n", channel: first)
        h.write("GET /two HTTP/1.1\r\nHost: a\r\n\r\n", channel: second)
        try h.pump()
        #expect(open == [1, 3])
        #expect(h.requests.map { $0.fields.first { $0.name == ":path" }?.value } == ["/one", "/two"])
        let one = parseH1Responses(h.channelBytes[first] ?? [], methods: ["GET"])
        let two = parseH1Responses(h.channelBytes[second] ?? [], methods: ["GET"])
        #expect(one.first?.body == Array("s1r0;s1r1;s1r2;".utf8))
        #expect(two.first?.body == Array("s3r0;s3r1;s3r2;".utf8))
        #expect(one.first?.complete == true && two.first?.complete == true)
        // The outputs really alternated between the channels.
        let order = h.outputs.compactMap { output -> UpstreamH2Link.ChannelID? in
            if case .channelParts(let channel, _) = output { channel } else { nil }
        }
        #expect(order.count >= 6)
        #expect(zip(order, order.dropFirst()).filter { $0 != $1 }.count >= 4)
    }

    @Test func pipelinedRequestsOnOneChannelRunOneStreamAtATime() throws {
        let h = try H2LinkHarness()
        var answered = 0
        var heldStream: Int32?
        h.onOriginEvent = { event in
            if case .headers(let stream, .request, _) = event { heldStream = stream }
        }
        let channel = h.link.openChannel()
        h.write(
            "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
            channel: channel)
        try h.pump()
        // Only the first request is on the wire until its response finishes.
        #expect(h.requests.map(\.stream) == [1])
        while let stream = heldStream {
            heldStream = nil
            answered += 1
            try h.respond(stream, fields: [HTTP2Header("content-length", "1")], body: Array("\(answered)".utf8))
            try h.pump()
        }
        #expect(h.requests.map(\.stream) == [1, 3])
        #expect(h.requests.map { $0.fields.first { $0.name == ":path" }?.value } == ["/1", "/2"])
        #expect(h.requestBodies[3] == Array("abc".utf8))
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["GET", "POST"])
        #expect(responses.map(\.body) == [Array("1".utf8), Array("2".utf8)])
        #expect(h.link.channelCount == 1)
        // A third request later on the same channel takes the next stream.
        h.write("GET /3 HTTP/1.1\r\nHost: a\r\n\r\n", channel: channel)
        try h.pump()
        #expect(h.requests.map(\.stream) == [1, 3, 5])
    }

    // MARK: - Resets, GOAWAY, limits

    @Test func originResetBecomesAChannelReset() throws {
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            if case .headers(let stream, .request, _) = event {
                try h.origin.submitResponse(stream: stream, headers: [HTTP2Header(":status", "200")], endStream: false)
                try h.origin.submitData(stream: stream, bytes: Array("partial".utf8), endStream: false)
                h.record(h.link.receive(h.origin.takeOutbound()))
                try h.origin.resetStream(stream: stream, error: .internalError)
            }
        }
        let channel = h.link.openChannel()
        let other = h.link.openChannel()
        h.write("GET / HTTP/1.1\r\nHost: a\r\n\r\n", channel: channel)
        try h.pump()
        #expect(h.resets == [.channelReset(channel, .internalError)])
        #expect(h.link.channelCount == 1)
        // The forgotten channel ignores further writes; the other one still works.
        #expect(h.link.send(H2LinkHarness.requestParts("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), channel: channel).isEmpty)
        h.onOriginEvent = { [unowned h] event in
            if case .headers(let stream, .request, _) = event { try h.respond(stream) }
        }
        h.write("GET / HTTP/1.1\r\nHost: a\r\n\r\n", channel: other)
        try h.pump()
        #expect(parseH1Responses(h.channelBytes[other] ?? [], methods: ["GET"]).first?.complete == true)
    }

    @Test func closingAChannelMidResponseCancelsItsStream() throws {
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            if case .headers(let stream, .request, _) = event {
                try h.origin.submitResponse(stream: stream, headers: [HTTP2Header(":status", "200")], endStream: false)
                try h.origin.submitData(stream: stream, bytes: Array("first part".utf8), endStream: false)
            }
        }
        let channel = h.link.openChannel()
        h.write("GET /stream HTTP/1.1\r\nHost: a\r\n\r\n", channel: channel)
        try h.pump()
        #expect(Self.text(h.channelBytes[channel]).hasSuffix("a\r\nfirst part\r\n"))
        h.record(h.link.closeChannel(channel))
        try h.pump()
        #expect(h.originEvents.contains(.streamReset(stream: 1, error: .cancel)))
        #expect(h.link.channelCount == 0)
        #expect(h.resets.isEmpty)
        // Late DATA for the cancelled stream is dropped, not delivered.
        let before = h.outputs.count
        try? h.origin.submitData(stream: 1, bytes: Array("late".utf8), endStream: true)
        try h.pump()
        #expect(h.outputs.count == before)
    }

    @Test func goAwayRefusesStreamsAboveTheLastAndDrainsTheRest() throws {
        let h = try H2LinkHarness()
        let first = h.link.openChannel()
        let second = h.link.openChannel()
        h.write("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n", channel: first)
        try h.pump()
        #expect(h.requests.map(\.stream) == [1])
        // The origin stops at stream 1 (its GOAWAY is on the wire); stream 3 crosses it and is ignored.
        try h.origin.goAway(error: .noError)
        let goAway = h.origin.takeOutbound()
        h.write("GET /2 HTTP/1.1\r\nHost: a\r\n\r\n", channel: second)
        #expect(h.link.canOpenChannel)
        try h.pump()
        #expect(h.requests.map(\.stream) == [1])
        #expect(h.resets.isEmpty)
        h.record(h.link.receive(goAway))
        try h.pump()
        #expect(h.resets == [.channelReset(second, .refusedStream)])
        #expect(!h.link.canOpenChannel)
        #expect(!h.closed)
        // A new request on a fresh channel is refused too.
        let third = h.link.openChannel()
        h.write("GET /3 HTTP/1.1\r\nHost: a\r\n\r\n", channel: third)
        #expect(h.resets.last == .channelReset(third, .refusedStream))
        // Stream 1 still finishes, then the link closes.
        try h.respond(1, fields: [HTTP2Header("content-length", "2")], body: Array("ok".utf8))
        try h.pump()
        #expect(parseH1Responses(h.channelBytes[first] ?? [], methods: ["GET"]).first?.body == Array("ok".utf8))
        #expect(h.outputs.last == .closeConnection)
        #expect(h.requests.map(\.stream) == [1])
    }

    @Test func peerConcurrencyLimitOfOneAllowsOneChannel() throws {
        var configuration = HTTP2Configuration()
        configuration.maxConcurrentStreams = 1
        let h = try H2LinkHarness(originConfiguration: configuration)
        try h.pump()
        #expect(h.link.canOpenChannel)
        let first = h.link.openChannel()
        #expect(!h.link.canOpenChannel)
        let second = h.link.openChannel()
        h.write("GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /1b HTTP/1.1\r\nHost: a\r\n\r\n", channel: first)
        h.write("GET /2 HTTP/1.1\r\nHost: a\r\n\r\n", channel: second)
        #expect(h.resets == [.channelReset(second, .refusedStream)])
        try h.pump()
        // The pipelined request takes the slot as soon as the first stream closes.
        try h.respond(1)
        try h.pump()
        #expect(h.requests.map(\.stream) == [1, 3])
        try h.respond(3)
        try h.pump()
        #expect(h.resets.count == 1)
        let responses = parseH1Responses(h.channelBytes[first] ?? [], methods: ["GET", "GET"])
        #expect(responses.count == 2 && responses.allSatisfy { $0.complete })
        // The first channel is idle again and still holds its slot; closing it frees the slot.
        #expect(!h.link.canOpenChannel)
        h.record(h.link.closeChannel(first))
        #expect(h.link.canOpenChannel)
    }

    // MARK: - Flow control

    @Test func pausedChannelStopsWindowUpdatesUntilResumed() throws {
        let size = 1024 * 1024
        let body = testBody(seed: 3, count: size)
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            if case .headers(let stream, .request, _) = event {
                try h.respond(stream, fields: [HTTP2Header("content-length", "\(size)")], body: body)
            }
        }
        let channel = h.link.openChannel()
        h.record(h.link.setReadingPaused(true, channel: channel))
        h.write("GET /big HTTP/1.1\r\nHost: a\r\n\r\n", channel: channel)
        try h.pump()
        #expect(h.origin.streamState(1) == .halfClosedRemote)  // Still sending, blocked by the window.
        #expect(h.origin.sendWindow(stream: 1) == 0)
        let headLength = "HTTP/1.1 200 OK\r\ncontent-length: \(size)\r\n\r\n".utf8.count
        #expect(h.channelBytes[channel]?.count == headLength + Int(UpstreamH2Link.streamReceiveWindow))
        h.record(h.link.setReadingPaused(false, channel: channel))
        try h.pump()
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["GET"])
        #expect(responses.first?.complete == true)
        #expect(responses.first?.body == body)
    }

    @Test func bufferedRequestBodyAboveTheWatermarkStopsTheChannel() throws {
        let size = 1024 * 1024
        let body = testBody(seed: 5, count: size)
        let h = try H2LinkHarness()
        h.originConsumes = false
        h.onOriginEvent = { [unowned h] event in
            if case .streamEnded(let stream) = event { try h.respond(stream) }
        }
        let channel = h.link.openChannel()
        h.write("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: \(size)\r\n\r\n", channel: channel)
        h.write(body, channel: channel)
        try h.pump()
        #expect(h.writability(channel) == [false])
        #expect((h.requestBodies[1]?.count ?? 0) < size)
        h.originConsumeAll()
        try h.pump()
        #expect(h.writability(channel) == [false, true])
        #expect(h.requestBodies[1] == body)
        #expect(parseH1Responses(h.channelBytes[channel] ?? [], methods: ["POST"]).first?.complete == true)
    }

    // MARK: - Requests HTTP/2 cannot carry, EOF, failure, shutdown

    @Test func upgradeRequestIsAnsweredWith502AndOpensNoStream() throws {
        let h = try H2LinkHarness()
        try h.pump()
        let channel = h.link.openChannel()
        h.write(
            "GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
            channel: channel)
        try h.pump()
        #expect(h.requests.isEmpty)
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["GET"])
        #expect(responses.count == 1)
        #expect(responses.first?.head.status == 502)
        #expect(responses.first?.head.reason == "Bad Gateway")
        #expect(responses.first?.head.headers.first("Connection") == "close")
        let body = Self.text(responses.first?.body)
        #expect(body.contains("HTTP/2"))
        #expect(responses.first?.complete == true)
        #expect(h.resets.isEmpty)
    }

    @Test func eofResetsOnlyUnfinishedChannelsThenCloses() throws {
        let h = try H2LinkHarness()
        h.onOriginEvent = { [unowned h] event in
            guard case .headers(let stream, .request, let fields) = event else { return }
            if fields.contains(HTTP2Header(":path", "/done")) {
                try h.respond(stream, fields: [HTTP2Header("content-length", "0")])
            } else if fields.contains(HTTP2Header(":path", "/slow")) {
                try h.origin.submitResponse(stream: stream, headers: [HTTP2Header(":status", "200")], endStream: false)
            }
        }
        let done = h.link.openChannel()
        let pending = h.link.openChannel()
        let waiting = h.link.openChannel()
        h.write("GET /done HTTP/1.1\r\nHost: a\r\n\r\n", channel: done)
        h.write("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n", channel: pending)
        h.write("GET /never HTTP/1.1\r\nHost: a\r\n\r\n", channel: waiting)
        try h.pump()
        let outputs = h.link.receiveEOF()
        #expect(
            outputs == [
                .channelReset(pending, .internalError), .channelReset(waiting, .internalError), .closeConnection,
            ])
        #expect(!h.link.canOpenChannel)
        #expect(h.link.receiveEOF().isEmpty)
        // The finished channel is refused when it tries the dead link again.
        #expect(
            h.link.send(H2LinkHarness.requestParts("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), channel: done) == [
                .channelReset(done, .refusedStream)
            ])
    }

    @Test func protocolErrorFromTheOriginResetsEveryChannel() throws {
        let h = try H2LinkHarness()
        try h.pump()
        let busy = h.link.openChannel()
        let idle = h.link.openChannel()
        h.write("GET / HTTP/1.1\r\nHost: a\r\n\r\n", channel: busy)
        try h.pump()
        // A DATA frame on stream 0 is a connection error.
        let outputs = h.link.receive(RawH2.data(stream: 0, Array("x".utf8)))
        #expect(outputs.first == .channelReset(busy, .protocolError))
        #expect(outputs.dropFirst().first == .channelReset(idle, .protocolError))
        #expect(outputs.last == .closeConnection)
        let goAway = outputs.compactMap { output -> [UInt8]? in
            if case .network(let bytes) = output { bytes } else { nil }
        }.first
        #expect(RawH2.goAwayCodes(in: goAway ?? []) == [HTTP2ErrorCode.protocolError.rawValue])
        #expect(h.link.channelCount == 0)
    }

    @Test func shutdownSendsGoAwayAndClosesAfterTheLastStream() throws {
        let h = try H2LinkHarness()
        let channel = h.link.openChannel()
        h.write("GET / HTTP/1.1\r\nHost: a\r\n\r\n", channel: channel)
        try h.pump()
        h.record(h.link.shutdown())
        try h.pump()
        #expect(h.originEvents.contains { if case .goAway(_, .noError, _) = $0 { true } else { false } })
        #expect(!h.closed)
        #expect(!h.link.canOpenChannel)
        try h.respond(1)
        try h.pump()
        #expect(parseH1Responses(h.channelBytes[channel] ?? [], methods: ["GET"]).first?.complete == true)
        #expect(h.outputs.last == .closeConnection)
    }

    // MARK: - TLS

    @Test func requestTravelsEndToEndOverTLSWithALPNH2() throws {
        let authority = try CertificateAuthority.generate(hostName: "h2link-test")
        let server = try ServerTLSContext(leaves: try LeafCertificateCache(authority: authority))
        let originTLS = try server.makeConnection(connectHost: "origin.test")
        let clientContext = try TLSContext(role: .client)
        try clientContext.setClientALPN(["h2"])
        let clientTLS = try TLSConnection(context: clientContext, serverName: "origin.test")
        for _ in 0..<10 where clientTLS.state != .established || originTLS.state != .established {
            _ = clientTLS.handshake()
            originTLS.receive(clientTLS.takeOutbound())
            _ = originTLS.handshake()
            clientTLS.receive(originTLS.takeOutbound())
        }
        #expect(clientTLS.state == .established && originTLS.state == .established)
        #expect(clientTLS.negotiatedALPN == "h2")

        let h = try H2LinkHarness(linkTLS: clientTLS, originTLS: originTLS)
        h.onOriginEvent = { [unowned h] event in
            if case .headers(let stream, .request, _) = event {
                try h.respond(stream, fields: [HTTP2Header("content-type", "text/plain")], body: Array("secure".utf8))
            }
        }
        let channel = h.link.openChannel()
        h.write("GET /tls HTTP/1.1\r\nHost: origin.test\r\n\r\n", channel: channel)
        try h.pump()
        #expect(h.requests.first?.fields.contains(HTTP2Header(":scheme", "https")) == true)
        #expect(h.requests.first?.fields.contains(HTTP2Header(":authority", "origin.test")) == true)
        let responses = parseH1Responses(h.channelBytes[channel] ?? [], methods: ["GET"])
        #expect(responses.first?.head.headers.first("content-type") == "text/plain")
        #expect(responses.first?.body == Array("secure".utf8))
        #expect(responses.first?.complete == true)
        // A graceful shutdown ends with close_notify after the GOAWAY.
        h.record(h.link.shutdown())
        #expect(h.outputs.last == .closeConnection)
    }
}
