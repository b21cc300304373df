import Testing

@testable import ATSProxyCore

/// The HTTP/1.1 client codec's response side: the framing decisions it owns, checked on the text it writes.
@Suite("HTTP1ResponseEncoder")
struct HTTP1ResponseEncoderTests {
    /// Encodes a final head and `body` (then the end), returning the text and the keep-alive decision.
    static func encode(
        _ head: HTTPResponseHead, framing: HTTPBodyFraming, body: String = "", http10: Bool = false,
        keepAlive: Bool = true, closeAfter: Bool = false, trailers: HTTPFields? = nil
    ) -> (text: String, keepAlive: Bool) {
        var encoder = HTTP1ResponseEncoder()
        var keep = keepAlive
        var bytes: [UInt8] = []
        encoder.writeHead(
            head, framing: framing, clientIsHTTP10: http10, keepAlive: &keep, closeAfter: closeAfter, extra: [],
            reserving: nil, into: &bytes)
        if !body.isEmpty { encoder.writeBody(Array(body.utf8)[...], into: &bytes) }
        if let trailers { encoder.finish(trailers: trailers, into: &bytes) }
        encoder.finish(into: &bytes)
        return (String(decoding: bytes, as: UTF8.self), keep)
    }

    @Test("a body delimited by the origin's close is re-chunked for a client that keeps its connection")
    func rechunksUntilClose() {
        let head = HTTPResponseHead(version: .http10, status: 200, reason: "OK", headers: ["Connection": "close"])
        let (text, keepAlive) = Self.encode(head, framing: .untilClose, body: "hello")
        #expect(text == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        #expect(keepAlive)
    }

    @Test("an HTTP/1.0 client gets a chunked body raw, ended by closing")
    func dechunksForHTTP10() {
        let head = HTTPResponseHead(status: 200, reason: "OK", headers: ["Transfer-Encoding": "chunked"])
        let (text, keepAlive) = Self.encode(
            head, framing: .chunked, body: "hello", http10: true, trailers: ["X-Digest": "abc"])
        #expect(text == "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello")
        #expect(!keepAlive)
    }

    @Test("chunked stays chunked with its trailers, and the end after trailers adds nothing")
    func chunkedWithTrailers() {
        let head = HTTPResponseHead(status: 200, reason: "OK", headers: ["Transfer-Encoding": "chunked"])
        let (text, _) = Self.encode(head, framing: .chunked, body: "hi", trailers: ["X-Digest": "abc"])
        #expect(text == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Digest: abc\r\n\r\n")
    }

    @Test("hop-by-hop fields are dropped; a request still arriving closes the connection after the response")
    func hopByHopAndCloseAfter() {
        let head = HTTPResponseHead(
            status: 200, reason: "OK",
            headers: [
                "Content-Length": "2", "Keep-Alive": "timeout=5", "Connection": "Keep-Alive, X-Hop", "X-Hop": "1",
            ]
        )
        let (text, keepAlive) = Self.encode(head, framing: .contentLength(2), body: "ok", closeAfter: true)
        #expect(text == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        #expect(!keepAlive)
    }

    @Test("a 101 keeps its upgrade fields")
    func switchingProtocols() {
        let head = HTTPResponseHead(
            status: 101, reason: "Switching Protocols", headers: ["Upgrade": "websocket", "Connection": "Upgrade"])
        let (text, keepAlive) = Self.encode(head, framing: .tunnel)
        #expect(text == "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        #expect(keepAlive)
    }

    @Test("interim heads and the proxy's own answers are written as they are")
    func interimAndLocal() {
        var bytes: [UInt8] = []
        HTTP1ResponseEncoder.writeInterim(HTTPResponseHead(status: 103, reason: "Early Hints"), into: &bytes)
        let local = LocalResponse.text(status: 404, reason: "Not Found", "gone\n")
        HTTP1ResponseEncoder.writeLocal(local.parts(keepAlive: false, headOnly: false), into: &bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 404 Not Found\r\n"))
        #expect(text.hasSuffix("\r\n\r\ngone\n"))
    }
}
