import Foundation
import Synchronization

/// A leaf certificate minted for one host, with the key and the chain to serve.
public struct MintedLeaf: Sendable {
    public let host: String
    public let certificate: Certificate
    /// The shared leaf key (one P-256 key for every minted leaf, for speed).
    public let key: PrivateKey
    /// Certificates to send after the leaf (the CA).
    public let chain: [Certificate]
    public let notAfter: Date

    /// A leaf for `host` served as `certificate` with `key`, followed by `chain`, valid until `notAfter`.
    public init(host: String, certificate: Certificate, key: PrivateKey, chain: [Certificate], notAfter: Date) {
        self.host = host
        self.certificate = certificate
        self.key = key
        self.chain = chain
        self.notAfter = notAfter
    }
}

/// Mints leaves for the client-facing side (reference §3.1, §3.2, §7: DNS or IP SAN, EKU
/// serverAuth only, keyUsage digitalSignature, SHA-256, P-256, random 128-bit serial) and caches them
/// per host. Validity: notBefore one day back (clients with a slow clock), notAfter `validityDays`
/// (at most 198) ahead, so the whole period including the backdating stays under the 200 days
/// CA/Browser Forum ballot SC-081 allows public leaves from 2026-03-15, and never past the CA's own
/// notAfter. A cached leaf is re-minted when less than `renewBefore` (7 days) remains, unless the CA
/// itself ends first (a new leaf could not last longer).
///
/// Thread-safe: the cache is a `Mutex`-protected dictionary; a hit is one lookup plus an expiry
/// comparison. Minting happens outside the lock (two racing misses may both mint; one wins).
public final class LeafCertificateCache: Sendable {
    public let authority: CertificateAuthority
    public let leafKey: PrivateKey
    /// Maximum number of cached hosts; the oldest entry is evicted beyond it.
    public let capacity: Int
    /// How far a minted leaf's notBefore lies in the past.
    public static let backdating: TimeInterval = 86400
    /// The most days a leaf may run past its minting: 198 + 1 day of backdating = 199 < 200.
    public static let maximumValidityDays = 198
    /// Days a minted leaf runs past its minting (≤ `maximumValidityDays`).
    public let validityDays: Int
    /// A cached leaf is re-minted when less than this remains.
    public let renewBefore: TimeInterval
    private let clock: @Sendable () -> Date
    private let entries = Mutex<(leaves: [String: (leaf: MintedLeaf, sequence: UInt64)], next: UInt64)>(([:], 0))

    public init(
        authority: CertificateAuthority, capacity: Int = 4096,
        validityDays: Int = LeafCertificateCache.maximumValidityDays,
        renewBefore: TimeInterval = 7 * 86400,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        self.authority = authority
        self.leafKey = try PrivateKey.generate(.p256)
        self.capacity = max(1, capacity)
        self.validityDays = min(Self.maximumValidityDays, max(1, validityDays))
        self.renewBefore = renewBefore
        self.clock = clock
    }

    /// Host names are case-insensitive; IPv6 literals may come bracketed.
    public static func normalize(_ host: String) -> String {
        var name = host.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        return name
    }

    /// The cached leaf for `host`, minting one on a miss or near expiry.
    public func leaf(for host: String) throws -> MintedLeaf {
        let name = Self.normalize(host)
        let now = clock()
        let cached = entries.withLock { state in state.leaves[name]?.leaf }
        if let cached, !needsRenewal(cached, now: now) { return cached }
        let minted = try mint(host: name, now: now)
        entries.withLock { state in
            state.next += 1
            state.leaves[name] = (minted, state.next)
            if state.leaves.count > capacity,
                let oldest = state.leaves.min(by: { $0.value.sequence < $1.value.sequence })?.key
            {
                state.leaves.removeValue(forKey: oldest)
            }
        }
        return minted
    }

    /// Whether `leaf` must be replaced at `now`: it has expired, or less than `renewBefore` remains and a
    /// new leaf would last longer (it would not when the leaf already ends with the CA).
    public func needsRenewal(_ leaf: MintedLeaf, now: Date) -> Bool {
        let remaining = leaf.notAfter.timeIntervalSince(now)
        guard remaining > 0 else { return true }
        return remaining <= renewBefore && leaf.notAfter < authority.certificate.notAfter
    }

    /// Number of cached hosts.
    public var count: Int { entries.withLock { $0.leaves.count } }

    /// Mints a leaf without touching the cache.
    public func mint(host: String, now: Date) throws -> MintedLeaf {
        let name = Self.normalize(host)
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-Self.backdating),
            notAfter: min(now.addingTimeInterval(TimeInterval(validityDays) * 86400), authority.certificate.notAfter))
        if Self.isIPAddress(name) {
            spec.ipAddresses = [name]
        } else {
            spec.dnsNames = [name]
        }
        spec.commonName = name.utf8.count <= 64 ? name : nil
        spec.organization = "ats-proxy"
        spec.keyUsage = ["digitalSignature"]
        spec.extendedKeyUsage = ["serverAuth"]
        spec.signatureHash = .sha256
        let signed = try CertificateMinter.mint(
            spec, subjectKey: leafKey, issuer: authority.certificate, issuerKey: authority.privateKey)
        // Served from its own DER: a certificate built in memory keeps no encoding of its signed
        // part, so OpenSSL would encode it afresh for every handshake's Certificate message; a
        // parsed one copies the bytes it was read from.
        let certificate = try Certificate(der: signed.derBytes)
        return MintedLeaf(
            host: name, certificate: certificate, key: leafKey, chain: [authority.certificate], notAfter: spec.notAfter)
    }

    /// Whether `text` is an IPv4 or IPv6 address literal (no brackets): a leaf names it in an IP subjectAltName.
    public static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
