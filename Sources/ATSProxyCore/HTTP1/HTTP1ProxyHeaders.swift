/// The header rules a forwarding proxy applies (RFC 9110 §7.6.1): hop-by-hop removal, persistence,
/// and `Expect: 100-continue`. Pure functions over `HTTPFields`.
public enum HTTP1ProxyHeaders {
    /// Which optional hop-by-hop fields survive.
    public struct Options: Hashable, Sendable {
        /// Keep `Upgrade` and a `Connection: Upgrade` because the proxy relays the protocol switch.
        public var upgrading: Bool
        /// Remove `Transfer-Encoding` and `Content-Length`: the proxy writes its own framing.
        public var reframing: Bool

        /// Creates options.
        public init(upgrading: Bool = false, reframing: Bool = false) {
            self.upgrading = upgrading
            self.reframing = reframing
        }
    }

    /// Always hop-by-hop, whether or not Connection names them.
    static let hopByHop = [
        "Connection", "Proxy-Connection", "Keep-Alive", "TE", "Trailer", "Upgrade", "Proxy-Authorization",
        "Proxy-Authenticate",
    ]

    /// Fields a Connection header may not make us drop: routing and framing stay under our control
    /// (dropping Host or Content-Length on a peer's say-so is a known smuggling trick).
    static let protected = ["Host", "Content-Length", "Transfer-Encoding"]

    /// `headers` without hop-by-hop fields: Connection and every field it names, Proxy-Connection,
    /// Keep-Alive, TE, Trailer, Upgrade (unless upgrading), Proxy-Authorization, Proxy-Authenticate,
    /// and Transfer-Encoding/Content-Length when reframing. When upgrading, `Upgrade` is kept and a
    /// single `Connection: Upgrade` is appended so the next hop sees the request to switch.
    public static func removingHopByHop(_ headers: HTTPFields, options: Options = Options()) -> HTTPFields {
        let filter = HopByHopFilter(headers, options: options)
        // Most messages carry no hop-by-hop field at all (keep-alive is HTTP/1.1's default): then
        // the headers are returned as they are, without building anything.
        guard !filter.dropsNothing else { return headers }
        var result = headers
        result.fields.removeAll { filter.drops($0) }
        if options.upgrading && result.contains("Upgrade") {
            result.append(name: "Connection", value: "Upgrade")
        }
        return result
    }

    /// Which fields of one message `removingHopByHop` removes, decided without copying the fields: a
    /// serializer can skip them while it writes (`HTTP1Serializer.writeResponseHead(_:dropping:appending:into:)`).
    public struct HopByHopFilter: Sendable {
        let options: Options
        /// Fields the Connection header names (beyond keep-alive and close), protected ones excepted.
        let named: [Substring]
        /// No field of the message is dropped.
        let dropsNothing: Bool

        /// The filter for `headers` under `options`.
        public init(_ headers: HTTPFields, options: Options = Options()) {
            self.options = options
            let removable = headers.fields.contains { field in
                isHopByHop(field.name) || (options.reframing && isFraming(field.name))
            }
            dropsNothing = !removable
            guard removable else {
                named = []
                return
            }
            // `Connection: keep-alive` / `close` name no field: skip collecting the named ones then.
            let namesFields = headers.fields.contains { field in
                field.name.utf8.count == 10 && HTTPFields.nameMatches(field.name, "Connection")
                    && HTTP1ASCII.forEachListElement(of: field.value) { element in
                        !HTTP1ASCII.equalsIgnoringCase(element, "keep-alive".utf8)
                            && !HTTP1ASCII.equalsIgnoringCase(element, "close".utf8)
                    }
            }
            named =
                namesFields
                ? headers.listElements("Connection").filter { token in
                    !protected.contains { HTTP1ASCII.equalsIgnoringCase($0.utf8, token.utf8) }
                } : []
        }

        /// Whether `field` is hop-by-hop for this message.
        public func drops(_ field: HTTPField) -> Bool {
            if dropsNothing { return false }
            if options.upgrading && HTTPFields.nameMatches(field.name, "Upgrade") { return false }
            if isHopByHop(field.name) { return true }
            if options.reframing && isFraming(field.name) { return true }
            return named.contains { HTTP1ASCII.equalsIgnoringCase(field.name.utf8, $0.utf8) }
        }
    }

    /// Whether `name` is one of `hopByHop`; checks the length before comparing.
    static func isHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: return HTTPFields.nameMatches(name, "TE")
        case 7: return HTTPFields.nameMatches(name, "Trailer") || HTTPFields.nameMatches(name, "Upgrade")
        case 10: return HTTPFields.nameMatches(name, "Connection") || HTTPFields.nameMatches(name, "Keep-Alive")
        case 16: return HTTPFields.nameMatches(name, "Proxy-Connection")
        case 18: return HTTPFields.nameMatches(name, "Proxy-Authenticate")
        case 19: return HTTPFields.nameMatches(name, "Proxy-Authorization")
        default: return false
        }
    }

    static func isFraming(_ name: String) -> Bool {
        HTTPFields.nameMatches(name, "Transfer-Encoding") || HTTPFields.nameMatches(name, "Content-Length")
    }

    /// Whether the connection persists after this message (RFC 9112 §9.3): HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    public static func isKeepAlive(version: HTTP1Version, headers: HTTPFields) -> Bool {
        if headers.hasListElement("Connection", "close") { return false }
        if version.isAtLeastHTTP11 { return true }
        return headers.hasListElement("Connection", "keep-alive")
    }

    /// What the client expects before sending its body.
    public enum Expectation: Hashable, Sendable {
        /// No Expect field.
        case none
        /// `Expect: 100-continue` (case-insensitive); ignored on HTTP/1.0 requests (RFC 9110 §10.1.1).
        case continue100
        /// Any other expectation: answer 417.
        case unsupported
    }

    /// The expectation of a request head.
    public static func expectation(of head: HTTPRequestHead) -> Expectation {
        let elements = head.headers.listElements("Expect")
        guard !elements.isEmpty else { return .none }
        guard elements.allSatisfy({ HTTP1ASCII.equalsIgnoringCase($0.utf8, "100-continue".utf8) }) else {
            return .unsupported
        }
        return head.version.isAtLeastHTTP11 ? .continue100 : .none
    }
}
