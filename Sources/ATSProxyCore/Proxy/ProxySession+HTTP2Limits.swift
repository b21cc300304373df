/// What the driver asks a session about the HTTP/2 hardening limits of its client connection.
extension ProxySession {
    /// Whether the driver stops reading the client while the client's write queue is over its high watermark.
    /// True once the client speaks HTTP/2: every frame it sends may add a reply (PING or SETTINGS ACK,
    /// RST_STREAM) to a queue it is not reading, so a client that does not read must not be read either.
    public var stopsReadingWhileClientBacklogged: Bool {
        switch phase {
        case .h2: true
        case .socks, .http, .detecting, .clientHandshake, .tunnel, .closed: false
        }
    }

    /// One line on why the proxy cut this client connection for a protocol error or a flood (the GOAWAY code, the
    /// limit, what the client did), once it has; nil otherwise.
    public var cutReport: String? { h2?.cutReport }

    /// The line to log when this client connection ends: `cutReport`, or a summary of the streams the client reset
    /// or the proxy refused in numbers; nil for an ordinary connection.
    public var closingReport: String? { h2?.closingReport }
}
