import Testing

@testable import ATSProxyCore

/// Every smuggling and malformation rule of RFC 9112 §6.3/§11.2 (issue item 8), table-driven, with
/// the exact status; each case is also fed one byte at a time and must fail the same way.
@Suite struct HTTP1RejectionTests {
    /// A hostile input and the error it must produce.
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let raw: String
        let kind: HTTP1ParseError.Kind
        let status: Int
        var role: HTTP1Parser.Role = .request
        var testDescription: String { name }
    }

    static let chunkedHead = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

    static let requestCases: [Case] = [
        Case(
            name: "request line without version", raw: "GET /\r\nHost: a\r\n\r\n", kind: .invalidRequestLine,
            status: 400),
        Case(
            name: "double space in request line", raw: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidRequestLine,
            status: 400),
        Case(
            name: "trailing space after version", raw: "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", kind: .invalidRequestLine,
            status: 400),
        Case(
            name: "space inside target", raw: "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidRequestLine,
            status: 400),
        Case(
            name: "bad protocol name", raw: "GET / HTTX/1.1\r\nHost: a\r\n\r\n", kind: .invalidRequestLine, status: 400),
        Case(
            name: "HTTP/2.0 on an HTTP/1 connection", raw: "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
            kind: .unsupportedVersion, status: 505),
        Case(
            name: "method with a separator", raw: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidMethod, status: 400
        ),
        Case(
            name: "method with non-ASCII", raw: "G\u{e9}T / HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidMethod,
            status: 400),
        Case(
            name: "DEL in target", raw: "GET /a\u{7f}b HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidTarget, status: 400),
        Case(
            name: "non-ASCII target", raw: "GET /\u{e9} HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidTarget, status: 400),
        Case(
            name: "fragment in target", raw: "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidTarget, status: 400),
        Case(
            name: "userinfo in absolute-form", raw: "GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidTarget,
            status: 400),
        Case(
            name: "absolute-form without //", raw: "GET http:a/ HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidTarget,
            status: 400),
        Case(name: "relative target", raw: "GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidTarget, status: 400),
        Case(
            name: "port out of range", raw: "GET http://a:65536/ HTTP/1.1\r\nHost: a:65536\r\n\r\n",
            kind: .invalidTarget, status: 400),
        Case(name: "asterisk with GET", raw: "GET * HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidTarget, status: 400),
        Case(
            name: "CONNECT without port", raw: "CONNECT a.example HTTP/1.1\r\nHost: a.example\r\n\r\n",
            kind: .invalidTarget, status: 400),
        Case(
            name: "CONNECT with origin-form", raw: "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", kind: .invalidTarget,
            status: 400),
        Case(
            name: "missing Host on HTTP/1.1", raw: "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", kind: .missingHost,
            status: 400),
        Case(
            name: "two Host fields", raw: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", kind: .multipleHost,
            status: 400),
        Case(name: "Host with a space", raw: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", kind: .invalidHost, status: 400),
        Case(name: "Host with userinfo", raw: "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", kind: .invalidHost, status: 400),
        Case(
            name: "Host differs from absolute-form authority",
            raw: "GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n", kind: .hostMismatch, status: 400),
        Case(
            name: "Host port differs from absolute-form port",
            raw: "GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example\r\n\r\n", kind: .hostMismatch, status: 400),
        Case(
            name: "whitespace before colon", raw: "GET / HTTP/1.1\r\nHost : a\r\n\r\n", kind: .whitespaceBeforeColon,
            status: 400),
        Case(
            name: "tab before colon", raw: "GET / HTTP/1.1\r\nHost: a\r\nX\t: 1\r\n\r\n", kind: .whitespaceBeforeColon,
            status: 400),
        Case(
            name: "empty field name", raw: "GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n", kind: .invalidFieldName,
            status: 400),
        Case(
            name: "field line without colon", raw: "GET / HTTP/1.1\r\nHost: a\r\nJunk\r\n\r\n", kind: .invalidFieldName,
            status: 400),
        Case(
            name: "separator in field name", raw: "GET / HTTP/1.1\r\nHost: a\r\nX(Y: 1\r\n\r\n",
            kind: .invalidFieldName, status: 400),
        Case(
            name: "control character in value", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{01}b\r\n\r\n",
            kind: .invalidFieldValue, status: 400),
        Case(
            name: "DEL in value", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\u{7f}\r\n\r\n", kind: .invalidFieldValue,
            status: 400),
        Case(
            name: "obs-fold with space", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
            kind: .obsoleteLineFolding, status: 400),
        Case(
            name: "obs-fold with tab", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n",
            kind: .obsoleteLineFolding, status: 400),
        Case(name: "bare CR in a value", raw: "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", kind: .bareCR, status: 400),
        Case(name: "bare LF in a value", raw: "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", kind: .bareLF, status: 400),
        Case(name: "LF-only line endings", raw: "GET / HTTP/1.1\nHost: a\n\n", kind: .bareLF, status: 400),
        Case(name: "LF-only end of head", raw: "GET / HTTP/1.1\r\nHost: a\r\n\n", kind: .bareLF, status: 400),
        Case(name: "NUL in request line", raw: "GET /\u{0} HTTP/1.1\r\nHost: a\r\n\r\n", kind: .nulByte, status: 400),
        Case(name: "NUL in a value", raw: "GET / HTTP/1.1\r\nHost: a\r\nX: \u{0}\r\n\r\n", kind: .nulByte, status: 400),
        Case(
            name: "Content-Length with Transfer-Encoding",
            raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            kind: .contentLengthWithTransferEncoding, status: 400),
        Case(
            name: "differing duplicate Content-Length fields",
            raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            kind: .conflictingContentLength, status: 400),
        Case(
            name: "differing Content-Length list", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n",
            kind: .conflictingContentLength, status: 400),
        Case(
            name: "negative Content-Length", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
            kind: .invalidContentLength, status: 400),
        Case(
            name: "signed Content-Length", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
            kind: .invalidContentLength, status: 400),
        Case(
            name: "empty Content-Length", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
            kind: .invalidContentLength, status: 400),
        Case(
            name: "hex Content-Length", raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n",
            kind: .invalidContentLength, status: 400),
        Case(
            name: "overflowing Content-Length",
            raw: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
            kind: .invalidContentLength, status: 400),
        Case(
            name: "Transfer-Encoding not ending in chunked",
            raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            kind: .transferEncodingNotChunked, status: 400),
        Case(
            name: "unknown Transfer-Encoding alone",
            raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: foo\r\n\r\n", kind: .transferEncodingNotChunked,
            status: 400),
        Case(
            name: "chunked applied twice",
            raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            kind: .transferEncodingNotChunked, status: 400),
        Case(
            name: "empty Transfer-Encoding", raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n",
            kind: .transferEncodingNotChunked, status: 400),
        Case(
            name: "unsupported coding before chunked",
            raw: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            kind: .unsupportedTransferEncoding, status: 501),
        Case(
            name: "Transfer-Encoding in HTTP/1.0",
            raw: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", kind: .transferEncodingInHTTP10,
            status: 400),
        Case(name: "non-hex chunk size", raw: chunkedHead + "zz\r\n", kind: .invalidChunkSize, status: 400),
        Case(name: "empty chunk size", raw: chunkedHead + "\r\nhello\r\n", kind: .invalidChunkSize, status: 400),
        Case(
            name: "0x-prefixed chunk size", raw: chunkedHead + "0x5\r\nhello\r\n", kind: .invalidChunkSize, status: 400),
        Case(name: "negative chunk size", raw: chunkedHead + "-1\r\n", kind: .invalidChunkSize, status: 400),
        Case(
            name: "whitespace then junk after size", raw: chunkedHead + "5 x\r\n", kind: .invalidChunkSize, status: 400),
        Case(
            name: "overflowing chunk size", raw: chunkedHead + "10000000000000000\r\n", kind: .chunkSizeOverflow,
            status: 400),
        Case(
            name: "Int.max+1 chunk size", raw: chunkedHead + "8000000000000000\r\n", kind: .chunkSizeOverflow,
            status: 400),
        Case(name: "bare CR after chunk size", raw: chunkedHead + "5\rhello\r\n", kind: .bareCR, status: 400),
        Case(name: "bare LF after chunk size", raw: chunkedHead + "5\nhello\r\n", kind: .bareLF, status: 400),
        Case(name: "bare LF after chunk extension", raw: chunkedHead + "5;a=b\nhello\r\n", kind: .bareLF, status: 400),
        Case(
            name: "separator in chunk extension", raw: chunkedHead + "5;a(b\r\nhello\r\n", kind: .invalidChunkExtension,
            status: 400),
        Case(
            name: "control character in chunk extension", raw: chunkedHead + "5;a=\u{01}\r\nhello\r\n",
            kind: .invalidChunkExtension, status: 400),
        Case(
            name: "LF inside quoted chunk extension", raw: chunkedHead + "5;a=\"x\ny\"\r\nhello\r\n",
            kind: .invalidChunkExtension, status: 400),
        Case(
            name: "oversized chunk extension",
            raw: chunkedHead + "5;" + String(repeating: "a", count: HTTP1ChunkedDecoder.extensionLimit + 1) + "\r\n",
            kind: .invalidChunkExtension, status: 400),
        Case(
            name: "chunk data too long", raw: chunkedHead + "5\r\nhelloXX\r\n", kind: .invalidChunkTerminator,
            status: 400),
        Case(
            name: "chunk data ended by LF only", raw: chunkedHead + "5\r\nhello\n0\r\n\r\n",
            kind: .invalidChunkTerminator, status: 400),
        Case(
            name: "obs-fold in trailers", raw: chunkedHead + "0\r\nX: a\r\n b\r\n\r\n", kind: .obsoleteLineFolding,
            status: 400),
        Case(name: "bare LF in trailers", raw: chunkedHead + "0\r\nX: a\n\r\n", kind: .bareLF, status: 400),
        Case(
            name: "header section over 64 KiB",
            raw: "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "x", count: 64 * 1024) + "\r\n\r\n",
            kind: .headerSectionTooLarge, status: 431),
        Case(
            name: "many small fields over 64 KiB",
            raw: "GET / HTTP/1.1\r\nHost: a\r\n" + String(repeating: "X-Field: value\r\n", count: 5000) + "\r\n",
            kind: .headerSectionTooLarge, status: 431),
        Case(
            name: "101 header fields",
            raw: "GET / HTTP/1.1\r\nHost: a\r\n" + (1...100).map { "X-F\($0): v\r\n" }.joined() + "\r\n",
            kind: .tooManyHeaderFields, status: 431),
        Case(
            name: "trailer section over 64 KiB",
            raw: chunkedHead + "0\r\nX: " + String(repeating: "x", count: 64 * 1024) + "\r\n\r\n",
            kind: .headerSectionTooLarge, status: 431),
        Case(
            name: "endless empty lines before a request", raw: String(repeating: "\r\n", count: 40 * 1024),
            kind: .headerSectionTooLarge, status: 431),
    ]

    static let responseCases: [Case] = [
        Case(
            name: "status code with two digits", raw: "HTTP/1.1 20 OK\r\n\r\n", kind: .invalidStatusLine, status: 400,
            role: .response),
        Case(
            name: "no space after status", raw: "HTTP/1.1 200OK\r\n\r\n", kind: .invalidStatusLine, status: 400,
            role: .response),
        Case(
            name: "status line garbage", raw: "ICY 200 OK\r\n\r\n", kind: .invalidStatusLine, status: 400,
            role: .response),
        Case(
            name: "response with Content-Length and Transfer-Encoding",
            raw: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            kind: .contentLengthWithTransferEncoding, status: 400, role: .response),
        Case(
            name: "response with differing Content-Length",
            raw: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", kind: .conflictingContentLength,
            status: 400, role: .response),
        Case(
            name: "HTTP/1.0 response with Transfer-Encoding",
            raw: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", kind: .transferEncodingInHTTP10, status: 400,
            role: .response),
        Case(
            name: "response header with obs-fold", raw: "HTTP/1.1 200 OK\r\nX: a\r\n  b\r\n\r\n",
            kind: .obsoleteLineFolding, status: 400, role: .response),
    ]

    @Test(arguments: requestCases + responseCases)
    func rejectedWithExactStatus(_ testCase: Case) {
        let bytes = Array(http: testCase.raw)
        let methods = testCase.role == .response ? ["GET"] : []
        let whole = HTTP1ParseRun(bytes, role: testCase.role, methods: methods)
        #expect(whole.failure?.kind == testCase.kind)
        #expect(whole.failure?.status == testCase.status)
        #expect(whole.events.last == whole.failure.map(HTTPPart.failed))
        let byteByByte = HTTP1ParseRun(bytes, role: testCase.role, methods: methods, chunkSize: 1)
        #expect(byteByByte.failure == whole.failure)
    }

    @Test func aRequestWithExactlyTheFieldLimitIsAcceptedAndResponsesHaveNoLimit() {
        let limit = HTTP1HeadParser.maxRequestFields
        let fields = (1..<limit).map { "X-F\($0): v\r\n" }.joined()
        let request = HTTP1ParseRun(Array(http: "GET / HTTP/1.1\r\nHost: a\r\n" + fields + "\r\n"))
        #expect(request.failure == nil)
        guard case .request(let head, _) = request.events.first else {
            Issue.record("no request head: \(request.events)")
            return
        }
        #expect(head.headers.count == limit)
        // An origin's response is not ours to limit by count (only by size).
        let many = (1...2 * limit).map { "X-F\($0): v\r\n" }.joined()
        let response = HTTP1ParseRun(
            Array(http: "HTTP/1.1 204 No Content\r\n" + many + "\r\n"), role: .response, methods: ["GET"])
        #expect(response.failure == nil)
    }

    /// Found by the http1-request fuzz target: an HTTP/1.0 absolute-form request without Host at the field limit was
    /// accepted, and the Host the proxy adds when it forwards it took the forwarded head over the limit.
    @Test func anAbsoluteFormRequestWithoutHostLeavesRoomForTheHostTheProxyAdds() {
        let limit = HTTP1HeadParser.maxRequestFields
        let atLimit = (1...limit).map { "X-F\($0): v\r\n" }.joined()
        let withoutHost = HTTP1ParseRun(Array(http: "GET http://a.example/ HTTP/1.0\r\n" + atLimit + "\r\n"))
        #expect(withoutHost.failure?.kind == .tooManyHeaderFields)
        #expect(withoutHost.failure?.status == 431)
        // One field fewer leaves room: forwarded, it carries exactly the limit.
        let belowLimit = (1..<limit).map { "X-F\($0): v\r\n" }.joined()
        let roomy = HTTP1ParseRun(Array(http: "GET http://a.example/ HTTP/1.0\r\n" + belowLimit + "\r\n"))
        #expect(roomy.failure == nil)
        guard case .request(let head, _) = roomy.events.first else {
            Issue.record("no request head: \(roomy.events)")
            return
        }
        #expect(head.forOrigin().headers.count == limit)
        // With its own Host the forwarded head keeps its count (the Host is replaced, not added).
        let hostAndRest = "Host: a.example\r\n" + belowLimit
        let withHost = HTTP1ParseRun(Array(http: "GET http://a.example/ HTTP/1.0\r\n" + hostAndRest + "\r\n"))
        #expect(withHost.failure == nil)
    }

    @Test func everyErrorHasAReasonAndAServerStatus() {
        for testCase in Self.requestCases {
            let error = HTTP1ParseError(testCase.kind)
            #expect(!error.reason.isEmpty)
            #expect([400, 431, 501, 505].contains(error.status))
            #expect(error.description.hasPrefix("\(error.status) "))
        }
    }
}
