import Testing

@testable import ATSProxyCore

/// Playbook tests for `HTTP1Parser`: bytes in, events out, no sockets.
@Suite struct HTTP1ParserTests {
    /// A valid input, its role and outstanding methods, and the events it must produce.
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let raw: String
        var role: HTTP1Parser.Role = .request
        var methods: [String] = []
        var closeAtEnd = false
        let expected: [HTTPPart]
        var testDescription: String { name }
    }

    static let validCases: [Case] = [
        Case(
            name: "absolute-form GET keeps header order and case",
            raw: "GET http://Example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nX-Custom:  Va lue \r\n"
                + "accept: */*\r\n\r\n",
            expected: [
                .request(
                    HTTPRequestHead(
                        method: "GET",
                        target: .absolute(
                            scheme: "http", authority: HTTP1Authority(host: "Example.com", port: 8080),
                            pathAndQuery: "/a?b=1"),
                        headers: ["Host": "example.com:8080", "X-Custom": "Va lue", "accept": "*/*"]),
                    body: .none),
                .messageEnd,
            ]),
        Case(
            name: "absolute-form with default port matches Host without port",
            raw: "GET http://example.com:80 HTTP/1.1\r\nHost: EXAMPLE.com\r\n\r\n",
            expected: [
                .request(
                    HTTPRequestHead(
                        method: "GET",
                        target: .absolute(
                            scheme: "http", authority: HTTP1Authority(host: "example.com", port: 80), pathAndQuery: ""),
                        headers: ["Host": "EXAMPLE.com"]),
                    body: .none),
                .messageEnd,
            ]),
        Case(
            name: "CONNECT hands over the bytes after the head",
            raw: "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n\u{16}\u{03}\u{01}",
            expected: [
                .request(
                    HTTPRequestHead(
                        method: "CONNECT", target: .authority(HTTP1Authority(host: "api.example.com", port: 443)),
                        headers: ["Host": "api.example.com:443"]),
                    body: .tunnel),
                .upgraded(remaining: [0x16, 0x03, 0x01]),
            ]),
        Case(
            name: "CONNECT without Host (Python 3.11 http.client) is accepted",
            raw: "CONNECT [::1]:8443 HTTP/1.1\r\n\r\n",
            expected: [
                .request(
                    HTTPRequestHead(
                        method: "CONNECT", target: .authority(HTTP1Authority(host: "::1", port: 8443)), headers: [:]),
                    body: .tunnel),
                .upgraded(remaining: []),
            ]),
        Case(
            name: "asterisk-form OPTIONS",
            raw: "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
            expected: [
                .request(HTTPRequestHead(method: "OPTIONS", target: .asterisk, headers: ["Host": "a"]), body: .none),
                .messageEnd,
            ]),
        Case(
            name: "HTTP/1.0 origin-form without Host, leading CRLF ignored",
            raw: "\r\nGET /x HTTP/1.0\r\n\r\n",
            expected: [
                .request(
                    HTTPRequestHead(method: "GET", target: .origin("/x"), version: .http10, headers: [:]), body: .none),
                .messageEnd,
            ]),
        Case(
            name: "pipelined requests are delivered one at a time",
            raw: "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
                + "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n",
            expected: [
                .request(HTTPRequestHead(method: "GET", target: .origin("/1"), headers: ["Host": "a"]), body: .none),
                .messageEnd,
                .request(
                    HTTPRequestHead(
                        method: "POST", target: .origin("/2"), headers: ["Host": "a", "Content-Length": "5"]),
                    body: .contentLength(5)),
                body("hello"),
                .messageEnd,
                .request(HTTPRequestHead(method: "GET", target: .origin("/3"), headers: ["Host": "a"]), body: .none),
                .messageEnd,
            ]),
        Case(
            name: "identical duplicate Content-Length in list form is accepted and collapsed to one field",
            raw: "PUT /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\nhello",
            expected: [
                .request(
                    HTTPRequestHead(
                        method: "PUT", target: .origin("/u"), headers: ["Host": "a", "Content-Length": "5"]),
                    body: .contentLength(5)),
                body("hello"),
                .messageEnd,
            ]),
        Case(
            name: "chunked with extensions and trailers",
            raw: "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5;name=value ; q=\"a \\\"b\\\" c\"\r\nhello\r\n6 ;x\r\n world\r\n000\r\nX-Sum: abc\r\nX-Two: 2\r\n\r\n",
            expected: [
                .request(
                    HTTPRequestHead(
                        method: "POST", target: .origin("/c"), headers: ["Host": "a", "Transfer-Encoding": "chunked"]),
                    body: .chunked),
                body("hello world"),
                .trailers(["X-Sum": "abc", "X-Two": "2"]),
                .messageEnd,
            ]),
        Case(
            name: "chunked with upper-case hex and no trailers, then a pipelined request",
            raw: "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n"
                + "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            expected: [
                .request(
                    HTTPRequestHead(
                        method: "POST", target: .origin("/c"), headers: ["Host": "a", "Transfer-Encoding": "Chunked"]),
                    body: .chunked),
                body("0123456789"),
                .messageEnd,
                .request(HTTPRequestHead(method: "GET", target: .origin("/"), headers: ["Host": "a"]), body: .none),
                .messageEnd,
            ]),
        Case(
            name: "100 Continue then the final response",
            raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            role: .response, methods: ["POST"],
            expected: [
                .response(HTTPResponseHead(status: 100, reason: "Continue"), body: .none),
                .response(
                    HTTPResponseHead(status: 200, reason: "OK", headers: ["Content-Length": "2"]),
                    body: .contentLength(2)),
                body("ok"),
                .messageEnd,
            ]),
        Case(
            name: "103 Early Hints then 204 without reason phrase",
            raw: "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 204\r\n\r\n",
            role: .response, methods: ["GET"],
            expected: [
                .response(
                    HTTPResponseHead(status: 103, reason: "Early Hints", headers: ["Link": "</s.css>"]), body: .none),
                .response(HTTPResponseHead(status: 204, reason: ""), body: .none),
                .messageEnd,
            ]),
        Case(
            name: "101 Switching Protocols hands over the bytes after the head",
            raw: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{01}\u{02}hi",
            role: .response, methods: ["GET"],
            expected: [
                .response(
                    HTTPResponseHead(
                        status: 101, reason: "Switching Protocols",
                        headers: ["Upgrade": "websocket", "Connection": "Upgrade"]),
                    body: .tunnel),
                .upgraded(remaining: [0x01, 0x02, UInt8(ascii: "h"), UInt8(ascii: "i")]),
            ]),
        Case(
            name: "HEAD response has no body despite Content-Length; next response follows",
            raw: "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
            role: .response, methods: ["HEAD", "GET", "GET"],
            expected: [
                .response(
                    HTTPResponseHead(status: 200, reason: "OK", headers: ["Content-Length": "1000"]), body: .none),
                .messageEnd,
                .response(
                    HTTPResponseHead(status: 304, reason: "Not Modified", headers: ["Content-Length": "7"]),
                    body: .none),
                .messageEnd,
                .response(
                    HTTPResponseHead(status: 200, reason: "OK", headers: ["Content-Length": "3"]),
                    body: .contentLength(3)),
                body("abc"),
                .messageEnd,
            ]),
        Case(
            name: "response without length is read until close",
            raw: "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nsome body\r\nmore",
            role: .response, methods: ["GET"], closeAtEnd: true,
            expected: [
                .response(
                    HTTPResponseHead(version: .http10, status: 200, reason: "OK", headers: ["Server": "x"]),
                    body: .untilClose),
                body("some body\r\nmore"),
                .messageEnd,
            ]),
        Case(
            name: "response whose transfer coding does not end in chunked is read until close",
            raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz",
            role: .response, methods: ["GET"], closeAtEnd: true,
            expected: [
                .response(
                    HTTPResponseHead(status: 200, reason: "OK", headers: ["Transfer-Encoding": "gzip"]),
                    body: .untilClose),
                body("zz"),
                .messageEnd,
            ]),
        Case(
            name: "2xx to CONNECT is a tunnel",
            raw: "HTTP/1.1 200 Connection established\r\n\r\nTLS",
            role: .response, methods: ["CONNECT"],
            expected: [
                .response(HTTPResponseHead(status: 200, reason: "Connection established"), body: .tunnel),
                .upgraded(remaining: ArraySlice("TLS".utf8)),
            ]),
        Case(
            name: "chunked response with trailers",
            raw:
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n",
            role: .response, methods: ["GET"],
            expected: [
                .response(
                    HTTPResponseHead(
                        status: 200, reason: "OK", headers: ["Transfer-Encoding": "chunked", "Trailer": "X-Sum"]),
                    body: .chunked),
                body("abc"),
                .trailers(["X-Sum": "1"]),
                .messageEnd,
            ]),
    ]

    @Test(arguments: validCases)
    func validInputProducesExpectedEvents(_ testCase: Case) {
        let run = HTTP1ParseRun(
            Array(http: testCase.raw), role: testCase.role, methods: testCase.methods, closeAtEnd: testCase.closeAtEnd)
        #expect(run.normalized == testCase.expected)
    }

    @Test(arguments: validCases)
    func feedingOneByteAtATimeGivesTheSameEvents(_ testCase: Case) {
        let bytes = Array(http: testCase.raw)
        for chunkSize in [1, 2, 3, 7] {
            let run = HTTP1ParseRun(
                bytes, role: testCase.role, methods: testCase.methods, chunkSize: chunkSize,
                closeAtEnd: testCase.closeAtEnd)
            #expect(run.normalized == testCase.expected, "chunk size \(chunkSize)")
        }
    }

    @Test func pipelinedBytesAreHeldUntilResume() {
        var parser = HTTP1Parser(role: .request)
        let second = "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n"
        let events = parser.feed(Array(http: "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n" + second))
        #expect(events.count == 2)
        #expect(events.last == .messageEnd)
        #expect(parser.isPaused)
        #expect(parser.bufferedByteCount == second.utf8.count)
        #expect(parser.feed(Array(http: "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n")).isEmpty)
        let next = parser.resume()
        #expect(
            next == [
                .request(HTTPRequestHead(method: "GET", target: .origin("/2"), headers: ["Host": "a"]), body: .none),
                .messageEnd,
            ])
        let third = parser.resume()
        #expect(
            third.first
                == .request(HTTPRequestHead(method: "GET", target: .origin("/3"), headers: ["Host": "a"]), body: .none)
        )
        _ = parser.resume()
        #expect(parser.isIdle)
    }

    @Test func upgradeAfterRequestTakesHeldBytes() {
        var parser = HTTP1Parser(role: .request)
        let events = parser.feed(
            Array(http: "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{01}\u{7f}"))
        #expect(events.last == .messageEnd)
        #expect(parser.upgrade() == [0x01, 0x7F])
    }

    @Test func inputClosedMidBodyIsTruncated() {
        var parser = HTTP1Parser(role: .request)
        _ = parser.feed(Array(http: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"))
        #expect(parser.inputClosed() == [.failed(HTTP1ParseError(.truncatedMessage))])
    }

    @Test func inputClosedBetweenMessagesIsClean() {
        var parser = HTTP1Parser(role: .request)
        _ = parser.feed(Array(http: "GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
        #expect(parser.inputClosed().isEmpty)
        #expect(parser.resume().isEmpty)
        var fresh = HTTP1Parser(role: .request)
        #expect(fresh.inputClosed().isEmpty)
        var partial = HTTP1Parser(role: .request)
        _ = partial.feed(Array(http: "GET / HT"))
        #expect(partial.inputClosed() == [.failed(HTTP1ParseError(.truncatedMessage))])
    }

    @Test func upstreamCloseBeforeTheResponseIsTruncated() {
        var parser = HTTP1Parser(role: .response)
        parser.requestSent(method: "GET")
        #expect(parser.inputClosed() == [.failed(HTTP1ParseError(.truncatedMessage))])
        var idle = HTTP1Parser(role: .response)
        #expect(idle.inputClosed().isEmpty)
        var interim = HTTP1Parser(role: .response)
        interim.requestSent(method: "PUT")
        _ = interim.feed(Array(http: "HTTP/1.1 100 Continue\r\n\r\n"))
        #expect(interim.inputClosed() == [.failed(HTTP1ParseError(.truncatedMessage))])
    }

    @Test func refusalsCarryTheStandardReasonPhrase() {
        #expect(HTTP1ParseError(.headerSectionTooLarge).statusReasonPhrase == "Request Header Fields Too Large")
        #expect(HTTP1ParseError(.unsupportedTransferEncoding).statusReasonPhrase == "Not Implemented")
    }

    @Test func responseWithoutOutstandingRequestIsRejected() {
        var parser = HTTP1Parser(role: .response)
        #expect(parser.feed(Array(http: "HTTP/1.1 200 OK\r\n\r\n")) == [.failed(HTTP1ParseError(.unexpectedResponse))])
    }

    @Test func failedParserIgnoresFurtherInput() {
        var parser = HTTP1Parser(role: .request)
        #expect(parser.feed(Array(http: "GET / HTTP/1.1\nHost: a\n\n")) == [.failed(HTTP1ParseError(.bareLF))])
        #expect(parser.feed(Array(http: "GET / HTTP/1.1\r\nHost: a\r\n\r\n")).isEmpty)
    }

    @Test(arguments: [false, true])
    func largeBodiesStreamWithoutAccumulating(chunked: Bool) {
        let chunkSize = 16 * 1024
        let bodyLength = 4 * 1024 * 1024 + 17
        var parser = HTTP1Parser(role: .request)
        let framing = chunked ? "Transfer-Encoding: chunked" : "Content-Length: \(bodyLength)"
        let head = Array(http: "PUT /big HTTP/1.1\r\nHost: a\r\n\(framing)\r\n\r\n")
        var events = parser.feed(head)
        #expect(events.count == 1)
        #expect(parser.bufferedByteCount == 0)
        var received = 0
        var sent = 0
        let piece = [UInt8](repeating: 0x61, count: chunkSize)
        var ended = false
        while sent < bodyLength {
            let count = min(chunkSize, bodyLength - sent)
            var wire: [UInt8] = []
            if chunked {
                HTTP1Serializer.writeChunk(piece[..<count], into: &wire)
                if sent + count == bodyLength { HTTP1Serializer.writeLastChunk(into: &wire) }
            } else {
                wire = Array(piece[..<count])
            }
            sent += count
            events = parser.feed(wire)
            #expect(parser.bufferedByteCount <= 0, "the parser holds no body bytes")
            for event in events {
                switch event {
                case .body(let slice):
                    #expect(slice.count <= wire.count)
                    received += slice.count
                case .messageEnd:
                    ended = true
                case .request, .response, .trailers, .upgraded, .failed:
                    Issue.record("unexpected \(event)")
                }
            }
        }
        #expect(received == bodyLength)
        #expect(ended)
    }

    @Test func largeBodyByteByByteNeverBuffersMoreThanTheHead() {
        var body = "PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        for index in 0..<50 { body += "10;i=\(index)\r\n0123456789abcdef\r\n" }
        body += "0\r\nX-T: 1\r\n\r\n"
        let run = HTTP1ParseRun(Array(http: body), chunkSize: 1)
        #expect(run.failure == nil)
        #expect(run.largestBodyEvent == 1)
        // Only the head (56 bytes) or the trailer section is ever buffered.
        #expect(run.maximumBuffered < 64)
    }

    @Test func headerSectionJustUnderTheLimitIsAccepted() {
        let prefix = "GET / HTTP/1.1\r\nHost: a\r\nX-Big: "
        let filler = String(repeating: "x", count: HTTP1HeadScanner.limit - prefix.utf8.count - 4)
        let run = HTTP1ParseRun(Array(http: prefix + filler + "\r\n\r\n"), chunkSize: 4096)
        #expect(run.failure == nil)
        #expect(run.events.last == .messageEnd)
    }

    @Test func responseHeadWithObsTextReasonParses() {
        let run = HTTP1ParseRun(
            Array(http: "HTTP/1.1 404 Nicht gefunden \u{e9}\r\nContent-Length: 0\r\n\r\n"), role: .response,
            methods: ["GET"])
        #expect(run.failure == nil)
        guard case .response(let head, _)? = run.events.first else {
            Issue.record("no head")
            return
        }
        #expect(head.status == 404)
        #expect(head.reason == "Nicht gefunden \u{e9}")
    }

    /// Microbenchmark-shaped workload (timing lives in the benchmark script): a thousand pipelined
    /// requests in one chunk are parsed one at a time, and the held bytes shrink with each message.
    @Test func thousandPipelinedRequestsInOneChunk() {
        let one = "GET /resource HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"
        let bytes = Array(http: String(repeating: one, count: 1000))
        var parser = HTTP1Parser(role: .request)
        var events = parser.feed(bytes)
        var requests = 0
        var previousHeld = Int.max
        while true {
            requests += events.filter { if case .request = $0 { true } else { false } }.count
            #expect(parser.bufferedByteCount < previousHeld || parser.bufferedByteCount == 0)
            previousHeld = parser.bufferedByteCount
            guard parser.isPaused, parser.bufferedByteCount > 0 else { break }
            events = parser.resume()
        }
        #expect(requests == 1000)
        #expect(parser.bufferedByteCount == 0)
    }
}
