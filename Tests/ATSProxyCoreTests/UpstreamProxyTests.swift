import ATSPolicy
import Foundation
import Testing

@testable import ATSProxyCore

/// `--upstream-proxy` parsing, the CONNECT request bytes, and reading the proxy's answer with the
/// strict response parser.
@Suite struct UpstreamProxyTests {
    static let proxy = UpstreamProxy(host: "proxy.corp", port: 3128)

    @Test func parsesHostPortAndPercentDecodedCredentials() throws {
        let plain = try UpstreamProxy(parsing: "http://proxy.corp:3128")
        #expect(plain == UpstreamProxy(host: "proxy.corp", port: 3128))
        let withAuth = try UpstreamProxy(parsing: "HTTP://me%40corp:p%3Ass@10.0.0.1:8080/")
        #expect(withAuth.host == "10.0.0.1")
        #expect(withAuth.port == 8080)
        #expect(withAuth.credentials == .init(user: "me@corp", password: "p:ss"))
        #expect(withAuth.description == "http://me@corp:***@10.0.0.1:8080")
        #expect(!withAuth.credentialsSummary.contains("p:ss"))
        let v6 = try UpstreamProxy(parsing: "http://[::1]:8888")
        #expect(v6.host == "::1")
        #expect(v6.description == "http://[::1]:8888")
    }

    @Test func refusesWhatIsNotAnHTTPProxyURLWithoutShowingThePassword() {
        let cases: [(String, String)] = [
            ("https://u:topsecret@proxy:3128", "only http:// upstream proxies are supported"),
            ("http://proxy.corp", "needs a port"),
            ("http://:3128", "names no host"),
            ("http://proxy:3128/path?x=1", "no path, query or fragment"),
            ("not a url", "is not a URL"),
        ]
        for (text, expected) in cases {
            #expect(throws: UpstreamProxy.ParseError.self) { try UpstreamProxy(parsing: text) }
            do {
                _ = try UpstreamProxy(parsing: text)
            } catch {
                #expect(error.description.contains(expected), "\(text): \(error)")
                #expect(!error.description.contains("topsecret"), "\(error)")
            }
        }
        #expect(UpstreamProxy.Credentials(colonSeparated: "a:b:c") == .init(user: "a", password: "b:c"))
        #expect(UpstreamProxy.Credentials(colonSeparated: "nocolon") == nil)
    }

    @Test func connectRequestBytes() {
        #expect(
            String(decoding: Self.proxy.connectRequest(host: "api.example.com", port: 443), as: UTF8.self)
                == "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
        var authed = Self.proxy
        authed.credentials = .init(user: "Aladdin", password: "open sesame")
        #expect(
            String(decoding: authed.connectRequest(host: "::1", port: 8443), as: UTF8.self)
                == "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n"
                + "Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n")
    }

    /// Feeds `text` one byte at a time and returns the first outcome that is not `.needMore`.
    static func outcome(_ text: String, proxy: UpstreamProxy = proxy) -> UpstreamProxyHandshake.Outcome {
        var handshake = UpstreamProxyHandshake(proxy: proxy, host: "api.example.com", port: 443)
        for byte in Array(text.utf8) {
            let outcome = handshake.receive([byte])
            if outcome != .needMore { return outcome }
        }
        return .needMore
    }

    @Test func a2xxOpensTheTunnelAndKeepsTheOriginsFirstBytes() {
        var handshake = UpstreamProxyHandshake(proxy: Self.proxy, host: "api.example.com", port: 443)
        #expect(handshake.receive(Array("HTTP/1.1 200 Connection est".utf8)) == .needMore)
        #expect(
            handshake.receive(Array("ablished\r\nVia: 1.1 corp\r\n\r\nSSH-2.0".utf8))
                == .established(remaining: Array("SSH-2.0".utf8)))
        #expect(Self.outcome("HTTP/1.0 200 OK\r\n\r\n") == .established(remaining: []))
        #expect(Self.outcome("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 Tunnel\r\n\r\n") == .established(remaining: []))
    }

    @Test func refusalsAre1004WithTheStatusAndA407SaysCredentialsAreWanted() {
        let bad = Self.outcome("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        #expect(
            bad
                == .failed(
                    .cannotConnectToHost,
                    detail: "upstream proxy proxy.corp:3128 answered 502 Bad Gateway to CONNECT api.example.com:443"))
        let auth = Self.outcome(
            "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\n"
                + "Content-Length: 5\r\n\r\nnope!")
        guard case .failed(let code, let detail) = auth else {
            Issue.record("407 did not fail: \(auth)")
            return
        }
        #expect(code == .cannotConnectToHost)
        #expect(detail.hasPrefix(UpstreamProxy.detailPrefix))
        #expect(detail.contains("answered 407 Proxy Authentication Required"))
        #expect(detail.contains("the upstream proxy wants credentials (sent no credentials"))
        #expect(detail.contains("it asks for: Basic realm=\"corp\""))
        var authed = Self.proxy
        authed.credentials = .init(user: "team", password: "hunter2")
        guard case .failed(_, let withUser) = Self.outcome("HTTP/1.1 407 Nope\r\n\r\n", proxy: authed) else {
            Issue.record("407 did not fail")
            return
        }
        #expect(withUser.contains("sent credentials for user 'team'"))
        #expect(!withUser.contains("hunter2"))
    }

    @Test func malformedAnswersAndAnEarlyCloseFail() {
        guard case .failed(.cannotConnectToHost, let detail) = Self.outcome("SSH-2.0-OpenSSH\r\n\r\n") else {
            Issue.record("a non-HTTP answer did not fail")
            return
        }
        #expect(detail.contains("sent a malformed answer to CONNECT api.example.com:443"), "\(detail)")
        var handshake = UpstreamProxyHandshake(proxy: Self.proxy, host: "api.example.com", port: 443)
        #expect(handshake.receive(Array("HTTP/1.1 200".utf8)) == .needMore)
        guard case .failed(.cannotConnectToHost, let closed) = handshake.receiveEOF() else {
            Issue.record("EOF did not fail")
            return
        }
        #expect(closed.contains("closed the connection before answering CONNECT api.example.com:443"))
    }
}
