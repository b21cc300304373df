import ATSPolicy

/// The `host[:port]` part of a target or Host field; the host keeps its case, IPv6 loses brackets.
public struct HTTP1Authority: Hashable, Sendable, CustomStringConvertible {
    /// The host as written, without IPv6 brackets.
    public var host: String
    /// The port if one was written (an empty port is treated as absent, RFC 3986 §3.2.3).
    public var port: Int?

    /// Creates an authority.
    public init(host: String, port: Int?) {
        self.host = host
        self.port = port
    }

    /// `host[:port]`, with brackets around an IPv6 literal.
    public var description: String {
        let hostText = RequestTarget.uriHost(host)
        return port.map { "\(hostText):\($0)" } ?? hostText
    }

    /// Parses `uri-host [ ":" port ]`; no userinfo, no empty host; a name must be a DNS name or IPv4 number
    /// (`isHostName`), a bracketed literal a valid IPv6 address.
    init?<Bytes: Collection<UInt8>>(bytes: Bytes) {
        var hostBytes = bytes[...]
        var portBytes: Bytes.SubSequence?
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")),
                bytes.distance(from: bytes.startIndex, to: close) > 1
            else {
                return nil
            }
            hostBytes = bytes[bytes.index(after: bytes.startIndex)..<close]
            let rest = bytes[bytes.index(after: close)...]
            guard hostBytes.allSatisfy({ HTTP1ASCII.hexValue($0) != nil || $0 == HTTP1ASCII.colon || $0 == 0x2E }),
                IPAddress(parsing: String(decoding: hostBytes, as: UTF8.self)) != nil
            else { return nil }
            if !rest.isEmpty {
                guard rest.first == HTTP1ASCII.colon else { return nil }
                portBytes = rest.dropFirst()
            }
        } else {
            if let colon = bytes.firstIndex(of: HTTP1ASCII.colon) {
                hostBytes = bytes[..<colon]
                portBytes = bytes[bytes.index(after: colon)...]
            }
            guard Self.isHostName(hostBytes) else { return nil }
        }
        var port: Int?
        if let portBytes, !portBytes.isEmpty {
            guard portBytes.count <= 5, portBytes.allSatisfy(HTTP1ASCII.isDigit) else { return nil }
            let value = portBytes.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            guard value <= 65535 else { return nil }
            port = value
        }
        self.init(host: String(decoding: hostBytes, as: UTF8.self), port: port)
    }

    /// Whether `bytes` is a host the proxy can resolve and name in a certificate: a DNS name (labels of 1 to 63
    /// letters, digits, `-` or `_`, at most 253 bytes, one optional trailing dot) or an IPv4 number (which is
    /// such a name too). RFC 3986 `reg-name` also allows percent-encoding and sub-delimiters (`ex%61mple.test`,
    /// `a!b`), but no resolver or dNSName takes those: they are refused before any leaf is minted.
    static func isHostName<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        var total = 0
        var labelLength = 0
        var endsWithDot = false
        for byte in bytes {
            total += 1
            endsWithDot = false
            switch byte {
            case UInt8(ascii: "."):
                guard labelLength > 0 else { return false }
                labelLength = 0
                endsWithDot = true
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                labelLength += 1
                guard labelLength <= 63 else { return false }
            default:
                return false
            }
        }
        return (labelLength > 0 || endsWithDot) && total - (endsWithDot ? 1 : 0) <= 253
    }

    /// Whether two authorities name the same endpoint: host case-insensitively, ports after defaults.
    func matches(_ other: HTTP1Authority, defaultPort: Int?) -> Bool {
        HTTP1ASCII.equalsIgnoringCase(host.utf8, other.host.utf8)
            && (port ?? defaultPort) == (other.port ?? defaultPort)
    }
}

