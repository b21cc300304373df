import Testing

@testable import ATSProxyCore

/// Serializer and body-writer tests: serialize → parse must give back the same message.
@Suite struct HTTP1SerializerTests {
    @Test func requestHeadRoundTrips() {
        let head = HTTPRequestHead(
            method: "POST", target: .origin("/upload?x=1"),
            headers: ["Host": "a.example", "content-length": "5", "X-Dup": "1", "X-Dup": "2"])
        var wire: [UInt8] = []
        HTTP1Serializer.writeRequestHead(head, into: &wire)
        var writer = HTTP1BodyWriter(framing: .contentLength(5))
        #expect(throws: Never.self) { try writer.write(Array(http: "hello"), into: &wire) }
        #expect(throws: Never.self) { try writer.finish(into: &wire) }
        let run = HTTP1ParseRun(wire)
        #expect(run.normalized == [.request(head, body: .contentLength(5)), body("hello"), .messageEnd])
    }

    @Test(arguments: [1, 3, 1000])
    func chunkedBodyWithTrailersRoundTrips(pieceSize: Int) {
        let head = HTTPResponseHead(status: 200, reason: "OK", headers: ["Transfer-Encoding": "chunked"])
        let payload = Array(http: String(repeating: "0123456789", count: 50))
        var wire: [UInt8] = []
        HTTP1Serializer.writeResponseHead(head, into: &wire)
        var writer = HTTP1BodyWriter(framing: .chunked)
        var offset = 0
        while offset < payload.count {
            let end = min(payload.count, offset + pieceSize)
            #expect(throws: Never.self) { try writer.write(payload[offset..<end], into: &wire) }
            offset = end
        }
        #expect(throws: Never.self) { try writer.write([UInt8](), into: &wire) }
        #expect(throws: Never.self) { try writer.finish(trailers: ["X-Digest": "abc"], into: &wire) }
        let run = HTTP1ParseRun(wire, role: .response, methods: ["GET"], chunkSize: 7)
        #expect(
            run.normalized == [
                .response(head, body: .chunked), .body(payload[...]), .trailers(["X-Digest": "abc"]), .messageEnd,
            ])
    }

    @Test func responseHeadWithEmptyReasonRoundTrips() {
        let head = HTTPResponseHead(version: .http10, status: 404, reason: "", headers: ["Content-Length": "0"])
        var wire: [UInt8] = []
        HTTP1Serializer.writeResponseHead(head, into: &wire)
        #expect(wire == Array(http: "HTTP/1.0 404 \r\nContent-Length: 0\r\n\r\n"))
        #expect(
            HTTP1ParseRun(wire, role: .response, methods: ["GET"]).normalized == [
                .response(head, body: .contentLength(0)), .messageEnd,
            ])
    }

    @Test func absoluteFormBecomesOriginFormWithHost() {
        let run = HTTP1ParseRun(
            Array(http: "GET http://api.example:8080/v1?q=2 HTTP/1.1\r\nAccept: */*\r\nHost: api.example:8080\r\n\r\n"))
        guard case .request(let head, _)? = run.events.first else {
            Issue.record("no request")
            return
        }
        var wire: [UInt8] = []
        HTTP1Serializer.writeRequestHead(head.forOrigin(), into: &wire)
        #expect(wire == Array(http: "GET /v1?q=2 HTTP/1.1\r\nAccept: */*\r\nHost: api.example:8080\r\n\r\n"))
    }

    @Test func forOriginAddsHostFirstAndDefaultsThePath() {
        let head = HTTPRequestHead(
            method: "GET",
            target: .absolute(
                scheme: "http", authority: HTTP1Authority(host: "a.example", port: nil), pathAndQuery: ""),
            version: .http10, headers: ["Accept": "*/*"])
        let origin = head.forOrigin()
        #expect(origin.target == .origin("/"))
        #expect(origin.headers.fields.first == HTTPField(name: "Host", value: "a.example"))
        let query = HTTPRequestHead(
            method: "GET",
            target: .absolute(scheme: "http", authority: HTTP1Authority(host: "a", port: nil), pathAndQuery: "?x"),
            headers: ["Host": "a"])
        #expect(query.forOrigin().target == .origin("/?x"))
        let options = HTTPRequestHead(
            method: "OPTIONS",
            target: .absolute(scheme: "http", authority: HTTP1Authority(host: "::1", port: 8080), pathAndQuery: ""),
            headers: ["Host": "[::1]:8080"])
        #expect(options.forOrigin().target == .asterisk)
        #expect(options.forOrigin().headers.first("host") == "[::1]:8080")
    }

    @Test func connectAndAsteriskTargetsSerializeAsTheyParse() {
        for raw in [
            "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n",
            "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET https://A.example/x HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
        ] {
            let run = HTTP1ParseRun(Array(http: raw))
            guard case .request(let head, _)? = run.events.first else {
                Issue.record("no request for \(raw)")
                continue
            }
            var wire: [UInt8] = []
            HTTP1Serializer.writeRequestHead(head, into: &wire)
            #expect(wire == Array(http: raw))
        }
    }

    @Test func bodyWriterRefusesTooLongAndTooShortBodies() {
        var wire: [UInt8] = []
        var writer = HTTP1BodyWriter(framing: .contentLength(3))
        #expect(throws: HTTP1BodyWriter.Failure.bodyTooLong) { try writer.write(Array(http: "abcd"), into: &wire) }
        #expect(wire.isEmpty)
        #expect(throws: Never.self) { try writer.write(Array(http: "ab"), into: &wire) }
        #expect(throws: HTTP1BodyWriter.Failure.bodyTooShort(missing: 1)) { try writer.finish(into: &wire) }
        var none = HTTP1BodyWriter(framing: .none)
        #expect(throws: HTTP1BodyWriter.Failure.bodyTooLong) { try none.write(Array(http: "x"), into: &wire) }
        var raw = HTTP1BodyWriter(framing: .untilClose)
        var rawWire: [UInt8] = []
        #expect(throws: Never.self) { try raw.write(Array(http: "xyz"), into: &rawWire) }
        #expect(throws: Never.self) { try raw.finish(trailers: ["Dropped": "1"], into: &rawWire) }
        #expect(rawWire == Array(http: "xyz"))
    }

    @Test func emptyLastChunkIsMinimal() {
        var wire: [UInt8] = []
        HTTP1Serializer.writeLastChunk(into: &wire)
        #expect(wire == Array(http: "0\r\n\r\n"))
        HTTP1Serializer.writeChunk([UInt8](repeating: 1, count: 255), into: &wire)
        #expect(wire.prefix(9) == Array(http: "0\r\n\r\nff\r\n")[...])
    }
}
