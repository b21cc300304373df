internal import COpenSSL
internal import COpenSSLShims

/// Facts about the linked OpenSSL library. `ATSTLS` is the only module that imports OpenSSL.
public enum OpenSSLLibrary {
    /// The runtime version text, e.g. "OpenSSL 3.0.19 27 Jan 2026".
    public static var version: String { String(cString: ats_openssl_version_text()) }

    /// The first two words of `version`, e.g. "OpenSSL 3.0.19".
    public static var shortVersion: String { version.split(separator: " ").prefix(2).joined(separator: " ") }
}
