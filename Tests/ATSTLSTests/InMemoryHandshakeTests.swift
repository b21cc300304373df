import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSTLS

/// Tests for: Engines pumped back to back in memory.
@Suite("Engines pumped back to back in memory")
struct InMemoryHandshakeTests {
    static let authority = try! CertificateAuthority.generate(hostName: "test-machine")
    static let leaves = try! LeafCertificateCache(authority: authority)
    static let proxyTrust = try! TrustStore(systemRoots: false, extraAnchors: [authority.certificate])

    static func requirements(_ url: String = "https://shop.test/", policy: PolicyContext = Policies.standard)
        -> TLSRequirements
    {
        policy.decide(try! RequestTarget(parsing: url)).requirements
    }

    @Test func clientFacingContextMintsPerSNIAndSelectsALPN() throws {
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.proxyTrust)
        let upstream = try client.makeConnection(requirements: Self.requirements(), host: "shop.test")
        let downstream = try server.makeConnection(connectHost: "fallback.test")
        let result = pumpHandshake(client: upstream, server: downstream)
        #expect(result.client == nil && result.server == nil)
        #expect(downstream.servedName == "shop.test")
        #expect(upstream.negotiatedALPN == "h2")
        let summary = client.summarize(upstream, host: "shop.test", time: Date())
        #expect(summary.leaf?.dnsNames == ["shop.test"])
        #expect(summary.version == .tls13)
        #expect(summary.verificationIssues.isEmpty)
        #expect(summary.anchor == .userInstalled)
        let verdict = UpstreamVerdict.judging(
            summary, requirements: Self.requirements(), url: "https://shop.test/", host: "shop.test")
        #expect(verdict.outcome == .allowed, "\(verdict.rule)")
    }

    @Test func withoutSNIServesTheConnectHost() throws {
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.proxyTrust)
        // An IP literal sends no SNI, so the server falls back to the CONNECT host.
        let upstream = try client.makeConnection(requirements: Self.requirements(), host: "192.0.2.10")
        let downstream = try server.makeConnection(connectHost: "192.0.2.10")
        let result = pumpHandshake(client: upstream, server: downstream)
        #expect(result.client == nil && result.server == nil)
        let summary = client.summarize(upstream, host: "192.0.2.10", time: Date())
        #expect(summary.leaf?.ipAddresses == ["192.0.2.10"])
        #expect(summary.verificationIssues.isEmpty)
    }

    @Test func alpnHookIsTheCallersChoice() throws {
        let server = try ServerTLSContext(
            leaves: Self.leaves, alpn: { offered in offered.contains("http/1.1") ? "http/1.1" : nil })
        let client = UpstreamTLSClient(trust: Self.proxyTrust)
        let upstream = try client.makeConnection(requirements: Self.requirements(), host: "shop.test")
        let downstream = try server.makeConnection(connectHost: "shop.test")
        pumpHandshake(client: upstream, server: downstream)
        #expect(upstream.negotiatedALPN == "http/1.1")
        #expect(downstream.negotiatedALPN == "http/1.1")
    }

    @Test func applicationDataFlowsBothWays() throws {
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.proxyTrust)
        let upstream = try client.makeConnection(requirements: Self.requirements(), host: "shop.test")
        let downstream = try server.makeConnection(connectHost: "shop.test")
        pumpHandshake(client: upstream, server: downstream)
        #expect(upstream.write(Array("GET / HTTP/1.1\r\n\r\n".utf8)) == 18)
        downstream.receive(upstream.takeOutbound())
        guard case .data(let request) = downstream.read() else {
            Issue.record("no request")
            return
        }
        #expect(String(decoding: request, as: UTF8.self) == "GET / HTTP/1.1\r\n\r\n")
        downstream.write(Array("HTTP/1.1 204 No Content\r\n\r\n".utf8))
        downstream.shutdown()
        upstream.receive(downstream.takeOutbound())
        guard case .data(let response) = upstream.read() else {
            Issue.record("no response")
            return
        }
        #expect(String(decoding: response, as: UTF8.self).hasPrefix("HTTP/1.1 204"))
        #expect(upstream.read() == .closed)
    }

    @Test func clientFacingContextRefusesTLS11Clients() throws {
        let server = try ServerTLSContext(leaves: Self.leaves)
        let client = UpstreamTLSClient(trust: Self.proxyTrust)
        var old = Self.requirements()
        old.minimumVersion = .tls10
        old.maximumVersion = .tls11
        let upstream = try client.makeConnection(requirements: old, host: "shop.test")
        let downstream = try server.makeConnection(connectHost: "shop.test")
        let result = pumpHandshake(client: upstream, server: downstream)
        #expect(result.server?.reason == .noCommonVersion)
        #expect(result.client?.reason == .receivedAlert(70))
    }

    @Test func versionMismatchIsClassifiedAsProtocolVersion() throws {
        let context = TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls11, maximum: .tls11)
        let client = TestPKI.client()
        let upstream = try client.makeConnection(requirements: Self.requirements("https://ats.test/"), host: "ats.test")
        let downstream = try TLSConnection(context: context, serverName: nil)
        let result = pumpHandshake(client: upstream, server: downstream)
        let verdict = UpstreamVerdict.failed(
            .handshake(result.client!), requirements: Self.requirements("https://ats.test/"), url: "https://ats.test/",
            host: "ats.test")
        #expect(verdict.error == .secureConnectionFailed)
        #expect(verdict.streamPair == "[3:-9836]")
    }

    @Test func staticRSAOnlyServerFailsTheForwardSecretOffer() throws {
        let context = TestPKI.serverContext(
            leaf: TestPKI.leaf(TestPKI.leafSpec(), key: TestPKI.rsa2048), key: TestPKI.rsa2048, maximum: .tls12,
            ciphers: "AES128-GCM-SHA256")
        let client = TestPKI.client()
        let upstream = try client.makeConnection(requirements: Self.requirements("https://ats.test/"), host: "ats.test")
        let downstream = try TLSConnection(context: context, serverName: nil)
        let result = pumpHandshake(client: upstream, server: downstream)
        #expect(result.server?.reason == .noCommonCipher)
        #expect(result.client?.reason == .receivedAlert(40))
    }

    @Test func cipherAndCertificateDetailsAreReported() throws {
        let context = TestPKI.serverContext(
            leaf: TestPKI.leaf(TestPKI.leafSpec(), key: TestPKI.rsa2048), key: TestPKI.rsa2048, maximum: .tls12,
            ciphers: "ECDHE-RSA-AES128-GCM-SHA256")
        let client = TestPKI.client()
        let requirements = Self.requirements("https://ats.test/")
        let upstream = try client.makeConnection(requirements: requirements, host: "ats.test")
        let downstream = try TLSConnection(context: context, serverName: nil)
        pumpHandshake(client: upstream, server: downstream)
        let summary = client.summarize(upstream, host: "ats.test", time: Date())
        #expect(summary.version == .tls12)
        #expect(summary.cipher.ianaName == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
        #expect(summary.cipher.code == 0xC02F)
        #expect(summary.cipher.keyExchange == .ecdhe)
        #expect(summary.forwardSecret)
        #expect(summary.group == "x25519")
        #expect(summary.presentedChain.count == 2)
        #expect(summary.builtChain.count == 3)
        #expect(summary.leaf?.key == .rsa(bits: 2048))
        #expect(summary.leaf?.signatureHash == .sha256)
        #expect(summary.leaf?.allowsServerAuth == true)
        #expect(summary.builtChain.last?.isSelfSigned == true)
        #expect(summary.leaf?.spkiSHA256 == TestPKI.leaf(TestPKI.leafSpec(), key: TestPKI.rsa2048).spkiSHA256)
        #expect(
            UpstreamVerdict.judging(summary, requirements: requirements, url: "https://ats.test/", host: "ats.test")
                .outcome == .allowed)
    }
}
