import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// Pipelined requests around the proxy's own answers and an origin's last response: found by an independent
/// review of the ExchangeState change (the first one trapped and ended the process).
@Suite struct ProxySessionPipeliningTests {
    typealias Session = ProxySessionTests

    @Test func aRequestPipelinedBehindTheProxysOwnPageIsForwardedOnce() throws {
        // The page's keep-alive answer used to resume the parser from inside the first request's handling: the
        // second request then got the first one's message end (a second end for a complete request: a trap).
        let harness = try Session.Harness()
        let commands = harness.send(
            "GET / HTTP/1.1\r\nHost: proxy\r\n\r\n"
                + "GET http://localhost:9000/x HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        #expect(Transcript(commands).clientText.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(Transcript(commands).connects.map(\.authority) == ["localhost:9000"])
        #expect(!Transcript(commands).closesClient)
        let sent = harness.send(.upstreamConnected)
        let upstream = Transcript(sent).upstreamText
        #expect(upstream.hasPrefix("GET /x HTTP/1.1\r\n"))
        #expect(upstream.components(separatedBy: "GET /x").count == 2, "the request went upstream once: \(upstream)")
    }

    @Test func aRequestPipelinedBehindAnOnboardingPageIsForwarded() throws {
        let harness = try Session.Harness()
        let base = harness.session.services
        let services = ProxyServices(
            policy: base.policy, settings: base.settings, serverTLS: base.serverTLS, upstreamTLS: base.upstreamTLS,
            processID: base.processID,
            onboarding: try OnboardingSite(certificate: harness.proxyCA.certificate, proxyAddresses: ["127.0.0.1:8080"])
        )
        var session = ProxySession(services: services, clientAddress: "127.0.0.1:5000", connectionNumber: 1)
        _ = session.start()
        let commands = session.handle(
            .clientBytes(
                Array(
                    ("GET http://\(OnboardingSite.host)/ HTTP/1.1\r\nHost: \(OnboardingSite.host)\r\n\r\n"
                        + "GET http://localhost:9000/y HTTP/1.1\r\nHost: localhost:9000\r\n\r\n").utf8)),
            now: Date())
        let text = Transcript(commands).clientText
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(text.prefix(200))")
        #expect(Transcript(commands).connects.map(\.authority) == ["localhost:9000"])
        #expect(!Transcript(commands).closesClient)
    }

    @Test func anOriginsCloseNotifyAfterItsLastResponseIsNotTheNextUpstreamsEnd() throws {
        // The origin's `Connection: close` answer and its close_notify arrive in one read while the client has
        // pipelined a second request: the session finishes /1 and opens a new upstream for /2; the old engine's
        // end used to be applied to the new upstream, failing /2 with 502 / -1005.
        let harness = try Session.Harness()
        let client = try Session.establishTunnel(harness, host: "api.example.com")
        let pipelined =
            "GET /1 HTTP/1.1\r\nHost: api.example.com\r\n\r\nGET /2 HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
        #expect(client.write(Array(pipelined.utf8)) > 0)
        _ = harness.send(.clientBytes(client.takeOutbound()))
        let origin = try harness.originServer(host: "api.example.com")
        _ = Session.pumpUpstream(harness, origin: origin, first: harness.send(.upstreamConnected))
        guard case .data = origin.read() else {
            Issue.record("the origin got no request")
            return
        }
        _ = origin.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\na".utf8))
        origin.shutdown()
        let answer = harness.send(.upstreamBytes(origin.takeOutbound()))
        let records = Transcript(answer).records
        #expect(records.map(\.url) == ["https://api.example.com/1"], "\(Session.described(answer))")
        #expect(records.first?.status == 200)
        #expect(Transcript(answer).connects.map(\.authority) == ["api.example.com:443"], "a new upstream for /2")
        #expect(!Transcript(answer).closesClient)
    }
}
