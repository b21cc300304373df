import ATSPolicy
import ATSProxyCore

/// What ATS made of one flow, as the live page and the HAR's `_atsOutcome` name it. Derived from a
/// finished `RequestRecord`; pure.
public enum FlowOutcome: String, Sendable, Codable, CaseIterable {
    /// ATS applied and the load went through.
    case allowed
    /// ATS stopped the load: a forbidden cleartext load (-1022), a handshake that misses the
    /// host's requirements (-1200 with a `3:` stream error), or a trust failure under ATS.
    case blocked
    /// The load failed for a reason that is not ATS's: DNS, refused, timeout, reset, or a
    /// trust failure where ATS is not in force.
    case failed
    /// Violated ATS but let through (`--mode report`).
    case reported
    /// ATS is not in force for this load (an exception or local networking lifted it) and it
    /// completed.
    case ignored
    /// `--challenge`: the client refused the forged server the proxy presented (the expected result). Not an
    /// ATS verdict.
    case challengePass = "challenge-pass"
    /// `--challenge`: the client sent a request through a forged server (answered 502, never forwarded): its
    /// trust evaluation is disabled or overridden. Not an ATS verdict, but a finding.
    case challengeFinding = "challenge-finding"

    /// The outcome of `record`.
    public init(_ record: RequestRecord) {
        switch record.result {
        case .completed: self = record.atsRequired ? .allowed : .ignored
        case .blockedCleartext: self = .blocked
        case .reported: self = .reported
        case .failed: self = Self.isATSFailure(record) ? .blocked : .failed
        case .clientUntrustedCA: self = .failed  // A set-up failure of the client, not an ATS verdict.
        case .challengeRefused: self = .challengePass
        case .challengeAccepted: self = .challengeFinding
        }
    }

    /// Whether a failed record failed because of ATS rather than the network.
    static func isATSFailure(_ record: RequestRecord) -> Bool {
        guard let code = record.errorCode else { return false }
        switch code {
        case NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue: return true
        case NSURLErrorCode.secureConnectionFailed.rawValue: return record.streamError?.hasPrefix("3:") ?? true
        case (-1206)...(-1201): return record.atsRequired
        default: return false
        }
    }

    /// `-1022`, `-1200 [3:-9836]`, or nil when the record carries no error code.
    public static func code(of record: RequestRecord) -> String? {
        guard let error = record.errorCode else { return nil }
        return "\(error)" + (record.streamError.map { " [\($0)]" } ?? "")
    }
}
