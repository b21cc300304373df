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
        #expect(details.validityDays < 200)
        #expect(abs(details.notBefore.timeIntervalSinceNow + 86400) < 120)
        // serverAuth and nothing else in the extended key usage.
        #expect(X509_get_extended_key_usage(leaf.certificate.pointer) == UInt32(XKU_SSL_SERVER))
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

    @Test func validityStaysUnder200DaysIncludingBackdating() throws {
        let cache = try LeafCertificateCache(authority: Self.authority)
        let now = Date(timeIntervalSince1970: TimeInterval(Int(Date().timeIntervalSince1970)))
        let minted = try cache.mint(host: "dates.test", now: now)
        // Read the dates back from the DER, not from the value the minter returned.
        let details = CertificateDetails(try Certificate(der: minted.certificate.derBytes))
        #expect(details.notBefore == now.addingTimeInterval(-86400))
        #expect(details.notAfter == now.addingTimeInterval(198 * 86400))
        #expect(details.notAfter.timeIntervalSince(details.notBefore) == 199 * 86400)
        #expect(AppleCTPolicy.lifetimeDays(notBefore: details.notBefore, notAfter: details.notAfter) == 200)
        #expect(details.notAfter.timeIntervalSince(details.notBefore) + 1 < 200 * 86400)
        #expect(details.notAfter <= Self.authority.certificate.notAfter)
        #expect(details.notBefore >= Self.authority.certificate.notBefore)
        // A longer request is clamped to the maximum.
        let clamped = try LeafCertificateCache(authority: Self.authority, validityDays: 397).mint(
            host: "x.test", now: now)
        #expect(clamped.notAfter == now.addingTimeInterval(198 * 86400))
    }

    @Test func cachedLeafIsReplacedSevenDaysBeforeItEnds() throws {
        let start = Date()
        let clock = Mutex(start)
        let cache = try LeafCertificateCache(authority: Self.authority, clock: { clock.withLock { $0 } })
        let first = try cache.leaf(for: "renew.test")
        clock.withLock { $0 = start.addingTimeInterval(190 * 86400) }  // 8 days left: kept
        #expect(try cache.leaf(for: "renew.test").certificate === first.certificate)
        clock.withLock { $0 = start.addingTimeInterval(191 * 86400 + 60) }  // under 7 days left: re-minted
        let renewed = try cache.leaf(for: "renew.test")
        #expect(renewed.certificate !== first.certificate)
        #expect(renewed.notAfter > first.notAfter)
        #expect(try cache.leaf(for: "renew.test").certificate === renewed.certificate)
    }

    @Test func leavesNeverOutliveTheCA() throws {
        let now = Date()
        let shortCA = try Self.caValid(days: 10, now: now)
        let clock = Mutex(now)
        let cache = try LeafCertificateCache(authority: shortCA, clock: { clock.withLock { $0 } })
        let leaf = try cache.leaf(for: "short.test")
        #expect(leaf.notAfter == shortCA.certificate.notAfter)
        // Within the last 7 days a new leaf could not last longer: the cached one is kept, not re-minted per request.
        clock.withLock { $0 = now.addingTimeInterval(5 * 86400) }
        #expect(try cache.leaf(for: "short.test").certificate === leaf.certificate)
        // Once it has expired (with the CA), it is replaced.
        clock.withLock { $0 = now.addingTimeInterval(11 * 86400) }
        #expect(try cache.leaf(for: "short.test").certificate !== leaf.certificate)
    }

    /// A CA that ends `days` after `now`.
    static func caValid(days: Double, now: Date) throws -> CertificateAuthority {
        let key = try PrivateKey.generate(.p256)
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-86400 * 2), notAfter: now.addingTimeInterval(days * 86400))
        spec.commonName = "short CA"
        spec.isCA = true
        spec.keyUsage = ["keyCertSign", "cRLSign"]
        spec.extendedKeyUsage = nil
        let certificate = try CertificateMinter.mint(spec, subjectKey: key, issuer: nil, issuerKey: key)
        return CertificateAuthority(certificate: certificate, privateKey: key, certificatePath: nil, keyPath: nil)
    }

    @Test func caNearExpiryIsWarnedAbout() throws {
        let now = Date()
        let warning = try #require(
            CertificateAuthority.expiryWarning(try Self.caValid(days: 10, now: now).certificate, now: now))
        #expect(warning.contains("expires in 9 days") || warning.contains("expires in 10 days"), "\(warning)")
        #expect(CertificateAuthority.expiryWarning(Self.authority.certificate, now: now) == nil)
        let expired = try #require(
            CertificateAuthority.expiryWarning(
                try Self.caValid(days: 10, now: now).certificate, now: now.addingTimeInterval(11 * 86400)))
        #expect(expired.contains("expired"))
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
