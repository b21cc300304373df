import ATSPolicy
import ATSTLS
import Foundation
import Testing

@testable import ATSProxyCore

/// Regression tests from the review of the `ExchangeLeg`/`ProxySession` split and of `--challenge` in the session:
/// each pins a behaviour the split or the challenge wiring could get wrong, at the event/command level.
@Suite struct ExchangeLegReviewTests {
    typealias Session = ProxySessionTests

    // MARK: - Challenge mode in the session

    static let challengedHost = "api.example.com"

    /// A harness whose session challenges every connection to `challengedHost` with `kind` (`--challenge-every 1`),
    /// its challenge contexts offering http/1.1 only, as `run` builds them.
    static func challengedHarness(kind: ChallengeKind = .wrongHost) throws -> Session.Harness {
        let harness = try Session.Harness()
        let base = harness.session.services
        let rotation = ChallengeRotation(
            specs: [try ChallengeSpec(parsing: "api\\.example\\.com=\(kind.rawValue)")], every: 1)
        let contexts = try ChallengeTLSContexts(
            certificates: try ChallengeCertificates(authority: harness.proxyCA),
            alpn: ServerTLSContext.preferring(["http/1.1"]))
        let appTrust = AppTrustServices(
            challenges: rotation, challengeContexts: contexts, pinningPolicies: [],
            realTrust: try TrustStore(systemRoots: false),
            interceptionTrust: try TrustStore(systemRoots: false, extraAnchors: [harness.proxyCA.certificate]),
            leaves: try LeafCertificateCache(authority: harness.proxyCA))
        let services = ProxyServices(
            policy: base.policy, settings: base.settings, serverTLS: base.serverTLS, upstreamTLS: base.upstreamTLS,
            processID: base.processID, appTrust: appTrust)
        harness.session = ProxySession(services: services, clientAddress: "127.0.0.1:5000", connectionNumber: 1)
        _ = harness.session.start()
        return harness
    }

    /// CONNECT, then a client that does not verify the server completes the handshake with whatever the session
    /// presents. Returns the client engine and every command the session answered on the way.
    static func acceptChallenge(_ harness: Session.Harness) throws -> (TLSConnection, [ProxyCommand]) {
        var commands = harness.send(
            "CONNECT \(challengedHost):443 HTTP/1.1\r\nHost: \(challengedHost):443\r\n\r\n")
        let clientContext = try TLSContext(role: .client)
        try clientContext.setVersions(minimum: .tls12, maximum: .tls13)
        try clientContext.setClientALPN(["h2", "http/1.1"])
        let client = try TLSConnection(context: clientContext, serverName: challengedHost)
        for _ in 0..<10 {
            let progress = client.handshake()
            if progress == .complete && !client.hasOutbound { break }
            if case .failed(let failure) = progress { Issue.record("client handshake failed: \(failure)") }
            let reply = harness.send(.clientBytes(client.takeOutbound()))
            commands += reply
            client.receive(Session.clientWrites(reply))
        }
        #expect(client.state == .established)
        #expect(client.negotiatedALPN != "h2", "a challenged connection never speaks HTTP/2")
        return (client, commands)
    }

    static func challengeRecords(_ commands: [ProxyCommand]) -> [RequestRecord] {
        Session.records(commands).filter { $0.appTrust?.challenge != nil }
    }

    @Test func aClientThatBreaksOffTheChallengedHandshakeIsOnePass() throws {
        let harness = try Self.challengedHarness()
        var commands = harness.send(
            "CONNECT \(Self.challengedHost):443 HTTP/1.1\r\nHost: \(Self.challengedHost):443\r\n\r\n")
        commands += harness.send(.clientBytes(Array("not a ClientHello at all\r\n\r\n".utf8)))
        commands += harness.send(.clientGone)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeRefused], "\(records)")
        #expect(records.first?.appTrust?.challenge == "wrong-host")
        #expect(Session.connects(commands).isEmpty)
        #expect(Session.closesClient(commands))
    }

    @Test func aRequestThroughTheChallengeIsOneFindingAnswered502AndNeverForwarded() throws {
        let harness = try Self.challengedHarness()
        var (client, commands) = try Self.acceptChallenge(harness)
        #expect(Self.challengeRecords(commands).isEmpty, "no verdict before a request: \(commands)")
        _ = client.write(Array("GET /v1 HTTP/1.1\r\nHost: \(Self.challengedHost)\r\n\r\n".utf8))
        let answer = harness.send(.clientBytes(client.takeOutbound()))
        commands += answer
        client.receive(Session.clientWrites(answer))
        #expect(Session.text(Session.readAll(client)).hasPrefix("HTTP/1.1 502 "))
        commands += harness.send(.clientGone)
        commands += harness.send(.timerFired)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeAccepted], "\(records)")
        #expect(records.first?.url == "https://api.example.com/v1")
        #expect(Session.records(commands).count == 1, "one record per challenged connection")
        #expect(Session.connects(commands).isEmpty, "nothing of a challenged connection reaches an origin")
        #expect(Session.closesClient(answer))
    }

    /// A CONNECT sent through the challenged tunnel is a request the client sent through the forged server like any
    /// other: a finding, not a 400 followed by a pass ("closed without sending a request").
    @Test func aCONNECTThroughTheChallengeIsAFindingToo() throws {
        let harness = try Self.challengedHarness()
        var (client, commands) = try Self.acceptChallenge(harness)
        _ = client.write(Array("CONNECT other.example.com:443 HTTP/1.1\r\nHost: other.example.com:443\r\n\r\n".utf8))
        let answer = harness.send(.clientBytes(client.takeOutbound()))
        commands += answer
        client.receive(Session.clientWrites(answer))
        #expect(Session.text(Session.readAll(client)).hasPrefix("HTTP/1.1 502 "))
        commands += harness.send(.clientGone)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeAccepted], "\(records)")
        #expect(Session.records(commands).count == 1, "one record per challenged connection")
        #expect(Session.connects(commands).isEmpty)
    }

    @Test func aClientThatClosesAfterTheChallengedHandshakeWithoutARequestIsOnePass() throws {
        let harness = try Self.challengedHarness()
        var (_, commands) = try Self.acceptChallenge(harness)
        commands += harness.send(.clientEOF)
        commands += harness.send(.clientGone)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeRefused], "\(records)")
        #expect(Session.records(commands).count == 1)
    }

    /// Request bytes that never become a whole head (malformed, an HTTP/2 preface on the HTTP/1.1 connection, a head
    /// cut short by the header timeout or the client's close) still went through the forged server: a finding, never
    /// a pass, and nothing reaches an origin.
    @Test(arguments: [
        ("GET /v1 HTTP/1.1\r\nno colon here\r\n\r\n", ProxyEvent.clientGone),
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ProxyEvent.clientGone),
        ("GET /v1 HTTP/1.1\r\nHost: api.exa", ProxyEvent.timerFired),
        ("GET /v1 HTTP/1.1\r\nHost: api.exa", ProxyEvent.clientEOF),
    ])
    func requestBytesThroughTheChallengeAreAFindingEvenWithoutAWholeHead(bytes: String, then event: ProxyEvent) throws {
        let harness = try Self.challengedHarness()
        var (client, commands) = try Self.acceptChallenge(harness)
        _ = client.write(Array(bytes.utf8))
        commands += harness.send(.clientBytes(client.takeOutbound()))
        commands += harness.send(event)
        commands += harness.send(.clientGone)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeAccepted], "\(records)")
        #expect(Session.records(commands).count == 1, "one record per challenged connection")
        #expect(Session.connects(commands).isEmpty)
        #expect(Session.closesClient(commands))
    }
}
