import ATSHTTP2
import ATSTestSupport
import Testing

/// Table-free checks of `HTTP2Message`: HTTP/1.1-style heads ↔ HTTP/2 header lists.
@Suite struct HTTP2MessageTests {
    @Test func requestToH2PutsPseudoHeadersFirstAndDropsConnectionSpecificFields() {
        let head = HTTP2RequestHead(
            method: "POST", scheme: "https", authority: "", path: "/a?b=1",
            headers: [
                HTTP2Header("Host", "api.example.com"), HTTP2Header("Connection", "keep-alive, X-Hop"),
                HTTP2Header("Keep-Alive", "timeout=5"), HTTP2Header("Proxy-Connection", "keep-alive"),
                HTTP2Header("Transfer-Encoding", "chunked"), HTTP2Header("Upgrade", "h2c"),
                HTTP2Header("X-Hop", "1"), HTTP2Header("TE", "gzip, trailers"),
                HTTP2Header("Content-Type", "text/plain"),
                HTTP2Header("Accept", "*/*"),
            ])
        #expect(
            HTTP2Message.h2RequestHeaders(head) == [
                HTTP2Header(":method", "POST"), HTTP2Header(":scheme", "https"),
                HTTP2Header(":authority", "api.example.com"), HTTP2Header(":path", "/a?b=1"),
                HTTP2Header("te", "trailers"), HTTP2Header("content-type", "text/plain"), HTTP2Header("accept", "*/*"),
            ])
    }

    @Test func teOtherThanTrailersIsDropped() {
        #expect(HTTP2Message.h2Fields(fromHTTP1: [HTTP2Header("TE", "gzip")]).isEmpty)
    }

    @Test func connectHasOnlyMethodAndAuthority() throws {
        let head = HTTP2RequestHead(method: "CONNECT", scheme: "", authority: "example.com:443", path: "", headers: [])
        let fields = HTTP2Message.h2RequestHeaders(head)
        #expect(fields == [HTTP2Header(":method", "CONNECT"), HTTP2Header(":authority", "example.com:443")])
        let back = try HTTP2Message.requestHead(fromH2: fields)
        #expect(back.method == "CONNECT" && back.authority == "example.com:443" && back.path.isEmpty)
    }

    @Test func h2RequestToHTTP1AddsHostAndJoinsCookies() throws {
        let head = try HTTP2Message.requestHead(fromH2: [
            HTTP2Header(":method", "GET"), HTTP2Header(":scheme", "https"), HTTP2Header(":authority", "example.com"),
            HTTP2Header(":path", "/"), HTTP2Header("cookie", "a=1"), HTTP2Header("accept", "*/*"),
            HTTP2Header("cookie", "b=2"),
        ])
        #expect(head.method == "GET" && head.scheme == "https" && head.authority == "example.com" && head.path == "/")
        #expect(
            head.headers == [
                HTTP2Header("host", "example.com"), HTTP2Header("cookie", "a=1; b=2"), HTTP2Header("accept", "*/*"),
            ])
    }

    @Test func malformedRequestHeadsAreRejected() {
        #expect(throws: HTTP2MessageError.missingPseudoHeader(":path")) {
            try HTTP2Message.requestHead(fromH2: [HTTP2Header(":method", "GET"), HTTP2Header(":scheme", "https")])
        }
        #expect(throws: HTTP2MessageError.duplicatePseudoHeader(":method")) {
            try HTTP2Message.requestHead(fromH2: [HTTP2Header(":method", "GET"), HTTP2Header(":method", "PUT")])
        }
        #expect(throws: HTTP2MessageError.unknownPseudoHeader(":status")) {
            try HTTP2Message.requestHead(fromH2: [HTTP2Header(":status", "200")])
        }
        #expect(throws: HTTP2MessageError.pseudoHeaderAfterRegularField(":path")) {
            try HTTP2Message.requestHead(fromH2: [
                HTTP2Header(":method", "GET"), HTTP2Header("accept", "*/*"), HTTP2Header(":path", "/"),
            ])
        }
    }

    @Test func responsesRoundTrip() throws {
        let fields = HTTP2Message.h2ResponseHeaders(
            HTTP2ResponseHead(
                status: 200,
                headers: [
                    HTTP2Header("Content-Length", "5"), HTTP2Header("Connection", "close"),
                    HTTP2Header("Transfer-Encoding", "chunked"), HTTP2Header("X-ATS-Decision", "allowed"),
                ]))
        #expect(
            fields == [
                HTTP2Header(":status", "200"), HTTP2Header("content-length", "5"),
                HTTP2Header("x-ats-decision", "allowed"),
            ])
        let head = try HTTP2Message.responseHead(fromH2: fields)
        #expect(head.status == 200)
        #expect(head.headers == [HTTP2Header("content-length", "5"), HTTP2Header("x-ats-decision", "allowed")])
        #expect(throws: HTTP2MessageError.invalidStatus("20")) {
            try HTTP2Message.responseHead(fromH2: [HTTP2Header(":status", "20")])
        }
        #expect(throws: HTTP2MessageError.missingPseudoHeader(":status")) {
            try HTTP2Message.responseHead(fromH2: [HTTP2Header("a", "b")])
        }
        #expect(throws: HTTP2MessageError.duplicatePseudoHeader(":status")) {
            try HTTP2Message.responseHead(fromH2: [HTTP2Header(":status", "200"), HTTP2Header(":status", "204")])
        }
        #expect(throws: HTTP2MessageError.unknownPseudoHeader(":path")) {
            try HTTP2Message.responseHead(fromH2: [HTTP2Header(":status", "200"), HTTP2Header(":path", "/")])
        }
    }

    @Test func lowerCaseNamesAreKeptAndMixedCaseOnesLowered() {
        let fields = HTTP2Message.h2Fields(fromHTTP1: [
            HTTP2Header("content-type", "text/plain"), HTTP2Header("X-Trace", "1"), HTTP2Header("HOST", "a.test"),
            HTTP2Header("connection", "x-trace"), HTTP2Header("UPGRADE", "h2c"),
        ])
        #expect(fields == [HTTP2Header("content-type", "text/plain")])
    }

    @Test func translatedRequestCrossesARealSession() throws {
        let loop = try HTTP2Loopback()
        let head = HTTP2RequestHead(
            method: "GET", scheme: "https", authority: "example.com", path: "/x",
            headers: [HTTP2Header("Connection", "close"), HTTP2Header("User-Agent", "t")])
        _ = try loop.client.submitRequest(HTTP2Message.h2RequestHeaders(head), endStream: true)
        try loop.pump()
        let received = loop.serverEvents.compactMap { event -> [HTTP2Header]? in
            if case .headers(_, .request, let fields) = event { return fields } else { return nil }
        }
        #expect(received.count == 1)
        let back = try HTTP2Message.requestHead(fromH2: received[0])
        #expect(back.path == "/x")
        #expect(back.headers == [HTTP2Header("host", "example.com"), HTTP2Header("user-agent", "t")])
    }
}
