import Foundation

/// A signature hash algorithm, ordered from weakest to strongest.
public enum SignatureHash: String, Sendable, Codable, CaseIterable, Comparable {
    case md5 = "MD5"
    case sha1 = "SHA-1"
    case sha224 = "SHA-224"
    case sha256 = "SHA-256"
    case sha384 = "SHA-384"
    case sha512 = "SHA-512"

    private var strength: Int {
        switch self {
        case .md5: 0
        case .sha1: 1
        case .sha224: 2
        case .sha256: 3
        case .sha384: 4
        case .sha512: 5
        }
    }

    public static func < (lhs: SignatureHash, rhs: SignatureHash) -> Bool { lhs.strength < rhs.strength }
}

/// How the server's certificate chain is trusted.
public struct TrustPolicy: Sendable, Hashable, Codable {
    /// Which evaluation applies.
    public enum Kind: String, Sendable, Codable {
        /// ATS trust: the system re-evaluates after the delegate, failures are -1200 [3:-9802].
        case ats
        /// Default trust evaluation: failures are -1202/-1201/… and the app may override them.
        case standard
    }

    public let kind: Kind
    /// Whether ATS permits the app's delegate to accept a chain that fails evaluation.
    public let appMayOverride: Bool
    /// Whether the emulated app does override (configured with `--trust-override HOST`).
    public let appOverrides: Bool

    public init(kind: Kind, appMayOverride: Bool, appOverrides: Bool) {
        self.kind = kind
        self.appMayOverride = appMayOverride
        self.appOverrides = appOverrides && appMayOverride
    }
}

/// A maximum certificate lifetime that applies to leaves whose notBefore is on or after a date.
public struct ValidityCap: Sendable, Hashable, Codable {
    /// Which anchors the cap applies to.
    public enum Anchors: String, Sendable, Codable {
        /// Roots shipped with the OS.
        case system
        /// Roots installed by the user or an MDM profile (e.g. the proxy's own CA).
        case userInstalled = "user-installed"
    }

    public let anchors: Anchors
    public let notBeforeOnOrAfter: Date
    public let maximumDays: Int
    /// Extra slack Apple allows beyond the cap (one hour for the 825-day rules).
    public let slackSeconds: Int
}

/// When Certificate Transparency is required.
public struct CTRequirement: Sendable, Hashable, Codable {
    /// Require SCTs for chains ending in a system root, for leaves issued on or after this date.
    public let systemRootsIssuedOnOrAfter: Date?
    /// Require SCTs for every chain, including user-installed roots (old NSRequiresCertificateTransparency).
    public let allChains: Bool

    public static let none = CTRequirement(systemRootsIssuedOnOrAfter: nil, allChains: false)
}

/// Identity pins that apply to a host (from every matching NSPinnedDomains entry).
public struct PinRequirement: Sendable, Hashable, Codable {
    /// The NSPinnedDomains keys that matched.
    public let domains: [String]
    /// Acceptable leaf SPKI SHA-256 digests; nil when no matching entry pins the leaf.
    public let leafSPKISHA256: [Data]?
    /// Acceptable CA SPKI SHA-256 digests (any certificate above the leaf); nil when not pinned.
    public let caSPKISHA256: [Data]?

    /// True when a pin list exists but holds no valid digest: every connection fails.
    public var failsClosed: Bool {
        (leafSPKISHA256?.isEmpty ?? false) || (caSPKISHA256?.isEmpty ?? false)
    }
}

