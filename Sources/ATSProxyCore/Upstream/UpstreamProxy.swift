import Foundation

/// The HTTP proxy that every upstream connection goes through (`--upstream-proxy
/// http://[user:pass@]host:port`): a corporate proxy, or Charles/Proxyman kept in the chain.
///
/// Every upstream connection, https or cleartext, intercepted or passed through, is a
/// `CONNECT origin:port` tunnel through it; the origin's name is sent unresolved (the upstream
/// proxy resolves it). The proxy itself is transport: it is never judged by ATS.
///
/// `description` never shows the password; `credentialsSummary` names the user only.
public struct UpstreamProxy: Sendable, Equatable, CustomStringConvertible {
    /// User name and password for `Proxy-Authorization: Basic`.
    public struct Credentials: Sendable, Equatable {
        public var user: String
        public var password: String

        /// Creates credentials.
        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }

        /// Parses `user:password` (the password may contain colons; percent-escapes are not decoded).
        public init?(colonSeparated text: String) {
            guard let colon = text.firstIndex(of: ":") else { return nil }
            self.init(user: String(text[..<colon]), password: String(text[text.index(after: colon)...]))
        }
    }

    /// A bad `--upstream-proxy` value; the text names what is wrong (never the password).
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// How every failure detail about the upstream proxy starts, so a session can tell an upstream
    /// proxy's refusal (kept as the detail of a -1004) from an origin's plain TCP refusal.
    public static let detailPrefix = "upstream proxy "

    /// The proxy's host name or IP address (IPv6 without brackets).
    public var host: String
    public var port: UInt16
    /// Sent as `Proxy-Authorization: Basic …` on every CONNECT when set.
    public var credentials: Credentials?

    /// Creates an upstream proxy.
    public init(host: String, port: UInt16, credentials: Credentials? = nil) {
        self.host = host
        self.port = port
        self.credentials = credentials
    }

    /// Parses `http://[user:pass@]host:port` (user and password percent-decoded). The scheme must be
    /// `http` and the port is required; a path other than `/`, a query or a fragment is refused.
    public init(parsing text: String) throws(ParseError) {
        let shown = Self.redacted(text)
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw ParseError(description: "'\(shown)' is not a URL such as http://proxy.example:3128")
        }
        guard scheme == "http" else {
            throw ParseError(description: "'\(shown)': only http:// upstream proxies are supported")
        }
        guard var host = components.host, !host.isEmpty else {
            throw ParseError(description: "'\(shown)' names no host")
        }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard let port = components.port, (1...65535).contains(port) else {
            throw ParseError(description: "'\(shown)' needs a port, such as http://\(host):3128")
        }
        guard components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil
        else {
            throw ParseError(description: "'\(shown)': an upstream proxy URL has no path, query or fragment")
        }
        self.host = host
        self.port = UInt16(port)
        if let user = components.user {
            credentials = Credentials(user: user, password: components.password ?? "")
        }
    }

    /// `http://host:port`, with `user:***@` when credentials are set.
    public var description: String {
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        guard let credentials else { return "http://\(authority)" }
        return "http://\(credentials.user):***@\(authority)"
    }

    /// What was sent, for failure details: "no credentials" or "credentials for user 'NAME'".
    public var credentialsSummary: String {
        guard let credentials else { return "no credentials" }
        return "credentials for user '\(credentials.user)'"
    }

    /// The `CONNECT host:port HTTP/1.1` request head that opens a tunnel to the origin, with `Host`
    /// and, when credentials are set, `Proxy-Authorization: Basic`.
    public func connectRequest(host originHost: String, port originPort: Int) -> [UInt8] {
        let authority = HTTP1Authority(host: originHost, port: originPort)
        var headers = HTTPFields()
        headers.append(name: "Host", value: authority.description)
        if let credentials {
            let token = Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
            headers.append(name: "Proxy-Authorization", value: "Basic \(token)")
        }
        let head = HTTPRequestHead(method: "CONNECT", target: .authority(authority), headers: headers)
        var bytes: [UInt8] = []
        HTTP1Serializer.writeRequestHead(head, into: &bytes)
        return bytes
    }

    /// `text` with any password in its userinfo replaced by `***`.
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@"), let schemeEnd = text.range(of: "://"), schemeEnd.upperBound < at
        else { return text }
        let userinfo = text[schemeEnd.upperBound..<at]
        guard let colon = userinfo.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }
}
