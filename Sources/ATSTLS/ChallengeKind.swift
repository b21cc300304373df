import ATSPolicy

/// One deliberately unacceptable server the proxy can present to a client in challenge mode: a
/// certificate that a correct trust evaluation refuses, or a handshake that ATS refuses. A client that
/// completes such a handshake and then sends a request has accepted something it must not.
///
/// The raw values are the stable names of the command line (`--challenge HOST=wrong-host,tls1.0`) and of
/// the report; `ChallengeKind(name:)` also accepts them without dashes, dots or underscores.
public enum ChallengeKind: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// A leaf from the proxy's CA for a different host name (`ats-proxy-wrong-host.invalid`).
    case wrongHost = "wrong-host"
    /// A leaf for the host, signed by its own key (no CA).
    case selfSigned = "self-signed"
    /// A leaf for the host from a second CA minted at run time, which no client was told to trust.
    case untrustedCA = "untrusted-ca"
    /// A leaf for the host whose validity ended a day ago.
    case expired
    /// A leaf for the host whose validity starts in two days.
    case notYetValid = "not-yet-valid"
    /// A leaf for the host signed with SHA-1.
    case sha1Signature = "sha1"
    /// A leaf for the host with an RSA-1024 key.
    case rsa1024
    /// A leaf that names the host only in its subject CN, with no subjectAltName.
    case noSAN = "no-san"
    /// A leaf for the host valid for 900 days, more than the 825 days Apple accepts.
    case overlongValidity = "overlong-validity"
    /// A valid leaf, but the handshake is limited to TLS 1.0.
    case tls10Only = "tls1.0"
    /// A valid leaf, but the handshake is limited to TLS 1.1.
    case tls11Only = "tls1.1"
    /// A valid leaf, but TLS 1.2 at most with RSA key exchange suites only (no forward secrecy).
    case staticRSAOnly = "static-rsa"

    /// What a challenge puts to the test.
    public enum Category: String, Sendable, Hashable, CaseIterable {
        /// The certificate is bad; the handshake parameters are those of a normal connection.
        case certificate
        /// The certificate is good; the protocol version or the key exchange is one ATS refuses.
        case handshake
    }

    public var description: String { rawValue }

    /// The kind named `name`: a raw value, compared without case, `-`, `_` or `.` (so `tls10`,
    /// `TLS1_0` and `tls1.0` are the same kind); nil for anything else.
    public init?(name: String) {
        let wanted = Self.squeezed(name)
        guard let kind = Self.allCases.first(where: { Self.squeezed($0.rawValue) == wanted }) else { return nil }
        self = kind
    }

    /// `name` lower-cased without `-`, `_`, `.` and spaces, so `TLS1.0-only`, `tls10only` and `tls_10_only` match.
    public static func squeezed(_ name: String) -> String {
        String(name.lowercased().filter { $0 != "-" && $0 != "_" && $0 != "." && $0 != " " })
    }

    /// Whether the certificate or the handshake is the bad part.
    public var category: Category {
        switch self {
        case .wrongHost, .selfSigned, .untrustedCA, .expired, .notYetValid, .sha1Signature, .rsa1024, .noSAN,
            .overlongValidity:
            .certificate
        case .tls10Only, .tls11Only, .staticRSAOnly:
            .handshake
        }
    }

    /// The host name the wrong-host leaf is for (`.invalid` is reserved by RFC 2606: it names nobody).
    public static let wrongHostName = "ats-proxy-wrong-host.invalid"

    /// What the proxy presents, in a few words (for logs and the report).
    public var presents: String {
        switch self {
        case .wrongHost: "a certificate for another host name (\(Self.wrongHostName))"
        case .selfSigned: "a self-signed certificate"
        case .untrustedCA: "a certificate from a CA the client was never told to trust"
        case .expired: "an expired certificate"
        case .notYetValid: "a certificate that is not yet valid"
        case .sha1Signature: "a SHA-1-signed certificate"
        case .rsa1024: "a certificate with an RSA-1024 key"
        case .noSAN: "a certificate naming the host only in its CN (no subjectAltName)"
        case .overlongValidity: "a certificate valid for 900 days (more than 825)"
        case .tls10Only: "a handshake limited to TLS 1.0"
        case .tls11Only: "a handshake limited to TLS 1.1"
        case .staticRSAOnly: "a TLS 1.2 handshake with RSA key exchange only (no forward secrecy)"
        }
    }

    /// What it says about the client that it completed this handshake and sent a request: the
    /// one-line meaning of a finding.
    public var acceptanceMeaning: String {
        let overridden =
            "its trust evaluation is disabled or overridden (for example AFSecurityPolicy allowInvalidCertificates = YES, or a delegate that accepts any server trust)"
        switch self {
        case .wrongHost:
            return
                "the client accepted a certificate for another host: its trust evaluation is disabled or overridden (for example AFSecurityPolicy allowInvalidCertificates = YES, validatesDomainName = NO, or a delegate that accepts any server trust)"
        case .selfSigned:
            return "the client accepted a self-signed certificate: \(overridden)"
        case .untrustedCA:
            return
                "the client accepted a certificate from a CA nobody installed: \(overridden); anyone on the network path can read and change its traffic"
        case .expired:
            return
                "the client accepted an expired certificate: \(overridden), or it checks the chain without checking dates"
        case .notYetValid:
            return
                "the client accepted a certificate that is not valid yet: \(overridden), or it checks the chain without checking dates"
        case .sha1Signature:
            return
                "the client accepted a SHA-1-signed certificate, which Apple's trust evaluation refuses under any root since \(PlatformFeature.strictServerCertificates.since) (under public roots since \(PlatformFeature.platformRejectsSHA1AndSmallRSA.since)): \(overridden), or it evaluates trust with a stack other than Apple's"
        case .rsa1024:
            return
                "the client accepted a certificate with an RSA-1024 key, which Apple's trust evaluation refuses since \(PlatformFeature.platformRejectsSHA1AndSmallRSA.since) (RSA keys must be 2048 bits or more): \(overridden), or it evaluates trust with a stack other than Apple's"
        case .noSAN:
            return
                "the client accepted a certificate that names the host only in its CN; Apple's trust evaluation ignores the CN since \(PlatformFeature.strictServerCertificates.since): its host name check is disabled (validatesDomainName = NO) or it evaluates trust with a stack that still falls back to the CN"
        case .overlongValidity:
            return
                "the client accepted a certificate valid for more than 825 days, which Apple's trust evaluation refuses: \(overridden), or it evaluates trust with a stack other than Apple's"
        case .tls10Only:
            return
                "the client completed a TLS 1.0 handshake: ATS does not protect this connection (NSAllowsArbitraryLoads, or NSExceptionMinimumTLSVersion TLSv1.0 for the host), or the app uses a TLS stack of its own instead of URLSession"
        case .tls11Only:
            return
                "the client completed a TLS 1.1 handshake: ATS does not protect this connection (NSAllowsArbitraryLoads, or NSExceptionMinimumTLSVersion TLSv1.1 or lower for the host), or the app uses a TLS stack of its own instead of URLSession"
        case .staticRSAOnly:
            return
                "the client completed a handshake without forward secrecy (RSA key exchange): ATS does not protect this connection (NSAllowsArbitraryLoads, or NSExceptionRequiresForwardSecrecy NO for the host), or the app uses a TLS stack of its own instead of URLSession"
        }
    }

    /// What a correct client on an ATS-protected host reports for this challenge (ATS reference
    /// §4.3): every trust failure is `-1200 [3:-9802]` ("ATS failed system trust"); a server that
    /// speaks only TLS 1.0/1.1 answers the client's hello with a protocol_version alert (`-9836`); a
    /// server with static-RSA suites only finds no suite in common and sends handshake_failure (`-9824`).
    public var atsRefusal: ChallengeRefusal {
        switch category {
        case .certificate: ChallengeRefusal(code: .secureConnectionFailed, streamCode: -9802, name: "errSSLFatalAlert")
        case .handshake:
            self == .staticRSAOnly
                ? ChallengeRefusal(code: .secureConnectionFailed, streamCode: -9824, name: "errSSLPeerHandshakeFail")
                : ChallengeRefusal(code: .secureConnectionFailed, streamCode: -9836, name: "errSSLPeerProtocolVersion")
        }
    }

    /// What a correct client reports on a host ATS does not govern (arbitrary loads, an exception
    /// with `NSExceptionAllowsInsecureHTTPLoads`) when its delegate leaves trust to the system
    /// (ATS reference §4.3, §3.6). Nil for the handshake kinds: outside ATS the system still
    /// negotiates TLS 1.0/1.1 and RSA key exchange, so accepting them there is not a trust failure.
    /// Where the reference is unsure this follows the project's upstream emulation (`UpstreamVerdict`):
    /// a self-signed leaf is "no root" (-9813); a not-yet-valid one is -1201, Apple's description of
    /// `NSURLErrorServerCertificateHasBadDate` being "expired, or is not yet valid".
    public var defaultTrustRefusal: ChallengeRefusal? {
        switch self {
        case .wrongHost, .noSAN:
            ChallengeRefusal(code: .serverCertificateUntrusted, streamCode: -9843, name: "errSSLHostNameMismatch")
        case .selfSigned:
            ChallengeRefusal(code: .serverCertificateUntrusted, streamCode: -9813, name: "errSSLNoRootCert")
        case .untrustedCA, .sha1Signature, .rsa1024, .overlongValidity:
            ChallengeRefusal(code: .serverCertificateUntrusted, streamCode: -9807, name: "errSSLXCertChainInvalid")
        case .expired:
            ChallengeRefusal(code: .serverCertificateHasBadDate, streamCode: -9814, name: "errSSLCertExpired")
        case .notYetValid:
            ChallengeRefusal(code: .serverCertificateHasBadDate, streamCode: -9815, name: "errSSLCertNotYetValid")
        case .tls10Only, .tls11Only, .staticRSAOnly:
            nil
        }
    }

    /// Every kind of `category`, in declaration order.
    public static func all(_ category: Category) -> [ChallengeKind] { allCases.filter { $0.category == category } }
}

/// The error a correct Apple client reports when it refuses a challenge: an `NSURLErrorDomain` code
/// over a `kCFStreamErrorDomainSSL` (domain 3) status.
public struct ChallengeRefusal: Sendable, Hashable, CustomStringConvertible {
    /// The NSURLErrorDomain code the app sees.
    public let code: NSURLErrorCode
    /// The Secure Transport status in `_kCFStreamErrorCodeKey`.
    public let streamCode: Int
    /// The status's constant name (`errSSLFatalAlert`).
    public let name: String

    public init(code: NSURLErrorCode, streamCode: Int, name: String) {
        self.code = code
        self.streamCode = streamCode
        self.name = name
    }

    /// `NSURLErrorDomain -1200 [3:-9802] (NSURLErrorSecureConnectionFailed, errSSLFatalAlert)`.
    public var description: String {
        "NSURLErrorDomain \(code.rawValue) [3:\(streamCode)] (\(code.constantName), \(name))"
    }
}
