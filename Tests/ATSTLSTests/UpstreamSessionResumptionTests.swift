import ATSPolicy
import ATSTestSupport
import Foundation
import Synchronization
import Testing

@testable import ATSTLS

/// Tests for: upstream TLS session resumption and the judgement of resumed handshakes.
@Suite("Upstream session resumption")
struct UpstreamSessionResumptionTests {
    static let authority = try! CertificateAuthority.generate(hostName: "resumption-machine")
    static let leaves = try! LeafCertificateCache(authority: authority)
    static let trust = try! TrustStore(systemRoots: false, extraAnchors: [authority.certificate])

    static func requirements(maximum: TLSProtocolVersion = .tls13) -> TLSRequirements {
        var requirements = Policies.standard.decide(try! RequestTarget(parsing: "https://shop.test/")).requirements
        requirements.maximumVersion = maximum
        return requirements
    }

    /// A full connection: handshake, summary, then one record each way so the client processes
    /// the server's post-handshake messages (TLS 1.3 tickets).
    @discardableResult
    static func connect(
        _ client: UpstreamTLSClient, _ server: ServerTLSContext, requirements: TLSRequirements,
        host: String = "shop.test", port: Int? = 443
    ) throws -> (engine: TLSConnection, summary: HandshakeSummary) {
        let upstream = try client.makeConnection(requirements: requirements, host: host, port: port)
        let downstream = try server.makeConnection(connectHost: host)
        let result = pumpHandshake(client: upstream, server: downstream)
        #expect(result.client == nil && result.server == nil)
        let summary = client.summarize(upstream, host: host, time: Date())
        downstream.write(Array("ping".utf8))
        upstream.receive(downstream.takeOutbound())
        #expect(upstream.read() == .data(Array("ping".utf8)))
        return (upstream, summary)
    }

    @Test(arguments: [TLSProtocolVersion.tls13, .tls12])
    func secondConnectionResumesAndKeepsTheFullHandshakesFacts(version: TLSProtocolVersion) throws {
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.trust)
        let requirements = Self.requirements(maximum: version)
        let first = try Self.connect(client, server, requirements: requirements)
        #expect(!first.engine.resumedSession)
        #expect(!first.summary.resumedSession)
        #expect(client.sessions?.count == 1)

        let second = try Self.connect(client, server, requirements: requirements)
        #expect(second.engine.resumedSession)
        #expect(second.summary.resumedSession)
        #expect(second.summary.version == version)
        #expect(second.summary.cipher == first.summary.cipher)
        #expect(second.summary.presentedChain == first.summary.presentedChain)
        #expect(second.summary.builtChain == first.summary.builtChain)
        #expect(second.summary.verificationIssues == first.summary.verificationIssues)
        #expect(second.summary.anchor == .userInstalled)
        #expect(second.summary.time == first.summary.time)
        let verdict = UpstreamVerdict.judging(
            second.summary, requirements: requirements, url: "https://shop.test/", host: "shop.test")
        #expect(verdict.outcome == .allowed, "\(verdict.rule)")

        // Sessions issued on the resumed connection carry the same facts onward.
        let third = try Self.connect(client, server, requirements: requirements)
        #expect(third.summary.resumedSession)
        #expect(third.summary.presentedChain == first.summary.presentedChain)
    }

    @Test func aResumedSessionIsJudgedLikeTheFullHandshakeThatCreatedIt() throws {
        // The chain fails verification (the client does not trust the proxy CA): the resumed
        // connection must be blocked for the same reason, not pass for lack of certificates.
        let server = try ServerTLSContext(leaves: Self.leaves)
        let untrusting = UpstreamTLSClient(trust: try TrustStore(systemRoots: false))
        let requirements = Self.requirements()
        let first = try Self.connect(untrusting, server, requirements: requirements)
        let firstVerdict = UpstreamVerdict.judging(
            first.summary, requirements: requirements, url: "https://shop.test/", host: "shop.test")
        #expect(firstVerdict.isBlocked)
        let second = try Self.connect(untrusting, server, requirements: requirements)
        #expect(second.summary.resumedSession)
        let verdict = UpstreamVerdict.judging(
            second.summary, requirements: requirements, url: "https://shop.test/", host: "shop.test")
        #expect(verdict.isBlocked)
        #expect(verdict.rule == firstVerdict.rule)
    }

    @Test func sessionsAreKeptPerHostPortAndOffer() throws {
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.trust)
        try Self.connect(client, server, requirements: Self.requirements(), port: 443)
        #expect(try !Self.connect(client, server, requirements: Self.requirements(), port: 8443).summary.resumedSession)
        #expect(
            try !Self.connect(client, server, requirements: Self.requirements(), host: "other.test").summary
                .resumedSession)
        #expect(
            try !Self.connect(client, server, requirements: Self.requirements(maximum: .tls12)).summary.resumedSession)
        #expect(try Self.connect(client, server, requirements: Self.requirements(), port: 443).summary.resumedSession)
        #expect(client.sessions?.count == 4)
    }

    @Test func expiredSessionsAreNotOffered() throws {
        final class Clock: Sendable {
            let now = Mutex(Date())
        }
        let clock = Clock()
        let sessions = UpstreamSessionCache(lifetime: 60, clock: { clock.now.withLock { $0 } })
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.trust, sessions: sessions)
        try Self.connect(client, server, requirements: Self.requirements())
        clock.now.withLock { $0 = $0.addingTimeInterval(61) }
        #expect(try !Self.connect(client, server, requirements: Self.requirements()).summary.resumedSession)
    }

    @Test func withoutACacheEveryHandshakeIsFull() throws {
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.trust, sessions: nil)
        try Self.connect(client, server, requirements: Self.requirements())
        #expect(try !Self.connect(client, server, requirements: Self.requirements()).summary.resumedSession)
    }

    @Test func probesNeverResume() throws {
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.trust)
        try Self.connect(client, server, requirements: Self.requirements())
        let probe = try client.makeProbeConnection(version: .tls13, host: "shop.test")
        let downstream = try server.makeConnection(connectHost: "shop.test")
        let result = pumpHandshake(client: probe, server: downstream)
        #expect(result.client == nil && result.server == nil)
        #expect(!probe.resumedSession)
    }
}
