import Foundation

/// The state of one ATS Boolean key after Apple's parsing rules have been applied.
///
/// A value of the wrong type is treated as absent (and logged by the parser); a number counts as
/// present, YES only when it equals 1.
public enum BooleanSetting: Sendable, Hashable, Codable {
    /// The key is missing (or held a non-number, which ATS treats the same way).
    case absent
    /// The key is present with this effective value.
    case value(Bool)

    /// Present with any value. Presence alone is what cancels NSAllowsArbitraryLoads.
    public var isPresent: Bool {
        switch self {
        case .absent: false
        case .value: true
        }
    }

    /// Present and YES.
    public var isYes: Bool { self == .value(true) }

    /// Present and NO.
    public var isExplicitNo: Bool { self == .value(false) }

    /// The effective value, `fallback` when absent.
    public func resolved(default fallback: Bool) -> Bool {
        switch self {
        case .absent: fallback
        case .value(let flag): flag
        }
    }
}

/// What an `NSExceptionDomains` key names.
public enum ExceptionKeyKind: Sendable, Hashable, Codable {
    /// A DNS name (matched exactly, then through parents that include subdomains).
    case host
    /// A single IP address (matched by exact string).
    case address(IPAddressText)
    /// An address block (longest prefix wins).
    case cidr(CIDRText)
    /// A key containing `/` that is not valid CIDR: it never matches.
    case invalidCIDR

    /// Codable wrapper for an IP address.
    public struct IPAddressText: Sendable, Hashable, Codable {
        public let text: String
        public var address: IPAddress { IPAddress(parsing: text)! }
        init(_ address: IPAddress) { text = address.description }
    }

    /// Codable wrapper for a CIDR block.
    public struct CIDRText: Sendable, Hashable, Codable {
        public let text: String
        public var block: CIDRBlock { CIDRBlock(parsing: text)! }
        init(_ block: CIDRBlock) { text = block.description }
    }

    /// Classifies an exception key the way Apple's engine does.
    public static func classify(_ key: String) -> ExceptionKeyKind {
        if key.contains("/") {
            if let block = CIDRBlock(parsing: key) { return .cidr(CIDRText(block)) }
            return .invalidCIDR
        }
        if let address = IPAddress(parsing: key) { return .address(IPAddressText(address)) }
        return .host
    }
}

/// One entry of `NSExceptionDomains`, with every key resolved to its effective value.
public struct ExceptionDomain: Sendable, Hashable, Codable {
    /// The dictionary key exactly as written.
    public let key: String
    public let kind: ExceptionKeyKind
    public var includesSubdomains: Bool = false
    public var allowsInsecureHTTPLoads: Bool = false
    /// The effective minimum (default TLS 1.2; an invalid string also gives TLS 1.2).
    public var minimumTLSVersion: TLSProtocolVersion = .tls12
    /// Whether `NSExceptionMinimumTLSVersion` was given with a valid value.
    public var minimumTLSVersionSpecified: Bool = false
    public var requiresForwardSecrecy: Bool = true
    public var requiresCertificateTransparency: Bool = false
    /// Per-host NIAP override, nil when it inherits the global setting.
    public var niapPackage: NIAPPackage? = nil
    /// Legacy spellings honoured as aliases for this entry (with `--legacy-keys`).
    public var legacyKeysApplied: [String] = []
    /// True for Apple's built-in exceptions (apple.com etc.), false for the app's own entries.
    public var isBuiltIn: Bool = false

    public init(key: String, kind: ExceptionKeyKind? = nil) {
        self.key = key
        self.kind = kind ?? ExceptionKeyKind.classify(key)
    }
}

/// A set of SPKI SHA-256 pins from one `NSPinnedCAIdentities` or `NSPinnedLeafIdentities` array.
public struct PinList: Sendable, Hashable, Codable {
    /// The valid 32-byte digests.
    public var digests: [Data]
    /// How many array items were not usable (not a dictionary, missing key, bad base64, wrong length).
    public var invalidCount: Int

    public init(digests: [Data] = [], invalidCount: Int = 0) {
        self.digests = digests
        self.invalidCount = invalidCount
    }

    /// The digests as base64, for display.
    public var base64Digests: [String] { digests.map { $0.base64EncodedString() } }
}

/// One entry of `NSPinnedDomains`.
public struct PinnedDomain: Sendable, Hashable, Codable {
    /// The dictionary key as written (matched case-insensitively, trailing dot ignored).
    public let key: String
    /// Only an exact Boolean true counts (an integer 1 does not).
    public var includesSubdomains: Bool = false
    /// nil when the array is absent.
    public var caIdentities: PinList? = nil
    public var leafIdentities: PinList? = nil

    public init(key: String) { self.key = key }

    /// An entry with neither array pins nothing.
    public var isPinning: Bool { caIdentities != nil || leafIdentities != nil }

    /// The key normalised for matching: lower-cased, trailing dot removed.
    public var normalizedKey: String { PinnedDomain.normalize(key) }

    static func normalize(_ host: String) -> String {
        var value = host.lowercased()
        if value.hasSuffix(".") { value.removeLast() }
        return value
    }
}

