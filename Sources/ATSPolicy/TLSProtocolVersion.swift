/// A TLS protocol version as ATS names it in `NSExceptionMinimumTLSVersion`.
public enum TLSProtocolVersion: String, Sendable, Codable, CaseIterable, Comparable, CustomStringConvertible {
    case tls10 = "TLSv1.0"
    case tls11 = "TLSv1.1"
    case tls12 = "TLSv1.2"
    case tls13 = "TLSv1.3"

    /// Parses the exact, case-sensitive spelling ATS accepts; nil for anything else
    /// (`TLSV1.3`, `TLSv1.00`, `1.0`, `SSLv3.0` are all invalid, as in Apple's parser).
    public init?(plistString: String) {
        self.init(rawValue: plistString)
    }

    /// The wire version number (0x0301 … 0x0304).
    public var wireValue: UInt16 {
        switch self {
        case .tls10: 0x0301
        case .tls11: 0x0302
        case .tls12: 0x0303
        case .tls13: 0x0304
        }
    }

    /// Human spelling: "TLS 1.2".
    public var displayName: String {
        switch self {
        case .tls10: "TLS 1.0"
        case .tls11: "TLS 1.1"
        case .tls12: "TLS 1.2"
        case .tls13: "TLS 1.3"
        }
    }

    public var description: String { rawValue }

    public static func < (lhs: TLSProtocolVersion, rhs: TLSProtocolVersion) -> Bool { lhs.wireValue < rhs.wireValue }
}

/// The NIAP "Functional Package for TLS" mode of `NSRequiresNIAPTLSPackageVersion`.
public enum NIAPPackage: String, Sendable, Codable, CaseIterable {
    /// No NIAP restrictions (the default behaviour).
    case none
    /// FCP TLS 2.1.
    case fcp21 = "FCP_v2.1"
    /// Apple's recommended package; today the same as FCP_v2.1.
    case recommended

    /// Whether this mode restricts the handshake.
    public var isRestrictive: Bool {
        switch self {
        case .none: false
        case .fcp21, .recommended: true
        }
    }
}
