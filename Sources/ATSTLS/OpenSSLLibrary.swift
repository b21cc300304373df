internal import COpenSSL
internal import COpenSSLShims

/// Facts about the linked OpenSSL library. `ATSTLS` is the only module that imports OpenSSL.
public enum OpenSSLLibrary {
    /// The runtime version text, e.g. "OpenSSL 3.0.19 27 Jan 2026".
    public static var version: String { String(cString: ats_openssl_version_text()) }

    /// The first two words of `version`, e.g. "OpenSSL 3.0.19".
    public static var shortVersion: String { version.split(separator: " ").prefix(2).joined(separator: " ") }

    /// The post-quantum hybrid key exchange Apple's systems offer first since iOS 26 and macOS 26.
    public static let postQuantumGroup = "X25519MLKEM768"

    /// The key-exchange groups `keyExchangeGroups` asks about, in the order printed: the hybrid first,
    /// then the classic elliptic curves (OpenSSL's names).
    public static let candidateGroups = [postQuantumGroup, "X25519", "P-256", "P-384", "P-521", "X448"]

    /// The groups of ``candidateGroups`` that the linked OpenSSL can negotiate, asked of the library at run
    /// time (not its headers).
    public static var keyExchangeGroups: [String] { candidateGroups.filter(supportsKeyExchangeGroup) }

    /// Whether the linked OpenSSL accepts `name` as a TLS key-exchange group: the same run-time question the
    /// upstream group offer asks (`TLSContext.supportsGroup`).
    public static func supportsKeyExchangeGroup(_ name: String) -> Bool { TLSContext.supportsGroup(name) }
}