/// The parsed `NSAppTransportSecurity` dictionary: every key with its effective value, plus the
/// messages Apple's parser would log while reading it.
public struct ATSConfiguration: Sendable, Equatable, Codable {
    public var allowsArbitraryLoads: BooleanSetting = .absent
    public var allowsArbitraryLoadsForMedia: BooleanSetting = .absent
    public var allowsArbitraryLoadsInWebContent: BooleanSetting = .absent
    public var allowsLocalNetworking: BooleanSetting = .absent
    /// Entries by key. Entries whose value was not a dictionary are dropped (logged).
    public var exceptionDomains: [String: ExceptionDomain] = [:]
    public var pinnedDomains: [String: PinnedDomain] = [:]
    public var niapPackage: NIAPPackage = .none
    /// Parser log lines and notes, in dictionary order.
    public var messages: [ConfigMessage] = []

    /// The empty dictionary: full ATS, what a new app gets.
    public static let empty = ATSConfiguration()

    public init() {}

    /// Whether any of the three fine-grained keys is present, which cancels NSAllowsArbitraryLoads
    /// on iOS 10 / macOS 10.12 and later.
    public var fineGrainedKeyPresent: Bool {
        allowsArbitraryLoadsForMedia.isPresent || allowsArbitraryLoadsInWebContent.isPresent
            || allowsLocalNetworking.isPresent
    }

    /// Names of the fine-grained keys that are present.
    public var presentFineGrainedKeys: [String] {
        var names: [String] = []
        if allowsArbitraryLoadsForMedia.isPresent { names.append(ATSKey.allowsArbitraryLoadsForMedia) }
        if allowsArbitraryLoadsInWebContent.isPresent { names.append(ATSKey.allowsArbitraryLoadsInWebContent) }
        if allowsLocalNetworking.isPresent { names.append(ATSKey.allowsLocalNetworking) }
        return names
    }
}

/// The spelling of every key the engine knows.
public enum ATSKey {
    public static let root = "NSAppTransportSecurity"
    public static let allowsArbitraryLoads = "NSAllowsArbitraryLoads"
    public static let allowsArbitraryLoadsForMedia = "NSAllowsArbitraryLoadsForMedia"
    public static let allowsArbitraryLoadsInWebContent = "NSAllowsArbitraryLoadsInWebContent"
    public static let allowsLocalNetworking = "NSAllowsLocalNetworking"
    public static let exceptionDomains = "NSExceptionDomains"
    public static let pinnedDomains = "NSPinnedDomains"
    public static let requiresNIAP = "NSRequiresNIAPTLSPackageVersion"

    public static let includesSubdomains = "NSIncludesSubdomains"
    public static let exceptionAllowsInsecureHTTPLoads = "NSExceptionAllowsInsecureHTTPLoads"
    public static let exceptionMinimumTLSVersion = "NSExceptionMinimumTLSVersion"
    public static let exceptionRequiresForwardSecrecy = "NSExceptionRequiresForwardSecrecy"
    public static let requiresCertificateTransparency = "NSRequiresCertificateTransparency"
    public static let exceptionRequiresNIAP = "NSExceptionRequiresNIAPTLSPackageVersion"

    public static let pinnedCAIdentities = "NSPinnedCAIdentities"
    public static let pinnedLeafIdentities = "NSPinnedLeafIdentities"
    public static let spkiSHA256 = "SPKI-SHA256-BASE64"

    /// Keys valid at the top level of the ATS dictionary.
    public static let topLevel: [String] = [
        allowsArbitraryLoads, allowsArbitraryLoadsForMedia, allowsArbitraryLoadsInWebContent, allowsLocalNetworking,
        exceptionDomains, pinnedDomains, requiresNIAP,
    ]

    /// Keys valid inside one exception-domain entry.
    public static let exceptionEntry: [String] = [
        includesSubdomains, exceptionAllowsInsecureHTTPLoads, exceptionMinimumTLSVersion,
        exceptionRequiresForwardSecrecy, requiresCertificateTransparency, exceptionRequiresNIAP,
    ]

    /// Keys valid inside one pinned-domain entry.
    public static let pinnedEntry: [String] = [includesSubdomains, pinnedCAIdentities, pinnedLeafIdentities]

    /// Legacy exception-entry spellings and the key each one would alias.
    public static let legacyExceptionAliases: [String: String] = {
        var table: [String: String] = [:]
        for prefix in ["NSThirdPartyException", "NSTemporaryException", "NSTemporaryThirdPartyException"] {
            table[prefix + "AllowsInsecureHTTPLoads"] = exceptionAllowsInsecureHTTPLoads
            table[prefix + "MinimumTLSVersion"] = exceptionMinimumTLSVersion
            table[prefix + "RequiresForwardSecrecy"] = exceptionRequiresForwardSecrecy
        }
        return table
    }()

    /// Legacy top-level spellings and the key each one would alias.
    public static let legacyTopLevelAliases: [String: String] = [
        "NSAllowsArbitraryLoadsInMedia": allowsArbitraryLoadsForMedia
    ]

    /// Names seen in real plists that were never ATS keys.
    public static let undocumented: Set<String> = [
        "NSExceptionAllowsLocalNetworking", "NSTemporaryExceptionAllowsInsecureHTTPSLoads",
    ]
}
