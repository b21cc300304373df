/// The lower-level error CFNetwork attaches to a failed load (`_kCFStreamErrorDomainKey` and
/// `_kCFStreamErrorCodeKey`): a domain and a code, written `domain:code` in console lines and logs (`3:-9836`).
///
/// A typed value so that readers ask what it is (`isSecureTransport`) instead of matching text. It encodes as
/// the same `domain:code` string the request log has always carried, so logs written earlier still decode.
public struct StreamError: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The domains the proxy reports.
    public enum Domain {
        /// `kCFStreamErrorDomainPOSIX`: a socket error (`1:61` is a refused connection).
        public static let posix = 1
        /// `kCFStreamErrorDomainSSL`: Secure Transport's `OSStatus` codes (-98xx), which ATS failures carry.
        public static let secureTransport = 3
    }

    /// The error domain (`Domain.posix`, `Domain.secureTransport`, or another CFNetwork domain number).
    public var domain: Int
    /// The code within the domain (for Secure Transport a negative `OSStatus`).
    public var code: Int

    /// The pair as given; any domain and code are representable.
    public init(domain: Int, code: Int) {
        self.domain = domain
        self.code = code
    }

    /// A Secure Transport error (`3:code`): a TLS handshake or trust failure.
    public static func secureTransport(_ code: Int) -> StreamError {
        StreamError(domain: Domain.secureTransport, code: code)
    }

    /// Parses `domain:code` (both decimal integers, the code possibly negative); nil for anything else.
    public init?(parsing text: some StringProtocol) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let domain = Int(parts[0]), let code = Int(parts[1]) else { return nil }
        self.init(domain: domain, code: code)
    }

    /// Whether the failure is Secure Transport's (the TLS layer's), which is what an ATS violation reports.
    public var isSecureTransport: Bool { domain == Domain.secureTransport }

    /// `domain:code`, as CFNetwork prints it (without brackets).
    public var description: String { "\(domain):\(code)" }

    /// Decodes the `domain:code` string; any other text is a decoding error naming it.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let parsed = StreamError(parsing: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "'\(text)' is not a stream error (domain:code)")
        }
        self = parsed
    }

    /// Encodes as the `domain:code` string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
