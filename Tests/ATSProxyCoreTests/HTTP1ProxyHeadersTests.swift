import Testing

@testable import ATSProxyCore

/// Hop-by-hop removal, persistence and Expect rules of a forwarding proxy.
@Suite struct HTTP1ProxyHeadersTests {
    @Test func hopByHopFieldsAndConnectionNamedFieldsAreRemoved() {
        let headers: HTTPFields = [
            "Host": "a", "Connection": "close, X-Secret", "x-secret": "1", "Proxy-Connection": "keep-alive",
            "Keep-Alive": "timeout=5", "TE": "trailers", "Trailer": "X-Sum", "Upgrade": "h2c",
            "Proxy-Authorization": "Basic eA==", "Proxy-Authenticate": "Basic", "Transfer-Encoding": "chunked",
            "Accept": "*/*",
        ]
        let forwarded = HTTP1ProxyHeaders.removingHopByHop(headers)
        #expect(forwarded == ["Host": "a", "Transfer-Encoding": "chunked", "Accept": "*/*"])
        let reframed = HTTP1ProxyHeaders.removingHopByHop(headers, options: .init(reframing: true))
        #expect(reframed == ["Host": "a", "Accept": "*/*"])
    }

    @Test func writingAHeadThroughTheFilterSkipsHopByHopFields() {
        let headers: HTTPFields = [
            "Server": "x", "Connection": "keep-alive, X-Secret", "x-secret": "1", "Keep-Alive": "timeout=5",
            "Transfer-Encoding": "chunked", "Vary": "Accept",
        ]
        let head = HTTPResponseHead(status: 200, reason: "OK", headers: headers)
        var written: [UInt8] = []
        HTTP1Serializer.writeResponseHead(
            head, dropping: HTTP1ProxyHeaders.HopByHopFilter(headers, options: .init(reframing: true)),
            appending: [HTTPField(name: "Connection", value: "close")], into: &written)
        #expect(
            String(decoding: written, as: UTF8.self)
                == "HTTP/1.1 200 OK\r\nServer: x\r\nVary: Accept\r\nConnection: close\r\n\r\n")
    }

    /// The serializer's filtered path writes what `removingHopByHop` and the plain serializer write.
    @Test(arguments: [
        HTTP1ProxyHeaders.Options(), HTTP1ProxyHeaders.Options(reframing: true),
    ])
    func writingAHeadThroughTheFilterEqualsRemovingThenWriting(options: HTTP1ProxyHeaders.Options) {
        let sets: [HTTPFields] = [
            ["Server": "nginx", "Content-Length": "2", "Connection": "keep-alive"],
            ["Server": "x", "Connection": "close, X-Secret", "x-secret": "1", "Keep-Alive": "timeout=5"],
            ["Transfer-Encoding": "chunked", "Trailer": "X-Sum", "Date": "today", "Connection": "Content-Length"],
            ["Content-Type": "text/plain", "Vary": "Accept"],
        ]
        let extra = [HTTPField(name: "Connection", value: "close")]
        for headers in sets {
            let head = HTTPResponseHead(status: 200, reason: "OK", headers: headers)
            var expected = head
            expected.headers = HTTP1ProxyHeaders.removingHopByHop(headers, options: options)
            expected.headers.fields += extra
            var written: [UInt8] = []
            HTTP1Serializer.writeResponseHead(expected, into: &written)
            var filtered: [UInt8] = []
            HTTP1Serializer.writeResponseHead(
                head, dropping: HTTP1ProxyHeaders.HopByHopFilter(headers, options: options), appending: extra,
                into: &filtered)
            #expect(
                String(decoding: filtered, as: UTF8.self) == String(decoding: written, as: UTF8.self), "\(headers)")
        }
    }

    @Test func theLengthSwitchedHopByHopCheckMatchesTheList() {
        for name in HTTP1ProxyHeaders.hopByHop {
            #expect(HTTP1ProxyHeaders.isHopByHop(name))
            #expect(HTTP1ProxyHeaders.isHopByHop(name.uppercased()))
        }
        for name in ["Host", "T", "TEX", "Trailers", "Connections", "Keep-Alive2", "Proxy-Authorisation", ""] {
            #expect(!HTTP1ProxyHeaders.isHopByHop(name))
        }
    }

    @Test func headersWithoutHopByHopFieldsComeBackUnchanged() {
        let headers: HTTPFields = ["Host": "a", "Content-Length": "3", "Accept": "*/*"]
        #expect(HTTP1ProxyHeaders.removingHopByHop(headers) == headers)
        #expect(
            HTTP1ProxyHeaders.removingHopByHop(headers, options: .init(reframing: true)) == [
                "Host": "a", "Accept": "*/*",
            ])
    }

    @Test func listElementsAreFoundInPlace() {
        let headers: HTTPFields = ["Connection": " keep-alive ,, Upgrade\t", "connection": "CLOSE"]
        #expect(headers.hasListElement("Connection", "upgrade"))
        #expect(headers.hasListElement("Connection", "close"))
        #expect(headers.hasListElement("CONNECTION", "Keep-Alive"))
        #expect(!headers.hasListElement("Connection", "keep"))
        #expect(!headers.hasListElement("Connection", ""))
        #expect(!headers.hasListElement("Upgrade", "close"))
    }

    @Test func connectionCannotRemoveRoutingOrFramingFields() {
        let headers: HTTPFields = [
            "Host": "a", "Content-Length": "3", "Connection": "Host, content-length, X-A", "X-A": "1",
        ]
        #expect(HTTP1ProxyHeaders.removingHopByHop(headers) == ["Host": "a", "Content-Length": "3"])
    }

    @Test func upgradeIsKeptWhenUpgrading() {
        let headers: HTTPFields = [
            "Host": "a", "Upgrade": "websocket", "Connection": "keep-alive, Upgrade", "Sec-WebSocket-Key": "k",
        ]
        let forwarded = HTTP1ProxyHeaders.removingHopByHop(headers, options: .init(upgrading: true))
        #expect(forwarded == ["Host": "a", "Upgrade": "websocket", "Sec-WebSocket-Key": "k", "Connection": "Upgrade"])
    }

    /// A version and Connection value with the persistence they imply.
    struct KeepAliveCase: Sendable {
        let version: HTTP1Version
        let connection: String?
        let keepAlive: Bool
    }

    @Test(arguments: [
        KeepAliveCase(version: .http11, connection: nil, keepAlive: true),
        KeepAliveCase(version: .http11, connection: "Close", keepAlive: false),
        KeepAliveCase(version: .http11, connection: "Upgrade, close", keepAlive: false),
        KeepAliveCase(version: .http10, connection: nil, keepAlive: false),
        KeepAliveCase(version: .http10, connection: "Keep-Alive", keepAlive: true),
        KeepAliveCase(version: .http10, connection: "keep-alive, close", keepAlive: false),
    ])
    func keepAliveFollowsVersionAndConnection(_ testCase: KeepAliveCase) {
        var headers: HTTPFields = ["Host": "a"]
        if let connection = testCase.connection { headers.append(name: "Connection", value: connection) }
        #expect(HTTP1ProxyHeaders.isKeepAlive(version: testCase.version, headers: headers) == testCase.keepAlive)
    }

    @Test func expectContinueIsDetected() {
        func expectation(_ value: String?, _ version: HTTP1Version = .http11) -> HTTP1ProxyHeaders.Expectation {
            var headers: HTTPFields = ["Host": "a"]
            if let value { headers.append(name: "Expect", value: value) }
            return HTTP1ProxyHeaders.expectation(
                of: HTTPRequestHead(method: "PUT", target: .origin("/"), version: version, headers: headers))
        }
        #expect(expectation(nil) == .none)
        #expect(expectation("100-Continue") == .continue100)
        #expect(expectation("100-continue", .http10) == .none)
        #expect(expectation("something-else") == .unsupported)
    }

    @Test func headerLookupIsCaseInsensitiveAndOrdered() {
        var headers: HTTPFields = ["Set-Cookie": "a=1", "set-cookie": "b=2", "X": "y"]
        #expect(headers.values("SET-COOKIE") == ["a=1", "b=2"])
        #expect(headers.count(of: "set-Cookie") == 2)
        headers.replaceOrAppend(name: "SET-COOKIE", value: "c=3")
        #expect(headers == ["Set-Cookie": "c=3", "X": "y"])
        headers.remove("x")
        #expect(headers == ["Set-Cookie": "c=3"])
        #expect(!HTTPFields.nameMatches("Host", "Hosts"))
    }
}