/// Everything the upstream TLS client must offer and check for one host, derived from the
/// policy decision. `ATSTLS` builds its handshake and its post-handshake verdict from this value.
///
/// A value type whose fields live in one shared, immutable storage object: a copy (and every request
/// carries the requirements of its decision and its upstream key) costs one reference count, and two
/// copies of one value compare equal without looking at the cipher lists. Setting a field makes new
/// storage. Equality, hashing and the Codable form are those of the fields.
@dynamicMemberLookup
public struct TLSRequirements: Sendable, Hashable, Codable {
    /// The fields, stored once and shared by every copy. Read and set them on the requirements themselves
    /// (`requirements.pins`, through `subscript(dynamicMember:)`); setting one makes new storage.
    public struct Fields: Sendable, Hashable, Codable {
        /// True when ATS governs the connection (its TLS, cipher and certificate extras apply).
        public var atsGoverned: Bool
        /// Lowest and highest protocol versions to offer. `minimumVersion > maximumVersion` means no
        /// handshake can succeed (e.g. TLSv1.3 required on an OS without TLS 1.3).
        public var minimumVersion: TLSProtocolVersion
        public var maximumVersion: TLSProtocolVersion
        /// The suites to offer, in order (TLS 1.3 suites first).
        public var cipherSuites: [CipherSuite]
        /// True when the cipher list is the platform's unrestricted default (PFS waived together with
        /// insecure HTTP loads); the list then also contains the static-RSA suites.
        public var cipherListUnrestricted: Bool
        /// Whether the negotiated key exchange must be forward secret.
        public var forwardSecrecyRequired: Bool
        /// Minimum RSA and EC key sizes for every certificate of the chain (0 = no minimum).
        public var minimumRSAKeyBits: Int
        public var minimumECKeyBits: Int
        /// Whether the ATS key-size extra applies (false when PFS is waived, as Apple's docs say).
        public var atsKeySizeCheck: Bool
        /// The weakest acceptable signature hash on non-self-signed certificates.
        public var minimumSignatureHash: SignatureHash
        public var trust: TrustPolicy
        /// DNS names must appear in the SAN (CN is ignored).
        public var requireSubjectAltName: Bool
        /// Leaves issued on or after this date must carry EKU serverAuth.
        public var requireServerAuthEKUIssuedAfter: Date?
        public var validityCaps: [ValidityCap]
        public var certificateTransparency: CTRequirement
        public var pins: PinRequirement?
        /// NIAP FCP mode: ECDHE+AES-GCM only for TLS 1.2, Extended Master Secret required, no
        /// rsa_pkcs1_sha1 signatures.
        public var niap: NIAPPackage
    }

    /// Immutable: shared by every copy of one value. The fields' hash is computed once (upstream keys,
    /// which carry the requirements, are hashed on every pool lookup).
    @usableFromInline final class Storage: Sendable {
        @usableFromInline let fields: Fields
        let fieldsHash: Int
        @usableFromInline init(_ fields: Fields) {
            self.fields = fields
            fieldsHash = fields.hashValue
        }
    }

    @usableFromInline var storage: Storage

    @usableFromInline init(_ fields: Fields) { storage = Storage(fields) }

    /// Every field, read from the shared storage; setting one gives this value storage of its own (to
    /// change several, use `updating`: one storage and one hash for all of them).
    @inlinable public subscript<Value>(dynamicMember field: Swift.WritableKeyPath<Fields, Value>) -> Value {
        get { storage.fields[keyPath: field] }
        set { self = updating { $0[keyPath: field] = newValue } }
    }

    /// A copy with the fields `change` sets, in one new storage.
    @inlinable public func updating(_ change: (inout Fields) -> Void) -> TLSRequirements {
        var fields = storage.fields
        change(&fields)
        return TLSRequirements(fields)
    }

    public static func == (lhs: TLSRequirements, rhs: TLSRequirements) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fields == rhs.storage.fields
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(storage.fieldsHash) }

    public init(from decoder: any Decoder) throws { storage = Storage(try Fields(from: decoder)) }

    public func encode(to encoder: any Encoder) throws { try storage.fields.encode(to: encoder) }

    /// The OpenSSL cipher-list string for TLS ≤ 1.2 suites.
    public var openSSLCipherList: String {
        self.cipherSuites.filter { $0.group != .tls13 }.map(\.openSSLName).joined(separator: ":")
    }

    /// The OpenSSL TLS 1.3 ciphersuites string.
    public var openSSLTLS13Suites: String {
        self.cipherSuites.filter { $0.group == .tls13 }.map(\.openSSLName).joined(separator: ":")
    }

    /// False when no version can be negotiated at all.
    public var isSatisfiable: Bool { self.minimumVersion <= self.maximumVersion && !self.cipherSuites.isEmpty }
}

/// Fixed dates of Apple's certificate rules.
enum TrustDates {
    static func utc(_ year: Int, _ month: Int, _ day: Int) -> Date {
        var components = DateComponents()
        components.calendar = Calendar(identifier: .gregorian)
        components.timeZone = TimeZone(identifier: "UTC")
        components.year = year
        components.month = month
        components.day = day
        return components.date!
    }

    /// Certificates issued on or after this date need EKU and ≤ 825 days (iOS 13 rules).
    static let iOS13Rules = utc(2019, 7, 1)
    /// CT is required for system-rooted leaves issued from this date (code: 2018-10-16 00:00 UTC).
    static let ctRequired = utc(2018, 10, 16)
    static let systemCap825 = utc(2018, 3, 1)
    static let systemCap398 = utc(2020, 9, 1)
}
