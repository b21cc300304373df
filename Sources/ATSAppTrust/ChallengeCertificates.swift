import ATSTLS
import Foundation
import Synchronization

/// Mints, at run time, the leaf, chain and key each challenge kind serves for a host, and caches
/// them per (host, kind) the way `LeafCertificateCache` caches normal leaves. Nothing it makes is
/// written anywhere.
///
/// Every leaf differs from a normal proxy leaf (reference §3.1, §3.2: SAN, EKU serverAuth, SHA-256,
/// P-256, issued by the proxy's CA, at most 397 days) in the one property its kind is about:
///
/// | kind | leaf | chain served |
/// | --- | --- | --- |
/// | wrong-host | SAN/CN `ats-proxy-wrong-host.invalid` | proxy CA |
/// | self-signed | issuer = subject, signed by its own key | none |
/// | untrusted-ca | issued by `untrustedAuthority` | that CA |
/// | expired | valid from 31 days ago until 1 day ago | proxy CA |
/// | not-yet-valid | valid from in 2 days for 30 days | proxy CA |
/// | sha1 | signed with SHA-1 | proxy CA |
/// | rsa1024 | RSA-1024 key | proxy CA |
/// | no-san | no subjectAltName; CN = host | proxy CA |
/// | overlong-validity | valid for 900 days | proxy CA |
/// | tls1.0, tls1.1, static-rsa | a normal leaf with an RSA-2048 key (the handshake is the bad part) | proxy CA |
///
/// The keys (one P-256, one RSA-2048, one RSA-1024) and the untrusted CA are made once, at init.
/// Thread-safe: the cache is a `Mutex`-protected dictionary; minting happens outside the lock (two
/// racing misses may both mint; the last one is kept).
public final class ChallengeCertificates: Sendable {
    /// How long a cached leaf is served before it is minted again, so that the date-relative kinds
    /// (expired, not yet valid) stay what they claim to be in a long run.
    public static let maximumAge: TimeInterval = 12 * 3600

    /// The proxy's CA, which signs every leaf except the self-signed and untrusted-CA ones.
    public let authority: CertificateAuthority
    /// A CA minted at init and never written anywhere: no client can have been told to trust it.
    public let untrustedAuthority: CertificateAuthority
    /// The key of every P-256 leaf (also the self-signed one's signing key).
    public let ecKey: PrivateKey
    /// The key of the handshake kinds' leaves (static RSA key exchange needs an RSA leaf).
    public let rsaKey: PrivateKey
    /// The key of the rsa1024 leaf.
    public let weakRSAKey: PrivateKey
    /// Maximum number of cached (host, kind) pairs; the oldest entry is evicted beyond it.
    public let capacity: Int
    private let clock: @Sendable () -> Date
    private let entries = Mutex<(leaves: [Key: Entry], next: UInt64)>(([:], 0))

    private struct Key: Hashable {
        let host: String
        let kind: ChallengeKind
    }

    private struct Entry {
        let leaf: MintedLeaf
        let mintedAt: Date
        let sequence: UInt64
    }

    /// - Parameters:
    ///   - authority: the proxy's CA (the one clients were told to trust).
    ///   - capacity: cached (host, kind) pairs at most.
    ///   - clock: the current time (tests move it).
    public init(
        authority: CertificateAuthority, capacity: Int = 4096, clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.authority = authority
        self.capacity = max(1, capacity)
        self.clock = clock
        ecKey = try PrivateKey.generate(.p256)
        rsaKey = try PrivateKey.generate(.rsa(bits: 2048))
        weakRSAKey = try PrivateKey.generate(.rsa(bits: 1024))
        untrustedAuthority = try Self.mintUntrustedAuthority(now: clock())
    }

