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
        self.host = host.lowercased()
        self.port = port ?? scheme.defaultPort
        let hostPart = self.host.contains(":") ? "[\(self.host)]" : self.host
        self.url = url ?? "\(scheme.rawValue)://\(hostPart)\(port.map { ":\($0)" } ?? "")/"
    }

    /// Parses an absolute http/https/ws/wss URL.
    public init(parsing text: String) throws(ParseError) {
        guard let schemeEnd = text.range(of: "://") else { throw .notAbsolute(text) }
        let schemeText = String(text[..<schemeEnd.lowerBound])
        guard !schemeText.isEmpty,
            schemeText.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { throw .notAbsolute(text) }
        guard let scheme = URLScheme(urlScheme: schemeText) else {
            throw .unsupportedScheme(text, scheme: schemeText.lowercased())
        }
        var rest = text[schemeEnd.upperBound...]
        if let end = rest.firstIndex(where: { "/?#".contains($0) }) { rest = rest[..<end] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var hostText: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .notAbsolute(text) }
            hostText = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty { throw .notAbsolute(text) }
            guard IPAddress(parsing: String(hostText)) != nil else { throw .notAbsolute(text) }
        } else if let colon = rest.lastIndex(of: ":") {
            hostText = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
            // More than one colon outside brackets: an IPv6 literal without its brackets.
            guard !hostText.contains(":") else { throw .notAbsolute(text) }
        } else {
            hostText = rest
        }
        guard !hostText.isEmpty, !hostText.contains(where: \.isWhitespace) else {
            throw .notAbsolute(text)
        }
        var port: Int?
        if let portText, !portText.isEmpty {
            guard portText.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(portText),
                (1...65535).contains(value)
            else { throw .badPort(text) }
            port = value
        }
        self.init(scheme: scheme, host: String(hostText), port: port, url: text)
    }

    /// The IP address if the host is an IP literal.
    public var ipAddress: IPAddress? { IPAddress(parsing: host) }

    public var description: String { url }
}
