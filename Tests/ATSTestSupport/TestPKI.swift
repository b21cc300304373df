import ATSPolicy
import ATSTLS
import Foundation

/// The certificates of the tests, minted in-process; nothing is committed and nothing outlives the
/// run. Two uses share it:
/// - in memory (the static members): one private root (the "user-installed" proxy root of the
///   tests), an intermediate, shared keys, and helpers for every broken leaf the TLS matrix needs;
/// - on disk (an instance): a CA of its own and the leaves it signs, written as PEM files into a
///   `TemporaryDirectory`, for tests that hand certificates to child processes (ats-proxy, origins).
public struct TestPKI {
    public static let host = "ats.test"
    public static let now = Date()

    public static let rootKey = try! PrivateKey.generate(.p256)
    public static let root: Certificate = {
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-86400), notAfter: now.addingTimeInterval(3650 * 86400))
        spec.commonName = "ats-proxy Test Root"
        spec.organization = "ats-proxy tests"
        spec.isCA = true
        spec.keyUsage = ["keyCertSign", "cRLSign"]
        spec.extendedKeyUsage = nil
        return try! CertificateMinter.mint(spec, subjectKey: rootKey, issuer: nil, issuerKey: rootKey)
    }()

    public static let intermediateKey = try! PrivateKey.generate(.p256)
    public static let intermediate: Certificate = {
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-86400), notAfter: now.addingTimeInterval(1800 * 86400))
        spec.commonName = "ats-proxy Test Intermediate"
        spec.isCA = true
        spec.keyUsage = ["keyCertSign", "cRLSign"]
        spec.extendedKeyUsage = nil
        return try! CertificateMinter.mint(spec, subjectKey: intermediateKey, issuer: root, issuerKey: rootKey)
    }()

    /// A root nobody trusts, with its own intermediate.
    public static let otherRootKey = try! PrivateKey.generate(.p256)
    public static let otherRoot: Certificate = {
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-86400), notAfter: now.addingTimeInterval(3650 * 86400))
        spec.commonName = "Unknown Test Root"
        spec.isCA = true
        spec.keyUsage = ["keyCertSign", "cRLSign"]
        spec.extendedKeyUsage = nil
        return try! CertificateMinter.mint(spec, subjectKey: otherRootKey, issuer: nil, issuerKey: otherRootKey)
    }()

    public static let ecKey = try! PrivateKey.generate(.p256)
    public static let rsa2048 = try! PrivateKey.generate(.rsa(bits: 2048))
    public static let rsa1024 = try! PrivateKey.generate(.rsa(bits: 1024))

    /// The trust store of the tests: the test root only (no system bundle, for speed and isolation).
    public static let trust = try! TrustStore(systemRoots: false, extraAnchors: [root])

    /// A compliant leaf spec for `host`: SAN, EKU serverAuth, 397 days, SHA-256.
    public static func leafSpec(_ name: String = host) -> CertificateSpec {
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(396 * 86400))
        spec.commonName = name
        spec.dnsNames = [name]
        return spec
    }

    /// Mints a leaf signed by the intermediate (or `issuer`).
    public static func leaf(
        _ spec: CertificateSpec, key: PrivateKey = ecKey, issuer: Certificate = intermediate,
        issuerKey: PrivateKey = intermediateKey
    ) -> Certificate {
        try! CertificateMinter.mint(spec, subjectKey: key, issuer: issuer, issuerKey: issuerKey)
    }

    /// A fixture server context: level 0 (pitfall 14), the given versions and suites, the chain.
    public static func serverContext(
        leaf: Certificate, key: PrivateKey = ecKey, chain: [Certificate] = [intermediate],
        minimum: TLSProtocolVersion = .tls10, maximum: TLSProtocolVersion = .tls13, ciphers: String? = nil,
        tls13Suites: String? = nil
    ) -> TLSContext {
        let context = try! TLSContext(role: .server)
        context.setSecurityLevel(0)
        try! context.setVersions(minimum: minimum, maximum: maximum)
        try! context.setCipherList(ciphers ?? "ALL:@SECLEVEL=0")
        if let tls13Suites { try! context.setTLS13Suites(tls13Suites) }
        context.enableAutomaticDHParameters()
        context.preferServerCiphers()
        try! context.useCertificate(leaf, key: key, chain: chain)
        context.setALPNSelector(ServerTLSContext.preferring(["h2", "http/1.1"]))
        return context
    }

    /// The upstream client of the tests (trusting only the test root).
    public static func client(ctLogs: CTLogStore? = nil) -> UpstreamTLSClient {
        UpstreamTLSClient(trust: trust, ctLogs: ctLogs)
    }

    // MARK: - A CA on disk

    public let authority: CertificateAuthority
    public let caPath: String
    public let directory: TemporaryDirectory

    public init(name: String, directory: TemporaryDirectory) throws {
        self.directory = directory
        authority = try CertificateAuthority.generate(hostName: name)
        caPath = directory.file("\(name)-ca.pem")
        try Data(try authority.certificate.pemBytes()).write(to: URL(fileURLWithPath: caPath))
    }

    public struct Leaf {
        public let certificatePath: String
        public let keyPath: String
        public let certificate: Certificate
        /// Base64 SHA-256 of the SubjectPublicKeyInfo (NSPinnedLeafIdentities' SPKI-SHA256-BASE64).
        public var spkiBase64: String { certificate.spkiSHA256.base64EncodedString() }
    }

    public func leaf(
        _ names: [String], file: String, key kind: PrivateKey.Kind = .p256,
        customize: (inout CertificateSpec) -> Void = { _ in }
    ) throws -> Leaf {
        let key = try PrivateKey.generate(kind)
        let now = Date()
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(200 * 86400))
        spec.commonName = names.first
        spec.dnsNames = names
        spec.ipAddresses = []
        customize(&spec)
        let certificate = try CertificateMinter.mint(
            spec, subjectKey: key, issuer: authority.certificate, issuerKey: authority.privateKey)
        let certificatePath = directory.file("\(file).pem")
        let keyPath = directory.file("\(file)-key.pem")
        try Data(try certificate.pemBytes()).write(to: URL(fileURLWithPath: certificatePath))
        try Data(try key.pemBytes()).write(to: URL(fileURLWithPath: keyPath))
        return Leaf(certificatePath: certificatePath, keyPath: keyPath, certificate: certificate)
    }
}
