internal import COpenSSL
internal import COpenSSLShims

/// Facts about the linked OpenSSL library. `ATSTLS` is the only module that imports OpenSSL.
public enum OpenSSLLibrary {
    /// The runtime version text, e.g. "OpenSSL 3.0.19 27 Jan 2026".
    public static var version: String { String(cString: ats_openssl_version_text()) }

    /// The post-quantum hybrid key exchange Apple's systems offer first since iOS 26 and macOS 26.
    public static let postQuantumGroup = "X25519MLKEM768"

    /// The key-exchange groups `keyExchangeGroups` asks about, in the order printed: the hybrid first,
    /// then the classic elliptic curves (OpenSSL's names).
    public static let candidateGroups = [postQuantumGroup, "X25519", "P-256", "P-384", "P-521", "X448"]

    /// The groups of ``candidateGroups`` that the linked OpenSSL can negotiate, asked of the library at run
    /// time (not its headers): each is set alone on a scratch context.
    public static var keyExchangeGroups: [String] { candidateGroups.filter(supportsKeyExchangeGroup) }

    /// Whether the linked OpenSSL accepts `name` (an OpenSSL group name such as "X25519MLKEM768") as a
    /// TLS key-exchange group: true when `SSL_CTX_set1_groups_list` takes it on a scratch context. The
    /// refusal's error entries are cleared, so the thread's OpenSSL error queue is left as it was.
    public static func supportsKeyExchangeGroup(_ name: String) -> Bool {
        guard let context = SSL_CTX_new(TLS_method()) else {
            ERR_clear_error()
            return false
        }
        defer { SSL_CTX_free(context) }
        let accepted = ats_SSL_CTX_set1_groups_list(context, name) == 1
        if !accepted { ERR_clear_error() }
        return accepted
    }
}
