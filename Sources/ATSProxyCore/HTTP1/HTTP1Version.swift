/// An HTTP/1.x protocol version as it appears on a start line (`HTTP/1.1`).
public struct HTTP1Version: Hashable, Sendable, CustomStringConvertible {
    /// The major version; the parser only accepts 1.
    public var major: Int
    /// The minor version: 0 or 1 in practice; other digits parse and behave like 1.1 (RFC 9110 §2.5).
    public var minor: Int

    /// Creates a version from its two digits.
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// `HTTP/1.0`.
    public static let http10 = HTTP1Version(major: 1, minor: 0)
    /// `HTTP/1.1`.
    public static let http11 = HTTP1Version(major: 1, minor: 1)

    /// True for 1.1 and later minor versions: persistent connections by default, Host required.
    public var isAtLeastHTTP11: Bool { major > 1 || (major == 1 && minor >= 1) }

    /// `HTTP/<major>.<minor>`.
    public var description: String {
        switch (major, minor) {
        case (1, 1): return "HTTP/1.1"
        case (1, 0): return "HTTP/1.0"
        default: return "HTTP/\(major).\(minor)"
        }
    }

    /// Parses exactly `HTTP/DIGIT.DIGIT`, without allocating.
    init?(bytes: ArraySlice<UInt8>) {
        guard bytes.count == 8, bytes.starts(with: "HTTP/".utf8) else { return nil }
        let major = bytes[bytes.startIndex + 5]
        let dot = bytes[bytes.startIndex + 6]
        let minor = bytes[bytes.startIndex + 7]
        guard HTTP1ASCII.isDigit(major), dot == UInt8(ascii: "."), HTTP1ASCII.isDigit(minor) else { return nil }
        self.init(major: Int(major - UInt8(ascii: "0")), minor: Int(minor - UInt8(ascii: "0")))
    }
}
