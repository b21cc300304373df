import Foundation

/// The scheme that ATS distinguishes: cleartext or TLS.
public enum URLScheme: String, Sendable, Codable {
    /// `http://` and `ws://`.
    case http
    /// `https://` and `wss://`.
    case https

    /// Maps a URL scheme; WebSocket schemes map to their HTTP equivalents, anything else is nil.
    public init?(urlScheme: String) {
        switch urlScheme.lowercased() {
        case "http", "ws": self = .http
        case "https", "wss": self = .https
        default: return nil
        }
    }

    /// The default port for the scheme.
    public var defaultPort: Int {
        switch self {
        case .http: 80
        case .https: 443
        }
    }
}

/// What the policy engine needs from a URL: scheme, host as ATS sees it, port.
///
/// The host is lower-cased (URL hosts are case-insensitive and ATS compares the lower-cased form),
/// keeps a trailing dot (significant for exception keys), and loses IPv6 brackets.
public struct RequestTarget: Sendable, Hashable, Codable, CustomStringConvertible {
    public let scheme: URLScheme
    public let host: String
    public let port: Int
    /// The URL as given, for messages and error UserInfo.
    public let url: String

    /// Why a string is not a URL the engine can judge.
    public enum ParseError: Error, Equatable, CustomStringConvertible {
        /// Not an absolute URL with a scheme and host.
        case notAbsolute(String)
        /// An absolute URL whose scheme ATS does not govern.
        case unsupportedScheme(String, scheme: String)
        /// The port is not a number between 1 and 65535.
        case badPort(String)

        public var description: String {
            switch self {
            case .notAbsolute(let text):
                "'\(text)' is not an absolute http:// or https:// URL (expected e.g. https://api.example.com/path)"
            case .unsupportedScheme(let text, let scheme):
                "'\(text)' uses the scheme '\(scheme)'; ATS governs only http, https, ws and wss URLs"
            case .badPort(let text):
                "'\(text)' has an invalid port (expected 1-65535)"
            }
        }
    }

    public init(scheme: URLScheme, host: String, port: Int? = nil, url: String? = nil) {
        self.scheme = scheme
        self.host = Self.canonicalHost(host)
        self.port = port ?? scheme.defaultPort
        self.url = url ?? "\(scheme.rawValue)://\(Self.uriHost(self.host))\(port.map { ":\($0)" } ?? "")/"
    }

    /// Parses an absolute http/https/ws/wss URL.
    public init(parsing text: String) throws(ParseError) {
        // Byte-level parsing: this runs for every proxied request, and Foundation's range(of:)
        // and Character properties showed up in the proxy's profile.
        let bytes = text.utf8
        guard let schemeEnd = Self.firstSchemeSeparator(in: bytes) else { throw .notAbsolute(text) }
        let schemeBytes = bytes[bytes.startIndex..<schemeEnd]
        guard !schemeBytes.isEmpty, schemeBytes.allSatisfy(Self.isSchemeByte) else { throw .notAbsolute(text) }
        let schemeText = String(text[..<schemeEnd])
        guard let scheme = URLScheme(urlScheme: schemeText) else {
            throw .unsupportedScheme(text, scheme: schemeText.lowercased())
        }
        let restStart = bytes.index(schemeEnd, offsetBy: 3)
        var rest = text[restStart...]
        if let end = rest.utf8.firstIndex(where: {
            $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
        }) {
            rest = rest[..<end]
        }
        if let at = rest.utf8.lastIndex(of: UInt8(ascii: "@")) { rest = rest[rest.utf8.index(after: at)...] }
        var hostText: Substring
        var portText: Substring?
        if rest.utf8.first == UInt8(ascii: "[") {
            guard let close = rest.utf8.firstIndex(of: UInt8(ascii: "]")) else { throw .notAbsolute(text) }
            hostText = rest[rest.utf8.index(after: rest.startIndex)..<close]
            let after = rest[rest.utf8.index(after: close)...]
            if after.utf8.first == UInt8(ascii: ":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw .notAbsolute(text)
            }
            guard IPAddress(parsing: String(hostText)) != nil else { throw .notAbsolute(text) }
        } else if let colon = rest.utf8.lastIndex(of: UInt8(ascii: ":")) {
            hostText = rest[..<colon]
            portText = rest[rest.utf8.index(after: colon)...]
            // More than one colon outside brackets: an IPv6 literal without its brackets.
            guard !hostText.utf8.contains(UInt8(ascii: ":")) else { throw .notAbsolute(text) }
        } else {
            hostText = rest
        }
        guard !hostText.isEmpty, !Self.containsWhitespace(hostText) else { throw .notAbsolute(text) }
        var port: Int?
        if let portText, !portText.isEmpty {
            guard portText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let value = Int(portText), (1...65535).contains(value)
            else { throw .badPort(text) }
            port = value
        }
        self.init(scheme: scheme, host: String(hostText), port: port, url: text)
    }

