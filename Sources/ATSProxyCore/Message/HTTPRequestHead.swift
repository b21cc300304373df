/// A request head in the proxy's message vocabulary (`HTTPPart`): method, target, version and fields, as the
/// HTTP/1.1 parser reads a request line or as the HTTP/2 frontend maps a stream's pseudo-headers (`:path` as an
/// origin-form target).
public struct HTTPRequestHead: Hashable, Sendable {
    /// The method token, case-sensitive (`GET`, `CONNECT`, …).
    public var method: String
    /// The parsed request target.
    public var target: HTTP1RequestTarget
    /// The protocol version of the request line.
    public var version: HTTP1Version
    /// Header fields in wire order.
    public var headers: HTTPFields

    /// Creates a request head.
    public init(method: String, target: HTTP1RequestTarget, version: HTTP1Version = .http11, headers: HTTPFields) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// The head to send to an origin server: an absolute-form target becomes origin-form (`/` if the
    /// URI had no path, `*` for a path-less OPTIONS, RFC 9112 §3.2.4) and Host is set to the target's
    /// authority, keeping its place if the client sent one. Other forms are returned unchanged.
    public func forOrigin() -> HTTPRequestHead {
        guard case .absolute(_, let authority, let pathAndQuery) = target else { return self }
        var head = self
        if pathAndQuery.isEmpty {
            head.target = method == "OPTIONS" ? .asterisk : .origin("/")
        } else if pathAndQuery.utf8.first == UInt8(ascii: "?") {
            head.target = .origin("/" + pathAndQuery)
        } else {
            head.target = .origin(pathAndQuery)
        }
        if head.headers.contains("Host") {
            head.headers.replaceOrAppend(name: "Host", value: authority.description)
        } else {
            head.headers.fields.insert(HTTPField(name: "Host", value: authority.description), at: 0)
        }
        return head
    }
}

/// A status line and its header fields, as parsed or as to be serialized; 1xx included.
public struct HTTPResponseHead: Hashable, Sendable {
    /// The protocol version of the status line.
    public var version: HTTP1Version
    /// The three-digit status code.
    public var status: Int
    /// The reason phrase, possibly empty.
    public var reason: String
    /// Header fields in wire order.
    public var headers: HTTPFields

    /// Creates a response head.
    public init(version: HTTP1Version = .http11, status: Int, reason: String, headers: HTTPFields = [:]) {
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
    }

    /// A 1xx response other than 101: another head follows for the same request.
    public var isInterim: Bool { status >= 100 && status < 200 && status != 101 }
}
