import ATSPolicy
import ATSTestSupport
import COpenSSL
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import ATSTLS

/// Tests for: Minted leaves and their cache.
@Suite("Minted leaves and their cache")
struct LeafCertificateCacheTests {
    static let authority = try! CertificateAuthority.generate(hostName: "test-machine")

    static let longName: String = {
        let label = String(repeating: "a", count: 63)
        return [label, label, label, String(repeating: "b", count: 57), "test"].joined(separator: ".")
    }()

    @Test(arguments: ["api.example.com", "192.0.2.7", "2001:db8::1", LeafCertificateCacheTests.longName])
    func everyMintedLeafPassesApplesChecklist(_ host: String) throws {
        let cache = try LeafCertificateCache(authority: Self.authority)
        let leaf = try cache.leaf(for: host)
        let details = CertificateDetails(leaf.certificate)
        if LeafCertificateCache.isIPAddress(host) {
            #expect(details.ipAddresses == [host == "2001:db8::1" ? "2001:db8:0:0:0:0:0:1" : host])
            #expect(details.dnsNames.isEmpty)
        } else {
            #expect(details.dnsNames == [host])
        }
        #expect(details.allowsServerAuth)
        #expect(X509_get_key_usage(leaf.certificate.pointer) == UInt32(KU_DIGITAL_SIGNATURE))
        #expect(details.signatureHash == .sha256)
        #expect(details.key == .ec(bits: 256))
        #expect(!details.isCA)
        #expect(details.validityDays <= 397)
        #expect(abs(details.notBefore.timeIntervalSinceNow + 3600) < 120)
        #expect(details.serialHex.count >= 30)
        // Judge the leaf exactly like an ATS host on iOS 18 would, chained to a user-installed root.
        let trust = try TrustStore(systemRoots: false, extraAnchors: [Self.authority.certificate])
        let verification = trust.verify(chain: [leaf.certificate] + leaf.chain, host: host, at: Date())
        #expect(verification.issues.isEmpty, "\(verification.issues)")
        #expect(verification.anchor == .userInstalled)
        let requirements = Policies.standard.decide(try RequestTarget(parsing: "https://ats.test/")).requirements
        let summary = HandshakeSummary(
            host: host, version: .tls13,
            cipher: NegotiatedCipher(
                code: 0x1301, ianaName: "TLS_AES_128_GCM_SHA256", openSSLName: "TLS_AES_128_GCM_SHA256",
                keyExchange: .tls13, authentication: "AuthECDSA"), group: "x25519", peerSignatureDigest: "SHA256",
            presentedChain: ([leaf.certificate] + leaf.chain).map(CertificateDetails.init),
            builtChain: verification.builtChain.map(CertificateDetails.init), verificationIssues: verification.issues,
            anchor: verification.anchor, scts: [], ctLogsAvailable: false, ocspStapleBytes: 0, alpn: "h2", time: Date())
        #expect(UpstreamJudge(requirements: requirements).violations(of: summary).isEmpty)
    }

    @Test func serialsAreRandomAnd128Bit() throws {
        let cache = try LeafCertificateCache(authority: Self.authority)
        let serials = try (0..<20).map { try cache.mint(host: "s\($0).test", now: Date()).certificate.serialHex }
        #expect(Set(serials).count == 20)
    }

    @Test func cacheHitIsTheSameLeafAndExpiryRemints() throws {
        let clock = Mutex(Date())
        let cache = try LeafCertificateCache(authority: Self.authority, clock: { clock.withLock { $0 } })
        let first = try cache.leaf(for: "Cached.Test")
        let second = try cache.leaf(for: "cached.test")
        #expect(first.certificate === second.certificate)
        clock.withLock { $0 = $0.addingTimeInterval(397 * 86400) }
        let renewed = try cache.leaf(for: "cached.test")
        #expect(renewed.certificate !== first.certificate)
    }

    @Test func cacheIsBounded() throws {
        let cache = try LeafCertificateCache(authority: Self.authority, capacity: 3)
        for index in 0..<10 { _ = try cache.leaf(for: "host\(index).test") }
        #expect(cache.count == 3)
    }

    @Test func cacheIsThreadSafe() throws {
        let cache = try LeafCertificateCache(authority: Self.authority)
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            if (try? cache.leaf(for: "host\(index % 8).test")) == nil { failures.add(1, ordering: .relaxed) }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(cache.count == 8)
    }

    @Test func mintAndHitTimes() throws {
        let cache = try LeafCertificateCache(authority: Self.authority)
        let count = 200
        let start = DispatchTime.now().uptimeNanoseconds
        for index in 0..<count { _ = try cache.mint(host: "m\(index).test", now: Date()) }
        let mint = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count) / 1e6
        _ = try cache.leaf(for: "hit.test")
        let hits = 100_000
        let hitStart = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<hits { _ = try cache.leaf(for: "hit.test") }
        let hit = Double(DispatchTime.now().uptimeNanoseconds - hitStart) / Double(hits) / 1e3
        print("MEASURE mint \(mint) ms per leaf, cache hit \(hit) µs")
        // No timing assertion: timings belong to the benchmark, not to tests on a shared machine.
        // What must hold is that a hit returns the same leaf instead of minting a new one.
        let again = try cache.leaf(for: "hit.test")
        #expect(again.certificate.derBytes == (try cache.leaf(for: "hit.test")).certificate.derBytes)
    }
}
