import Foundation

/// The one user name and password a client must present to use the proxy (`--proxy-auth user:password`): in
/// `Proxy-Authorization: Basic …` on HTTP (absolute-form requests and CONNECT), and in the username/password
/// subnegotiation of SOCKS5 (RFC 1929). The values are never logged; `description` names the user only.
public struct ProxyCredentials: Sendable, Equatable, CustomStringConvertible {
    public let user: String
    public let password: String

    /// `user:password` (the first colon separates them; the password may contain colons). Nil when the user is
    /// empty, when there is no colon, or when either part is longer than SOCKS5 allows (255 bytes).
    public init?(parsing text: String) {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let user = String(text[..<colon])
        let password = String(text[text.index(after: colon)...])
        guard !user.isEmpty, user.utf8.count <= 255, password.utf8.count <= 255 else { return nil }
        self.user = user
        self.password = password
    }

    public var description: String { "user \(user)" }

    /// Whether a `Proxy-Authorization` value is `Basic` with these credentials (the scheme is case-insensitive).
    public func acceptsBasic(_ value: String?) -> Bool {
        guard let value else { return false }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic",
            let decoded = Data(base64Encoded: String(parts[1]).trimmingCharacters(in: .whitespaces))
        else { return false }
        let bytes = [UInt8](decoded)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return false }
        return accepts(user: Array(bytes[..<colon]), password: Array(bytes[(colon + 1)...]))
    }

    /// Whether `user` and `password` (as sent) are these credentials. The comparison does not stop at the first
    /// differing byte.
    public func accepts(user: [UInt8], password: [UInt8]) -> Bool {
        // Both are compared whatever the first gives.
        let userMatches = Self.same(user, Array(self.user.utf8))
        let passwordMatches = Self.same(password, Array(self.password.utf8))
        return userMatches && passwordMatches
    }

    /// Byte equality over the whole of both values.
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
    }
}