    /// A self-signed P-256 CA named so that nobody mistakes it for the proxy's own.
    private static func mintUntrustedAuthority(now: Date) throws -> CertificateAuthority {
        let key = try PrivateKey.generate(.p256)
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(3650 * 86400))
        spec.commonName = "ats-proxy untrusted challenge CA"
        spec.organization = "ats-proxy challenge"
        spec.isCA = true
        spec.keyUsage = ["keyCertSign", "cRLSign"]
        spec.extendedKeyUsage = nil
        let certificate = try CertificateMinter.mint(spec, subjectKey: key, issuer: nil, issuerKey: key)
        return CertificateAuthority(certificate: certificate, privateKey: key, certificatePath: nil, keyPath: nil)
    }

    /// The cached leaf `kind` serves for `host`, minting one on a miss or when the cached one is
    /// older than `maximumAge`.
    public func leaf(for host: String, kind: ChallengeKind) throws -> MintedLeaf {
        let key = Key(host: LeafCertificateCache.normalize(host), kind: kind)
        let now = clock()
        let cached = entries.withLock { state in state.leaves[key] }
        if let cached, now.timeIntervalSince(cached.mintedAt) < Self.maximumAge, now >= cached.mintedAt {
            return cached.leaf
        }
        let minted = try mint(host: key.host, kind: kind, now: now)
        entries.withLock { state in
            state.next += 1
            state.leaves[key] = Entry(leaf: minted, mintedAt: now, sequence: state.next)
            if state.leaves.count > capacity,
                let oldest = state.leaves.min(by: { $0.value.sequence < $1.value.sequence })?.key
            {
                state.leaves.removeValue(forKey: oldest)
            }
        }
        return minted
    }

    /// Number of cached (host, kind) pairs.
    public var count: Int { entries.withLock { $0.leaves.count } }

    /// Mints the leaf of `kind` for `host` at `now`, without touching the cache.
    public func mint(host: String, kind: ChallengeKind, now: Date) throws -> MintedLeaf {
        let name = LeafCertificateCache.normalize(host)
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-3600),
            notAfter: min(now.addingTimeInterval(397 * 86400 - 3600), authority.certificate.notAfter))
        spec.organization = "ats-proxy challenge"
        spec.keyUsage = ["digitalSignature"]
        spec.extendedKeyUsage = ["serverAuth"]
        spec.signatureHash = .sha256
        Self.name(&spec, name)
        var subjectKey = ecKey
        var issuer: CertificateAuthority? = authority
        switch kind {
        case .wrongHost:
            Self.name(&spec, ChallengeKind.wrongHostName)
        case .selfSigned:
            issuer = nil
        case .untrustedCA:
            issuer = untrustedAuthority
        case .expired:
            spec.notBefore = now.addingTimeInterval(-31 * 86400)
            spec.notAfter = now.addingTimeInterval(-86400)
        case .notYetValid:
            spec.notBefore = now.addingTimeInterval(2 * 86400)
            spec.notAfter = now.addingTimeInterval(32 * 86400)
        case .sha1Signature:
            spec.signatureHash = .sha1
        case .rsa1024:
            subjectKey = weakRSAKey
        case .noSAN:
            spec.dnsNames = []
            spec.ipAddresses = []
        case .overlongValidity:
            spec.notAfter = now.addingTimeInterval(900 * 86400)
        case .tls10Only, .tls11Only, .staticRSAOnly:
            subjectKey = rsaKey
        }
        let signed = try CertificateMinter.mint(
            spec, subjectKey: subjectKey, issuer: issuer?.certificate, issuerKey: issuer?.privateKey ?? subjectKey)
        // Served from its own DER, like a normal leaf (see LeafCertificateCache.mint).
        let certificate = try Certificate(der: signed.derBytes)
        return MintedLeaf(
            host: name, certificate: certificate, key: subjectKey, chain: issuer.map { [$0.certificate] } ?? [],
            notAfter: spec.notAfter)
    }

    /// Names `spec` after `host`: a DNS or IP subjectAltName, and the CN when it fits (64 characters).
    private static func name(_ spec: inout CertificateSpec, _ host: String) {
        if LeafCertificateCache.isIPAddress(host) {
            spec.dnsNames = []
            spec.ipAddresses = [host]
        } else {
            spec.dnsNames = [host]
            spec.ipAddresses = []
        }
        spec.commonName = host.utf8.count <= 64 ? host : nil
    }
}
