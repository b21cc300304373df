import ATSPolicy

/// Whether a request read inside an intercepted tunnel is for the tunnel's origin. The client's TLS
/// connection was set up for the CONNECT authority (and its minted leaf names that host only), so a request
/// whose absolute-form target or Host field names another authority, or another scheme, must not be sent to
/// that origin under a record that says otherwise: it gets `421 Misdirected Request` (RFC 9110 §15.5.20), as
/// the HTTP/2 frontend answers a stream whose `:authority` differs, and a scheme that is not HTTP gets 400. Inside
/// a cleartext tunnel (`cleartext`), the same holds the other way round: `https://` is misdirected, and a Host
/// without a port means port 80.
enum TunnelRequestCheck {
    /// The verdict for one request head.
    enum Verdict: Equatable {
        /// For the tunnel's origin (over https, or http in a cleartext tunnel): served.
        case sameOrigin
        /// Another authority, or `http://` inside the TLS tunnel (`https://` inside a cleartext one): 421, with the
        /// reason.
        case misdirected(String)
        /// A scheme that is not http(s) or ws(s): 400, with the reason.
        case unsupportedScheme(String)
    }

    /// Checks `head` against the tunnel's `host` (as the CONNECT named it, canonicalized) and `port`; `cleartext`
    /// for a tunnel whose client speaks plain HTTP.
    static func check(_ head: HTTPRequestHead, host: String, port: Int, cleartext: Bool = false) -> Verdict {
        let defaultPort = cleartext ? 80 : 443
        if case .absolute(let scheme, let authority, _) = head.target {
            let lowered = scheme.lowercased()
            guard lowered == "https" || lowered == "wss" || lowered == "http" || lowered == "ws" else {
                return .unsupportedScheme("the scheme '\(lowered)' is not proxied; only http and https are")
            }
            let secure = lowered == "https" || lowered == "wss"
            guard secure != cleartext else {
                let tunnel = cleartext ? "cleartext" : "TLS"
                let advice =
                    cleartext ? "open a TLS connection inside the tunnel" : "send it to the proxy without CONNECT"
                return .misdirected(
                    "a \(lowered):// request inside the \(tunnel) tunnel to \(Self.authority(host, port)); \(advice)")
            }
            guard matches(authority, host: host, port: port, defaultPort: defaultPort) else {
                return .misdirected(misdirectedText(authority, host: host, port: port, cleartext: cleartext))
            }
        }
        guard let value = head.headers.first("Host"), !value.isEmpty else { return .sameOrigin }
        if spells(value, host: host, port: port, defaultPort: defaultPort) { return .sameOrigin }
        guard let authority = HTTP1Authority(bytes: value.utf8),
            matches(authority, host: host, port: port, defaultPort: defaultPort)
        else {
            return .misdirected(misdirectedText(nil, value: value, host: host, port: port, cleartext: cleartext))
        }
        return .sameOrigin
    }

    /// Whether the Host field is `host` (port 443) or `host:port` exactly, letter case aside: what nearly every
    /// request in a tunnel carries, recognized without parsing or allocating.
    private static func spells(_ value: String, host: String, port: Int, defaultPort: Int) -> Bool {
        let field = value.utf8
        let name = host.utf8
        guard field.count >= name.count, HTTP1ASCII.equalsIgnoringCase(field.prefix(name.count), name) else {
            return false
        }
        let rest = field.dropFirst(name.count)
        if rest.isEmpty { return port == defaultPort }
        guard rest.first == HTTP1ASCII.colon, rest.count >= 2, rest.count <= 6 else { return false }
        var value = 0
        for byte in rest.dropFirst() {
            guard HTTP1ASCII.isDigit(byte) else { return false }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value == port
    }

    /// Same host (canonical forms, case-insensitive) and port (`defaultPort` when none is written).
    private static func matches(_ authority: HTTP1Authority, host: String, port: Int, defaultPort: Int) -> Bool {
        guard (authority.port ?? defaultPort) == port else { return false }
        // The usual case (the same spelling as the CONNECT) costs no allocation.
        return HTTP1ASCII.equalsIgnoringCase(authority.host.utf8, host.utf8)
            || RequestTarget.canonicalHost(authority.host) == RequestTarget.canonicalHost(host)
    }

    private static func authority(_ host: String, _ port: Int) -> String {
        "\(RequestTarget.uriHost(host)):\(port)"
    }

    private static func misdirectedText(
        _ authority: HTTP1Authority?, value: String? = nil, host: String, port: Int, cleartext: Bool
    ) -> String {
        let named = authority?.description ?? value ?? ""
        let covered = cleartext ? "this tunnel goes to" : "this connection's certificate covers"
        return "\(covered) \(Self.authority(host, port)) only; open a new connection for \(named)"
    }
}
