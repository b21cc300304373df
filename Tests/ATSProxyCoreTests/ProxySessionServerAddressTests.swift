import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// `RequestRecord.serverAddress`: the peer the driver reports (`ProxyEvent.upstreamPeer`) for the upstream
/// connection a request went out on, new, kept by the session or handed over by the pool; nil for a request
/// that reached no upstream, even right after one that did. And the JSON log carries it only when set.
@Suite struct ProxySessionServerAddressTests {
    typealias Session = ProxySessionTests

    static func request(_ authority: String, _ path: String = "/") -> String {
        "GET http://\(authority)\(path) HTTP/1.1\r\nHost: \(authority)\r\n\r\n"
    }

    static let ok = ProxyEvent.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8))

    @Test func recordsNameThePeerOfTheConnectionThatCarriedThemAndNoneWithoutOne() throws {
        let harness = try Session.Harness()
        // A new connection.
        #expect(
            Transcript(harness.send(Self.request("localhost:9000", "/new"))).connects.map(\.authority) == [
                "localhost:9000"
            ])
        _ = harness.send(.upstreamPeer("127.0.0.1"))
        _ = harness.send(.upstreamConnected)
        let fresh = try #require(Transcript(harness.send(Self.ok)).records.first)
        #expect(fresh.url.hasSuffix("/new") && fresh.serverAddress == "127.0.0.1")
        // The same connection, kept by the session.
        #expect(Transcript(harness.send(Self.request("localhost:9000", "/kept"))).connects.isEmpty)
        let kept = try #require(Transcript(harness.send(Self.ok)).records.first)
        #expect(kept.url.hasSuffix("/kept") && kept.serverAddress == "127.0.0.1")
        // Blocked before any upstream: no server, although the session still holds the last one.
        let blocked = try #require(Transcript(harness.send(Self.request("example.com"))).records.first)
        #expect(blocked.result == .blockedCleartext && blocked.serverAddress == nil)
        // A new connection that fails: the previous connection's address is not carried over.
        #expect(
            Transcript(harness.send(Self.request("localhost:9001"))).connects.map(\.authority) == ["localhost:9001"])
        let failed = try #require(
            Transcript(harness.send(.upstreamConnectFailed(.refused))).records.first)
        #expect(failed.result == .failed && failed.serverAddress == nil)
        // A connection the pool hands over.
        let asked = harness.send(Self.request("localhost:9000", "/pooled"))
        let key = try #require(
            Transcript(asked).connects.compactMap(\.reuse).first)
        _ = harness.send(.upstreamPeer("::1"))
        _ = harness.send(
            .upstreamReused(
                UpstreamLease(key: key, tls: nil, facts: nil, wire: .http1, shareable: true)))
        let pooled = try #require(Transcript(harness.send(Self.ok)).records.first)
        #expect(pooled.url.hasSuffix("/pooled") && pooled.serverAddress == "::1")
    }

    @Test func theJSONLogCarriesTheAddressOnlyWhenThereIsOne() throws {
        let formatter = DiagnosticsFormatter(level: .summary, timeZone: TimeZone(identifier: "UTC")!)
        var record = RequestRecord(
            time: Date(timeIntervalSince1970: 0), clientAddress: "127.0.0.1:1", taskID: "A.1", method: "GET",
            url: "https://a.example/", httpProtocol: "http/1.1", source: .urlsession, result: .completed,
            atsRequired: true, ruleChain: [], rule: "r", status: 200)
        #expect(!formatter.jsonLine(record).contains("serverAddress"))
        record.serverAddress = "2001:db8::1"
        let object = try JSONSerialization.jsonObject(with: Data(formatter.jsonLine(record).utf8)) as? [String: Any]
        #expect(object?["serverAddress"] as? String == "2001:db8::1")
    }
}