    /// The index of the first `://`.
    private static func firstSchemeSeparator(in bytes: String.UTF8View) -> String.Index? {
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if bytes[index] == UInt8(ascii: ":") {
                let slash1 = bytes.index(after: index)
                if slash1 != bytes.endIndex, bytes[slash1] == UInt8(ascii: "/") {
                    let slash2 = bytes.index(after: slash1)
                    if slash2 != bytes.endIndex, bytes[slash2] == UInt8(ascii: "/") { return index }
                }
            }
            index = bytes.index(after: index)
        }
        return nil
    }

    /// ASCII letters, digits, `+`, `-` and `.`.
    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
            return true
        default:
            return false
        }
    }

    /// ASCII white space by byte; non-ASCII text falls back to Unicode's definition.
    private static func containsWhitespace(_ text: Substring) -> Bool {
        var nonASCII = false
        for byte in text.utf8 {
            switch byte {
            case 0x09...0x0D, 0x20: return true
            case 0x80...: nonASCII = true
            default: continue
            }
        }
        return nonASCII && text.contains(where: \.isWhitespace)
    }

    /// The host as the engine and the proxy compare it: lower-cased, and a legacy IPv4 number (`127.1`,
    /// `0177.0.0.1`, `2130706433`, `0x7f000001`) rewritten as the dotted-decimal address a socket layer
    /// would connect to, as URL parsers do. Names and IPv6 literals are only lower-cased.
    public static func canonicalHost(_ host: String) -> String {
        let lowered = host.lowercased()
        // Only a host made of hex digits, `x` and dots can be a legacy number: names skip the parse.
        guard
            lowered.utf8.allSatisfy({
                ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                    || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f"))
                    || $0 == UInt8(ascii: "x") || $0 == UInt8(ascii: ".")
            }), let legacy = IPAddress.parseLegacyIPv4(Substring(lowered))
        else { return lowered }
        let canonical = IPAddress(bytes: legacy).description
        return canonical == lowered ? lowered : canonical
    }

    /// `host` as a URL or `host:port` authority spells it: an IPv6 literal in brackets (RFC 3986 §3.2.2).
    public static func uriHost(_ host: String) -> String {
        host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
    }

    /// The same scheme, host and port under another URL (a different path on the same origin).
    public func withURL(_ url: String) -> RequestTarget {
        RequestTarget(scheme: scheme, normalizedHost: host, port: port, url: url)
    }

    /// Memberwise, for a host that is lower-cased already.
    private init(scheme: URLScheme, normalizedHost: String, port: Int, url: String) {
        self.scheme = scheme
        self.host = normalizedHost
        self.port = port
        self.url = url
    }

    /// The IP address if the host is an IP literal (legacy IPv4 numbers were canonicalized already).
    public var ipAddress: IPAddress? { IPAddress(parsing: host) }

    public var description: String { url }
}
