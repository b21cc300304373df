/// A request line and its header fields, as parsed or as to be serialized.
public struct HTTP1RequestHead: Hashable, Sendable {
    /// The method token, case-sensitive (`GET`, `CONNECT`, …).
    public var method: String
    /// The parsed request target.
    public var target: HTTP1RequestTarget
    /// The protocol version of the request line.
    public var version: HTTP1Version
    /// Header fields in wire order.
    public var headers: HTTP1Headers

    /// Creates a request head.
    public init(method: String, target: HTTP1RequestTarget, version: HTTP1Version = .http11, headers: HTTP1Headers) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// The head to send to an origin server: an absolute-form target becomes origin-form (`/` if the
    /// URI had no path, `*` for a path-less OPTIONS, RFC 9112 §3.2.4) and Host is set to the target's
    /// authority, keeping its place if the client sent one. Other forms are returned unchanged.
    public func forOrigin() -> HTTP1RequestHead {
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
            head.headers.fields.insert(HTTP1Field(name: "Host", value: authority.description), at: 0)
        }
        return head
    }
}

/// A status line and its header fields, as parsed or as to be serialized; 1xx included.
public struct HTTP1ResponseHead: Hashable, Sendable {
    /// The protocol version of the status line.
    public var version: HTTP1Version
    /// The three-digit status code.
    public var status: Int
    /// The reason phrase, possibly empty.
    public var reason: String
    /// Header fields in wire order.
    public var headers: HTTP1Headers

    /// Creates a response head.
    public init(version: HTTP1Version = .http11, status: Int, reason: String, headers: HTTP1Headers = [:]) {
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
    }

    /// A 1xx response other than 101: another head follows for the same request.
    public var isInterim: Bool { status >= 100 && status < 200 && status != 101 }
}
