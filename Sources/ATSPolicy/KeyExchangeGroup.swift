/// A TLS key-exchange group (IANA "TLS Supported Groups" registry) as Apple's clients offer it and as
/// `nscurl --tls-diagnostics` names the negotiated one.
///
/// Names are the registry's, which are also OpenSSL's (`SSL_group_to_name`), so a name read from a
/// handshake maps back to its code point with `init?(name:)`.
public enum KeyExchangeGroup: String, Sendable, Codable, CaseIterable {
    /// Hybrid ML-KEM-768 + X25519 (post-quantum; OpenSSL 3.5 and later).
    case x25519MLKEM768 = "X25519MLKEM768"
    case x25519
    case secp256r1
    case secp384r1
    case secp521r1
    case x448
    case ffdhe2048
    case ffdhe3072

    /// The IANA code point (`supported_groups` value).
    public var codepoint: UInt16 {
        switch self {
        case .x25519MLKEM768: 0x11EC
        case .x25519: 0x001D
        case .secp256r1: 0x0017
        case .secp384r1: 0x0018
        case .secp521r1: 0x0019
        case .x448: 0x001E
        case .ffdhe2048: 0x0100
        case .ffdhe3072: 0x0101
        }
    }

    /// The spelling OpenSSL's group lists accept (`SSL_CTX_set1_groups_list`).
    public var openSSLListName: String {
        switch self {
        case .x25519MLKEM768: "X25519MLKEM768"
        case .x25519: "X25519"
        case .secp256r1: "P-256"
        case .secp384r1: "P-384"
        case .secp521r1: "P-521"
        case .x448: "X448"
        case .ffdhe2048: "ffdhe2048"
        case .ffdhe3072: "ffdhe3072"
        }
    }

    /// Whether the group resists a quantum adversary (the hybrid ML-KEM group).
    public var isPostQuantum: Bool {
        switch self {
        case .x25519MLKEM768: true
        case .x25519, .secp256r1, .secp384r1, .secp521r1, .x448, .ffdhe2048, .ffdhe3072: false
        }
    }

    /// The group called `name` (registry or OpenSSL spelling, case-insensitive), nil when unknown.
    public init?(name: String) {
        let lowered = name.lowercased()
        guard
            let match = Self.allCases.first(where: {
                $0.rawValue.lowercased() == lowered || $0.openSSLListName.lowercased() == lowered
            })
        else { return nil }
        self = match
    }

    /// The groups the emulated platform's ClientHello offers, in its order: the hybrid group first from
    /// iOS/macOS 26 (Apple support article 122756), then X25519, P-256, P-384 and P-521.
    public static func offered(on platform: Platform) -> [KeyExchangeGroup] {
        let classical: [KeyExchangeGroup] = [.x25519, .secp256r1, .secp384r1, .secp521r1]
        return platform.has(.postQuantumKeyExchange) ? [.x25519MLKEM768] + classical : classical
    }

    /// `0x11EC`: four upper-case hex digits, as nscurl prints code points.
    public var codepointText: String { Self.hex(codepoint) }

    /// `0x` and four upper-case hex digits.
    public static func hex(_ value: UInt16) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
