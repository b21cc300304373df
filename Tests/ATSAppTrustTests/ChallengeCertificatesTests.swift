import ATSPolicy
import ATSTestSupport
import COpenSSL
import Foundation
import Synchronization
import Testing

@testable import ATSAppTrust
@testable import ATSTLS

/// Tests for: the certificates each challenge kind mints, read back through `Certificate`.
@Suite("Challenge certificates")
struct ChallengeCertificatesTests {
    static let authority = try! CertificateAuthority.generate(hostName: "challenge-tests")
    static let certificates = try! ChallengeCertificates(authority: authority)
    static let host = "api.challenge.test"

    @Test(arguments: ChallengeKind.allCases)
    func everyKindDiffersFromANormalLeafInItsOwnPropertyOnly(_ kind: ChallengeKind) throws {
        let now = Date()
        let leaf = try Self.certificates.leaf(for: Self.host, kind: kind)
        let details = CertificateDetails(leaf.certificate)
        #expect(leaf.certificate.matches(leaf.key))
        #expect(details.allowsServerAuth)
        #expect(!details.isCA)
        #expect(details.serialHex.count >= 30)

        // The name.
        switch kind {
        case .wrongHost:
            #expect(details.dnsNames == [ChallengeKind.wrongHostName])
            #expect(details.commonName == ChallengeKind.wrongHostName)
        case .noSAN:
            #expect(details.dnsNames.isEmpty)
            #expect(details.ipAddresses.isEmpty)
            #expect(leaf.certificate.subjectAltNames.dns.isEmpty)
            #expect(details.commonName == Self.host)
        case .selfSigned, .untrustedCA, .expired, .notYetValid, .sha1Signature, .rsa1024, .overlongValidity,
            .tls10Only, .tls11Only, .staticRSAOnly:
            #expect(details.dnsNames == [Self.host])
            #expect(details.commonName == Self.host)
        }

        // The issuer and the chain served.
        switch kind {
        case .selfSigned:
            #expect(details.isSelfSigned)
            #expect(details.issuer == details.subject)
            #expect(leaf.chain.isEmpty)
        case .untrustedCA:
            let untrusted = Self.certificates.untrustedAuthority.certificate
            #expect(details.issuer == untrusted.subjectText)
            #expect(details.issuer != Self.authority.certificate.subjectText)
            #expect(leaf.chain.map(\.sha256Fingerprint) == [untrusted.sha256Fingerprint])
            #expect(untrusted.isCA && untrusted.isSelfSigned)
        case .wrongHost, .expired, .notYetValid, .sha1Signature, .rsa1024, .noSAN, .overlongValidity, .tls10Only,
            .tls11Only, .staticRSAOnly:
            #expect(!details.isSelfSigned)
            #expect(details.issuer == Self.authority.certificate.subjectText)
            #expect(leaf.chain.map(\.sha256Fingerprint) == [Self.authority.certificate.sha256Fingerprint])
        }

        // The key and the signature hash.
        switch kind {
        case .rsa1024: #expect(details.key == .rsa(bits: 1024))
        case .tls10Only, .tls11Only, .staticRSAOnly: #expect(details.key == .rsa(bits: 2048))
        case .wrongHost, .selfSigned, .untrustedCA, .expired, .notYetValid, .sha1Signature, .noSAN, .overlongValidity:
            #expect(details.key == .ec(bits: 256))
        }
        #expect(details.signatureHash == (kind == .sha1Signature ? .sha1 : .sha256))
        if kind == .sha1Signature { #expect(details.signatureAlgorithm.contains("SHA1")) }

        // The validity.
        switch kind {
        case .expired:
            #expect(details.notAfter < now.addingTimeInterval(-86000))
            #expect(details.notBefore < details.notAfter)
        case .notYetValid:
            #expect(details.notBefore > now.addingTimeInterval(86400))
            #expect(details.notAfter > details.notBefore)
        case .overlongValidity:
            #expect(details.validityDays > 825 + 1)
            #expect(details.notBefore <= now && details.notAfter > now)
        case .wrongHost, .selfSigned, .untrustedCA, .sha1Signature, .rsa1024, .noSAN, .tls10Only, .tls11Only,
            .staticRSAOnly:
            #expect(details.validityDays <= 397)
            #expect(details.notBefore <= now && details.notAfter > now)
        }
    }

    /// OpenSSL's chain check with the proxy CA as the only anchor and CN never consulted (as on iOS 13+)
    /// finds what a standard X.509 check can; SHA-1, RSA-1024 and the 825-day cap are Apple's rules
    /// on top (the end-to-end suite judges those with the project's ATS judge).
    @Test(arguments: ChallengeKind.allCases)
    func theChainCheckFindsWhatX509Finds(_ kind: ChallengeKind) throws {
        let leaf = try Self.certificates.leaf(for: Self.host, kind: kind)
        let trust = try TrustStore(systemRoots: false, extraAnchors: [Self.authority.certificate])
        let codes = trust.verify(chain: [leaf.certificate] + leaf.chain, host: Self.host, at: Date()).issues.map(\.code)
        switch kind {
        case .wrongHost, .noSAN: #expect(codes == [X509_V_ERR_HOSTNAME_MISMATCH])
        case .selfSigned: #expect(codes.contains(X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT))
        case .untrustedCA: #expect(codes.contains(X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN))
        case .expired: #expect(codes == [X509_V_ERR_CERT_HAS_EXPIRED])
        case .notYetValid: #expect(codes == [X509_V_ERR_CERT_NOT_YET_VALID])
        case .sha1Signature, .rsa1024, .overlongValidity, .tls10Only, .tls11Only, .staticRSAOnly:
            #expect(codes.isEmpty, "\(codes)")
        }
    }

    @Test func leavesAreCachedPerHostAndKind() throws {
        let certificates = try ChallengeCertificates(authority: Self.authority)
        let first = try certificates.leaf(for: "a.test", kind: .expired)
        #expect(try certificates.leaf(for: "A.TEST.", kind: .expired).certificate === first.certificate)
        #expect(try certificates.leaf(for: "a.test", kind: .noSAN).certificate !== first.certificate)
        #expect(try certificates.leaf(for: "b.test", kind: .expired).certificate !== first.certificate)
        #expect(certificates.count == 3)
    }

    @Test func theCacheEvictsTheOldestBeyondItsCapacity() throws {
        let certificates = try ChallengeCertificates(authority: Self.authority, capacity: 2)
        let first = try certificates.leaf(for: "a.test", kind: .wrongHost)
        _ = try certificates.leaf(for: "b.test", kind: .wrongHost)
        _ = try certificates.leaf(for: "c.test", kind: .wrongHost)
        #expect(certificates.count == 2)
        #expect(try certificates.leaf(for: "a.test", kind: .wrongHost).certificate !== first.certificate)
    }

    @Test func dateRelativeKindsAreMintedAgainSoTheyKeepWhatTheyClaim() throws {
        let now = Mutex(Date())
        let certificates = try ChallengeCertificates(authority: Self.authority, clock: { now.withLock { $0 } })
        let early = try certificates.leaf(for: "a.test", kind: .notYetValid)
        now.withLock { $0 = $0.addingTimeInterval(ChallengeCertificates.maximumAge / 2) }
        #expect(try certificates.leaf(for: "a.test", kind: .notYetValid).certificate === early.certificate)
        // A week later the first leaf would be valid; the cache serves a fresh one.
        now.withLock { $0 = $0.addingTimeInterval(7 * 86400) }
        let later = try certificates.leaf(for: "a.test", kind: .notYetValid)
        #expect(later.certificate !== early.certificate)
        #expect(later.certificate.notBefore > now.withLock { $0 }.addingTimeInterval(86400))
    }

    @Test(arguments: ["192.0.2.7", "2001:db8::1"])
    func anIPAddressHostGetsAnIPSubjectAltName(_ host: String) throws {
        let leaf = try Self.certificates.leaf(for: host, kind: .expired)
        #expect(leaf.certificate.subjectAltNames.dns.isEmpty)
        #expect(leaf.certificate.subjectAltNames.ip == [host == "2001:db8::1" ? "2001:db8:0:0:0:0:0:1" : host])
        let noSAN = try Self.certificates.leaf(for: host, kind: .noSAN)
        #expect(noSAN.certificate.subjectAltNames.ip.isEmpty)
        #expect(noSAN.certificate.commonName == host)
    }

    /// `ats-proxy ca --key-type rsa` makes an RSA-3072 CA: every kind still mints, with the RSA
    /// signature its hash says, and is served.
    @Test func anRSAProxyCASignsEveryKind() throws {
        let authority = try CertificateAuthority.generate(keyType: .rsa, hostName: "challenge-rsa")
        let contexts = try ChallengeTLSContexts(certificates: try ChallengeCertificates(authority: authority))
        for kind in ChallengeKind.allCases {
            let leaf = try contexts.certificates.leaf(for: Self.host, kind: kind)
            let expected: String
            switch kind {
            case .selfSigned: expected = "ecdsa-with-SHA256"
            case .untrustedCA: expected = "ecdsa-with-SHA256"
            case .sha1Signature: expected = "sha1WithRSAEncryption"
            case .wrongHost, .expired, .notYetValid, .rsa1024, .noSAN, .overlongValidity, .tls10Only, .tls11Only,
                .staticRSAOnly:
                expected = "sha256WithRSAEncryption"
            }
            #expect(leaf.certificate.signatureAlgorithmName == expected, "\(kind)")
            let client = try TLSContext(role: .client)
            client.setSecurityLevel(0)
            try client.setVersions(minimum: .tls10, maximum: .tls13)
            try client.setCipherList("ALL:@SECLEVEL=0")
            let engine = try TLSConnection(context: client, serverName: Self.host)
            let result = pumpHandshake(
                client: engine, server: try contexts.makeConnection(connectHost: Self.host, kind: kind))
            #expect(result.client == nil && result.server == nil, "\(kind): \(String(describing: result))")
            #expect(engine.peerCertificates.first?.sha256Fingerprint == leaf.certificate.sha256Fingerprint)
        }
    }

    @Test func nothingIsSharedWithTheProxysNormalLeaves() throws {
        let normal = try LeafCertificateCache(authority: Self.authority).leaf(for: Self.host)
        for kind in ChallengeKind.allCases {
            let leaf = try Self.certificates.leaf(for: Self.host, kind: kind)
            #expect(leaf.certificate.sha256Fingerprint != normal.certificate.sha256Fingerprint)
            #expect(leaf.certificate.spkiSHA256 != normal.certificate.spkiSHA256, "\(kind)")
        }
    }
}