/// A request target in one of the four forms of RFC 9112 §3.2.
public enum HTTP1RequestTarget: Hashable, Sendable, CustomStringConvertible {
    /// `/path?query`, used inside tunnels and towards origin servers.
    case origin(String)
    /// `scheme://authority/path?query`, what clients send to an explicit proxy for `http://`.
    /// `pathAndQuery` is empty when the URI has no path.
    case absolute(scheme: String, authority: HTTP1Authority, pathAndQuery: String)
    /// `host:port`, only with CONNECT.
    case authority(HTTP1Authority)
    /// `*`, only with OPTIONS.
    case asterisk

    /// The target as it goes on the request line.
    public var description: String {
        switch self {
        case .origin(let path): path
        case .absolute(let scheme, let authority, let pathAndQuery): "\(scheme)://\(authority)\(pathAndQuery)"
        case .authority(let authority): authority.description
        case .asterisk: "*"
        }
    }

    /// The default port of the http(s)/ws(s) schemes, nil for others.
    static func defaultPort(scheme: String) -> Int? {
        if HTTP1ASCII.equalsIgnoringCase(scheme.utf8, "http".utf8)
            || HTTP1ASCII.equalsIgnoringCase(scheme.utf8, "ws".utf8)
        {
            return 80
        }
        if HTTP1ASCII.equalsIgnoringCase(scheme.utf8, "https".utf8)
            || HTTP1ASCII.equalsIgnoringCase(scheme.utf8, "wss".utf8)
        {
            return 443
        }
        return nil
    }

    /// Parses a target for `method`; the form must suit the method (CONNECT ↔ authority, `*` ↔ OPTIONS).
    static func parse(_ bytes: ArraySlice<UInt8>, method: String) throws(HTTP1ParseError) -> HTTP1RequestTarget {
        guard !bytes.isEmpty, bytes.allSatisfy(HTTP1ASCII.isVisible), !bytes.contains(UInt8(ascii: "#")) else {
            throw HTTP1ParseError(.invalidTarget)
        }
        if method == "CONNECT" {
            guard let authority = HTTP1Authority(bytes: bytes), authority.port != nil else {
                throw HTTP1ParseError(.invalidTarget)
            }
            return .authority(authority)
        }
        if bytes.first == HTTP1ASCII.slash {
            return .origin(String(decoding: bytes, as: UTF8.self))
        }
        if bytes.count == 1 && bytes.first == UInt8(ascii: "*") {
            guard method == "OPTIONS" else { throw HTTP1ParseError(.invalidTarget) }
            return .asterisk
        }
        return try parseAbsolute(bytes)
    }

    private static func parseAbsolute(_ bytes: ArraySlice<UInt8>) throws(HTTP1ParseError) -> HTTP1RequestTarget {
        guard let colon = bytes.firstIndex(of: HTTP1ASCII.colon) else { throw HTTP1ParseError(.invalidTarget) }
        let scheme = bytes[..<colon]
        guard let first = scheme.first, (first | 0x20) >= UInt8(ascii: "a"), (first | 0x20) <= UInt8(ascii: "z"),
            scheme.allSatisfy({
                HTTP1ASCII.isTokenCharacter($0) && $0 != UInt8(ascii: "_") && $0 != UInt8(ascii: "!")
            })
        else { throw HTTP1ParseError(.invalidTarget) }
        let rest = bytes[(colon + 1)...]
        guard rest.starts(with: [HTTP1ASCII.slash, HTTP1ASCII.slash]) else { throw HTTP1ParseError(.invalidTarget) }
        let afterSlashes = rest.dropFirst(2)
        let end =
            afterSlashes.firstIndex { $0 == HTTP1ASCII.slash || $0 == UInt8(ascii: "?") } ?? afterSlashes.endIndex
        guard let authority = HTTP1Authority(bytes: afterSlashes[..<end]) else {
            throw HTTP1ParseError(.invalidTarget)
        }
        let pathAndQuery = String(decoding: afterSlashes[end...], as: UTF8.self)
        return .absolute(
            scheme: String(decoding: scheme, as: UTF8.self), authority: authority, pathAndQuery: pathAndQuery)
    }
}
