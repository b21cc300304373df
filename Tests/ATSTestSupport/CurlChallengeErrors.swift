import ATSTLS

/// What curl (OpenSSL) prints when it refuses a challenge kind with verification on and the proxy's CA trusted:
/// OpenSSL's verify error, or its handshake failure, as curl words it. Nil for the kinds OpenSSL accepts (no
/// SAN: it falls back to the CN; a long validity: it has no cap; static RSA: it is in its default suites).
/// Shared by the challenge tests against the loopback server and through the proxy binary.
public enum CurlChallengeErrors {
    public static func message(_ kind: ChallengeKind) -> String? {
        switch kind {
        case .wrongHost: "no alternative certificate subject name matches target host name"
        case .selfSigned: "self-signed certificate"
        case .untrustedCA: "self-signed certificate in certificate chain"
        case .expired: "certificate has expired"
        case .notYetValid: "certificate is not yet valid"
        case .sha1Signature: "CA signature digest algorithm too weak"
        case .rsa1024: "EE certificate key too weak"
        case .tls10Only, .tls11Only: "legacy sigalg disallowed or unsupported"
        case .noSAN, .overlongValidity, .staticRSAOnly: nil
        }
    }
}
