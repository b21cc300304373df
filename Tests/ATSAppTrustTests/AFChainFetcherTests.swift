import ATSAppTrust
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// The chain diagnose judges: fetched from a loopback TLS server whatever its trust, at the newest version it
/// accepts; and the chain the proxy's CA mints for a host.
@Suite("Fetching the real chain and minting the interception chain")
struct AFChainFetcherTests {
    @Test func fetchesAnUntrustedChainAsPresented() throws {
        // A self-signed leaf: the fetch must not verify anything.
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: AFChains.selfSignedLeaf, key: AFChains.serverKey, chain: [])))
        defer { server.stop() }
        let result = AFChainFetcher.presentedChain(
            host: AFChains.host, client: TestPKI.client(), transport: server.transport)
        let chain = try result.get()
        #expect(chain.map(\.derBytes) == [AFChains.selfSignedLeaf.derBytes])
    }

    @Test func fallsBackToOlderVersions() throws {
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: AFChains.leaf, minimum: .tls10, maximum: .tls10)))
        defer { server.stop() }
        let chain = try AFChainFetcher.presentedChain(
            host: AFChains.host, client: TestPKI.client(), transport: server.transport
        ).get()
        #expect(chain.map(\.derBytes) == AFChains.validChain.map(\.derBytes))
        // The server counts its handshake when its own pump returns, which may be just after the client's did.
        let deadline = Date().addingTimeInterval(10)
        while server.handshakes.load(ordering: .relaxed) == 0 && Date() < deadline { usleep(10_000) }
        #expect(server.handshakes.load(ordering: .relaxed) >= 1)
    }

    @Test func reportsAServerThatNeverCompletesAHandshake() throws {
        let server = try TestServer(.closeImmediately)
        defer { server.stop() }
        let result = AFChainFetcher.presentedChain(
            host: AFChains.host, client: TestPKI.client(), transport: server.transport)
        guard case .failure(let unavailable) = result else {
            Issue.record("a server that closes at once yielded a chain")
            return
        }
        #expect(unavailable.reason.hasPrefix("no handshake with \(AFChains.host) completed"), "\(unavailable)")
    }

    @Test func interceptionChainIsTheProxysLeafAndCA() throws {
        let authority = try CertificateAuthority.generate(hostName: "af-test")
        let chain = try AFInterceptionChain.mint(host: "API.Example.com", authority: authority)
        #expect(chain.count == 2)
        #expect(chain[0].subjectAltNames.dns == ["api.example.com"])
        #expect(chain[1].derBytes == authority.certificate.derBytes)
        // The device trusts the proxy's CA while it is intercepted: the default policy accepts the chain.
        let trust = try AFInterceptionChain.deviceTrust(extraAnchorFiles: [], authority: authority, systemRoots: false)
        let verdict = AFTrustEvaluator(systemTrust: trust).evaluate(
            .default, chain: chain, domain: "api.example.com", at: Date())
        #expect(verdict == .accepted(.trustedChain(nameChecked: true)))
    }
}
