import ATSPolicy
import ATSTLS
import Foundation

/// One loopback fixture of the test matrix: how the server is built, what the default
/// policy says, what NSAllowsArbitraryLoads (default trust, no ATS) says, and which policy lets it
/// through.
public enum Fixture: String, CaseIterable, Sendable {
    case tls10Only, tls11Only, tls12Only, tls13Only
    case staticRSAOnly, dheOnly, ecdheCBCSHA384Only
    case rsa1024Leaf, sha1Leaf, sha224Leaf
    case expired, notYetValid, selfSigned, unknownRoot, hostnameMismatch, cnWithoutSAN, noEKU, validity900Days
    case missingIntermediate

    public func makeContext() -> TLSContext {
        let now = TestPKI.now
        switch self {
        case .tls10Only:
            return TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls10, maximum: .tls10)
        case .tls11Only:
            return TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls11, maximum: .tls11)
        case .tls12Only:
            return TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls12, maximum: .tls12)
        case .tls13Only:
            return TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls13, maximum: .tls13)
        case .staticRSAOnly:
            return TestPKI.serverContext(
                leaf: TestPKI.leaf(TestPKI.leafSpec(), key: TestPKI.rsa2048), key: TestPKI.rsa2048, maximum: .tls12,
                ciphers: "AES128-GCM-SHA256:AES256-SHA@SECLEVEL=0")
        case .dheOnly:
            return TestPKI.serverContext(
                leaf: TestPKI.leaf(TestPKI.leafSpec(), key: TestPKI.rsa2048), key: TestPKI.rsa2048, maximum: .tls12,
                ciphers: "DHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0")
        case .ecdheCBCSHA384Only:
            return TestPKI.serverContext(
                leaf: TestPKI.leaf(TestPKI.leafSpec()), maximum: .tls12,
                ciphers: "ECDHE-ECDSA-AES256-SHA384:@SECLEVEL=0")
        case .rsa1024Leaf:
            return TestPKI.serverContext(
                leaf: TestPKI.leaf(TestPKI.leafSpec(), key: TestPKI.rsa1024), key: TestPKI.rsa1024)
        case .sha1Leaf:
            var spec = TestPKI.leafSpec()
            spec.signatureHash = .sha1
            return TestPKI.serverContext(leaf: TestPKI.leaf(spec))
        case .sha224Leaf:
            var spec = TestPKI.leafSpec()
            spec.signatureHash = .sha224
            return TestPKI.serverContext(leaf: TestPKI.leaf(spec))
        case .expired:
            var spec = TestPKI.leafSpec()
            spec.notBefore = now.addingTimeInterval(-30 * 86400)
            spec.notAfter = now.addingTimeInterval(-86400)
            return TestPKI.serverContext(leaf: TestPKI.leaf(spec))
        case .notYetValid:
            var spec = TestPKI.leafSpec()
            spec.notBefore = now.addingTimeInterval(86400)
            spec.notAfter = now.addingTimeInterval(30 * 86400)
            return TestPKI.serverContext(leaf: TestPKI.leaf(spec))
        case .selfSigned:
            let leaf = try! CertificateMinter.mint(
                TestPKI.leafSpec(), subjectKey: TestPKI.ecKey, issuer: nil, issuerKey: TestPKI.ecKey)
            return TestPKI.serverContext(leaf: leaf, chain: [])
        case .unknownRoot:
            let leaf = TestPKI.leaf(TestPKI.leafSpec(), issuer: TestPKI.otherRoot, issuerKey: TestPKI.otherRootKey)
            return TestPKI.serverContext(leaf: leaf, chain: [])
        case .hostnameMismatch:
            return TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec("other.test")))
        case .cnWithoutSAN:
            var spec = TestPKI.leafSpec()
            spec.dnsNames = []
            return TestPKI.serverContext(leaf: TestPKI.leaf(spec))
        case .noEKU:
            var spec = TestPKI.leafSpec()
            spec.extendedKeyUsage = nil
            return TestPKI.serverContext(leaf: TestPKI.leaf(spec))
        case .validity900Days:
            var spec = TestPKI.leafSpec()
            spec.notAfter = spec.notBefore.addingTimeInterval(900 * 86400)
            return TestPKI.serverContext(leaf: TestPKI.leaf(spec))
        case .missingIntermediate:
            return TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), chain: [])
        }
    }

    /// Under the empty ATS dictionary on iOS 18.
    public var underDefaultPolicy: Expectation {
        switch self {
        case .tls10Only, .tls11Only: .blocked(.secureConnectionFailed, -9836)
        case .tls12Only, .tls13Only: .allowed
        case .staticRSAOnly, .dheOnly, .ecdheCBCSHA384Only: .blocked(.secureConnectionFailed, -9824)
        case .rsa1024Leaf, .sha1Leaf, .sha224Leaf, .expired, .notYetValid, .selfSigned, .unknownRoot, .hostnameMismatch,
            .cnWithoutSAN, .noEKU, .validity900Days, .missingIntermediate:
            .blocked(.secureConnectionFailed, -9802)
        }
    }

    /// Under NSAllowsArbitraryLoads = YES: ATS off, default trust evaluation still runs.
    public var underArbitraryLoads: Expectation {
        switch self {
        case .tls10Only, .tls11Only, .tls12Only, .tls13Only, .staticRSAOnly, .sha224Leaf: .allowed
        case .dheOnly, .ecdheCBCSHA384Only: .blocked(.secureConnectionFailed, -9824)
        case .rsa1024Leaf, .sha1Leaf, .noEKU, .validity900Days: .blocked(.serverCertificateUntrusted, -9807)
        case .expired: .blocked(.serverCertificateHasBadDate, -9814)
        case .notYetValid: .blocked(.serverCertificateHasBadDate, -9815)
        case .selfSigned, .unknownRoot, .missingIntermediate: .blocked(.serverCertificateUntrusted, -9813)
        case .hostnameMismatch, .cnWithoutSAN: .blocked(.serverCertificateUntrusted, -9843)
        }
    }

    /// The policy that should change the outcome, and the outcome it gives.
    public var relaxation: (policy: PolicyContext, expected: Expectation) {
        switch self {
        case .tls10Only: (Policies.exception(minimumTLS: .tls10), .allowed)
        case .tls11Only: (Policies.exception(minimumTLS: .tls11), .allowed)
        case .tls12Only: (Policies.exception(minimumTLS: .tls13), .blocked(.secureConnectionFailed, -9836))
        case .tls13Only: (Policies.exception(minimumTLS: .tls13), .allowed)
        case .staticRSAOnly: (Policies.exception(forwardSecrecy: false), .allowed)
        case .dheOnly: (Policies.exception(forwardSecrecy: false), .blocked(.secureConnectionFailed, -9824))
        case .ecdheCBCSHA384Only: (Policies.make(platform: "ios:15.0"), .allowed)
        case .sha224Leaf: (Policies.arbitraryLoads, .allowed)
        case .cnWithoutSAN, .noEKU, .validity900Days: (Policies.make(platform: "ios:12.0"), .allowed)
        case .rsa1024Leaf, .sha1Leaf, .expired, .notYetValid, .selfSigned, .unknownRoot, .hostnameMismatch,
            .missingIntermediate:
            (Policies.exception(insecureHTTP: true, trustOverride: true), .overridden)
        }
    }
}
