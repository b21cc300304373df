import ATSPolicy

/// The one word for what became of a load, shared by every output: the console line, the JSON log (`outcome`),
/// the session report (json, html, junit), the HAR's `_atsOutcome` and the live page. Derived from a finished
/// `RequestRecord` (pure); the device's code for it is `code(of:)`.
///
/// The raw values are the words printed and written; they are stable (other tools read them).
public enum LoadOutcome: String, Sendable, Codable, CaseIterable {
    /// ATS was in force and the load went through.
    case allowed
    /// The load went through because ATS was not in force for it: an exception, an arbitrary-loads key or local
    /// networking lifted it.
    case allowedByException = "allowed by exception"
    /// Refused before any byte reached the origin: a cleartext load ATS forbids (-1022), or a target the proxy
    /// does not serve (its own machine for a client elsewhere, another origin inside a tunnel: -1004; a scheme
    /// it does not proxy: -1002).
    case blocked
    /// A TLS, ATS or certificate-trust failure (-1200, -1201…-1206), including a client that refuses the proxy's CA.
    case failed
    /// The network failed, not the policy: the name did not resolve (-1003), the connection was refused (-1004),
    /// timed out (-1001) or was lost (-1005), the origin's answer was not HTTP (-1011), or the client cancelled
    /// (-999).
    case networkError = "network error"
    /// `--mode report`: the load broke ATS and was let through; the code is what a device would have reported.
    case reported
    /// A CONNECT tunnelled without interception (`--passthrough`, pinned domains) after its TLS was judged.
    case passthrough
    /// Left alone by the host filter (`--ignore-hosts`, `--allow-hosts`): never judged, only counted.
    case ignored
    /// `--challenge`: the client refused the forged server the proxy presented (the expected result).
    case challengePassed = "challenge passed"
    /// `--challenge`: the client sent a request through a forged server (answered 502, never forwarded).
    case challengeFinding = "challenge finding"

    /// The outcome of `record`.
    public init(_ record: RequestRecord) {
        switch record.result {
        case .completed:
            if record.method == "CONNECT" {
                // Only a passthrough tunnel's CONNECT completes as a record of its own.
                self = .passthrough
            } else {
                self = record.atsRequired ? .allowed : .allowedByException
            }
        case .blockedCleartext, .refused: self = .blocked
        case .reported: self = .reported
        case .clientUntrustedCA: self = .failed
        case .challengeRefused: self = .challengePassed
        case .challengeAccepted: self = .challengeFinding
        case .failed: self = Self.failure(code: record.errorCode)
        }
    }

    /// `failed` for the TLS, ATS and trust codes, `blocked` for -1022, `network error` for everything else
    /// (a failure without a code included).
    static func failure(code: Int?) -> LoadOutcome {
        guard let code else { return .networkError }
        switch code {
        case NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue: return .blocked
        case NSURLErrorCode.unsupportedURL.rawValue: return .blocked
        case (-1206)...(-1200): return .failed
        default: return .networkError
        }
    }

    /// The device's code for `record`: `-1022`, `-1200 [3:-9836]`, `-1004`; nil when it has none (a completed
    /// load, a challenge).
    public static func code(of record: RequestRecord) -> String? {
        guard let error = record.errorCode else { return nil }
        return "\(error)" + (record.streamError.map { " [\($0)]" } ?? "")
    }

    /// The word with hyphens for spaces (`allowed-by-exception`): for CSS classes, JUnit types and URLs.
    public var slug: String { rawValue.replacingOccurrences(of: " ", with: "-") }

    /// Whether `record` broke ATS: a cleartext load it forbids, a load let through in report mode, or a TLS
    /// failure on a host where ATS is in force (a -1200 from the handshake's stream domain 3, or a trust failure
    /// under ATS). Connection faults, refusals of the proxy's own and a client refusing the proxy's CA are not.
    public static func breaksATS(_ record: RequestRecord) -> Bool {
        switch record.result {
        case .blockedCleartext, .reported: return true
        case .completed, .refused, .clientUntrustedCA, .challengeRefused, .challengeAccepted: return false
        case .failed:
            guard let code = record.errorCode else { return false }
            switch code {
            case NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue: return true
            case NSURLErrorCode.secureConnectionFailed.rawValue: return record.streamError?.isSecureTransport ?? true
            case (-1206)...(-1201): return record.atsRequired
            default: return false
            }
        }
    }
}
