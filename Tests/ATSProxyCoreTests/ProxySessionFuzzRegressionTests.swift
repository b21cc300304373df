import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// Findings of the `proxy-session` fuzz target (Fuzzing/Targets/proxy-session), each replayed as a playbook: the
/// event sequence the fuzzer found, cut down to what matters, and the invariant it broke. The input that found it
/// is kept in Fuzzing/Corpus/proxy-session as `regression-…`, so every fuzz run replays it too.
@Suite struct ProxySessionFuzzRegressionTests {
    typealias Harness = ProxySessionTests.Harness

    /// A TLS handshake record (so the tunnel is read as TLS) whose message is no ClientHello: the handshake fails.
    static let brokenHandshakeRecord: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0x04] + Array("junk".utf8)

    /// Found as `regression-handshake-failure-task-id-…`: a blocked request (task 1), then a CONNECT whose client
    /// does not speak TLS. The CONNECT is not counted as a task, and its handshake-failure record took the current
    /// count as its number: task 1 logged twice, one record hiding the other in the live view and the HAR. (The
    /// client now sends a broken TLS record: plain HTTP after CONNECT is a cleartext load since protocol detection,
    /// see `TunnelDetectionTests`.)
    @Test func aFailedClientHandshakeAfterARequestIsLoggedUnderATaskIDOfItsOwn() throws {
        let harness = try Harness()
        let blocked = harness.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        let first = try #require(Transcript(blocked).records.first)
        #expect(first.result == .blockedCleartext)
        let connect = harness.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        #expect(Transcript(connect).clientText.hasPrefix("HTTP/1.1 200 "))
        #expect(Transcript(connect).records.isEmpty)
        // A TLS record that is no ClientHello: the handshake fails and the CONNECT gets its record.
        let refused = harness.send(.clientBytes(Self.brokenHandshakeRecord))
        let second = try #require(Transcript(refused).records.first)
        #expect(second.result == .clientUntrustedCA)
        #expect(Transcript(refused).closesClient)
        #expect(first.taskID.hasSuffix(".1"))
        #expect(second.taskID.hasSuffix(".2"))
        #expect(second.taskID != first.taskID)
    }

    /// The same record on a connection whose first request is the CONNECT: task 1 (it was task 0, a number no
    /// other record of the proxy ever has).
    @Test func aFailedClientHandshakeOnAFreshConnectionIsTaskOne() throws {
        let harness = try Harness()
        _ = harness.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        let refused = harness.send(.clientBytes(Self.brokenHandshakeRecord))
        let record = try #require(Transcript(refused).records.first)
        #expect(record.result == .clientUntrustedCA)
        #expect(record.taskID.hasSuffix(".1"))
        #expect(Transcript(refused).records.count == 1)
    }

    /// Found as `regression-pipelined-after-onboarding-…`: a request the proxy answers itself and keeps the
    /// connection open for (its own info page, the onboarding site), with the next request pipelined behind it.
    /// The answer resumed the parser before the answered request's message end was handled, so the next request
    /// started first and that stale end then ended it a second time: `ExchangeState.requestEnded` trapped, and one
    /// client's two pipelined requests took the whole proxy down.
    @Test func aRequestPipelinedAfterTheProxysOwnPageIsForwardedOnce() throws {
        let harness = try Harness()
        let commands = harness.send(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
                + "GET http://localhost:9000/next HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        #expect(Transcript(commands).clientText.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(Transcript(commands).connects.map(\.authority) == ["localhost:9000"])
        #expect(!Transcript(commands).closesClient)
        let forwarded = Transcript(harness.send(.upstreamConnected)).upstreamText
        #expect(forwarded.hasPrefix("GET /next HTTP/1.1\r\n"))
        #expect(forwarded.components(separatedBy: "GET ").count == 2)
        let response = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)))
        #expect(
            Transcript(response).clientText
                == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(Transcript(response).records.count == 1)
        #expect(!Transcript(response).closesClient)
    }

    /// The fuzzer's own sequence, with the onboarding site: a chunked POST is forwarded, an onboarding request and
    /// an HTTP/1.0 GET wait behind it, the origin stalls. The timeout's 504 ends the POST; the onboarding page and
    /// the GET follow in order, and the GET reaches the origin once. (Once the trap was fixed, the same sequence
    /// showed the timer closing the connection under the GET that had just started: it closed whatever exchange
    /// was current after the 504, not only the one that timed out.)
    @Test func theOnboardingPageAndTheRequestBehindItFollowATimedOutExchange() throws {
        let proxyCA = try CertificateAuthority.generate()
        let evaluator = ATSEvaluator(
            configuration: ATSConfigurationParser().parse(.dictionary([:])),
            options: EvaluationOptions(platform: Platform(parsing: "ios:18.0")!))
        let services = ProxyServices(
            policy: PolicyStore(.init(evaluator: evaluator, sourceSummary: "test", processName: "Tester")),
            settings: ProxySettings(),
            serverTLS: try ServerTLSContext(leaves: try LeafCertificateCache(authority: proxyCA)),
            upstreamTLS: UpstreamTLSClient(trust: try TrustStore(systemRoots: false, extraAnchors: []), alpn: []),
            processID: 100,
            onboarding: try OnboardingSite(certificate: proxyCA.certificate, proxyAddresses: ["127.0.0.1:8080"]))
        var session = ProxySession(services: services, clientAddress: "127.0.0.1:5000", connectionNumber: 1)
        let now = Date()
        func send(_ text: String) -> [ProxyCommand] { session.handle(.clientBytes(Array(text.utf8)), now: now) }
        _ = session.start()
        let post = send(
            "POST http://localhost:8000/p HTTP/1.1\r\nHost: localhost:8000\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n")
        #expect(Transcript(post).connects.map(\.authority) == ["localhost:8000"])
        _ = session.handle(.upstreamConnected, now: now)
        _ = send("GET http://ats-proxy.invalid/ HTTP/1.1\r\nHost: ats-proxy.invalid\r\n\r\n")
        _ = send("GET http://localhost:8000/old HTTP/1.0\r\n\r\n")
        let fired = session.handle(.timerFired, now: now)
        let written = Transcript(fired).clientText
        #expect(written.hasPrefix("HTTP/1.1 504 Gateway Timeout\r\n"))
        #expect(written.contains("HTTP/1.1 200 OK\r\nContent-Type: text/html"))
        #expect(Transcript(fired).records.count == 1)
        #expect(Transcript(fired).connects.map(\.authority) == ["localhost:8000"])
        #expect(!Transcript(fired).closesClient)
        let forwarded = Transcript(session.handle(.upstreamConnected, now: now)).upstreamBytes
        let text = ProxySessionTests.text(forwarded)
        #expect(text.hasPrefix("GET /old HTTP/1.1\r\n"))
        #expect(text.components(separatedBy: "GET ").count == 2)
    }

    /// The timer's half of the finding above, without local answers: a request pipelined behind an exchange that
    /// times out waiting for its origin is forwarded after the 504, not cut off with the connection.
    @Test func aRequestPipelinedBehindATimedOutExchangeIsForwarded() throws {
        let harness = try Harness()
        _ = harness.send("GET http://localhost:9000/slow HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = harness.send(.upstreamConnected)
        _ = harness.send("GET http://localhost:9000/next HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        let fired = harness.send(.timerFired)
        #expect(
            Transcript(fired).clientText.hasPrefix("HTTP/1.1 504 Gateway Timeout\r\n"))
        #expect(Transcript(fired).records.map(\.errorCode) == [-1001])
        #expect(Transcript(fired).connects.map(\.authority) == ["localhost:9000"])
        #expect(!Transcript(fired).closesClient)
        let forwarded = Transcript(harness.send(.upstreamConnected)).upstreamText
        #expect(forwarded.hasPrefix("GET /next HTTP/1.1\r\n"))
        let response = harness.send(.upstreamBytes(Array("HTTP/1.1 204 No Content\r\n\r\n".utf8)))
        #expect(Transcript(response).records.map(\.status) == [204])
    }
}
