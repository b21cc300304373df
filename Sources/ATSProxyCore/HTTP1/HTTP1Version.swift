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
    public var description: String { "HTTP/\(major).\(minor)" }

    /// Parses exactly `HTTP/DIGIT.DIGIT`.
    init?<Bytes: Collection<UInt8>>(bytes: Bytes) {
        let expected: [UInt8] = Array("HTTP/".utf8)
        guard bytes.count == 8, bytes.starts(with: expected) else { return nil }
        let tail = Array(bytes.dropFirst(5))
        guard HTTP1ASCII.isDigit(tail[0]), tail[1] == UInt8(ascii: "."), HTTP1ASCII.isDigit(tail[2]) else {
            return nil
        }
        self.init(major: Int(tail[0] - UInt8(ascii: "0")), minor: Int(tail[2] - UInt8(ascii: "0")))
    }
}
