import ATSPolicy

/// How a session's client sends it requests: as a proxy client, or from inside a CONNECT tunnel the proxy
/// intercepts (HTTP/1.1 there, or HTTP/2 through the session's `HTTP2Frontend`), or reads in cleartext, or relays
/// raw. The tunnel is part of the case, so a session is never half inside one (an authority without its parsed
/// target, or the reverse).
enum ClientRole {
    /// A proxy client: absolute-form requests (and CONNECT) in cleartext.
    case proxyClient
    /// Inside a CONNECT tunnel the proxy intercepts: origin-form requests for the tunnel's origin, decrypted by
    /// the session's client TLS engine.
    case intercepted(InterceptedTunnel)
    /// Inside a CONNECT tunnel whose client spoke cleartext HTTP (HTTP/1.x, or h2 with prior knowledge): requests
    /// for the tunnel's `http://` origin, decided as the cleartext loads they are.
    case cleartext(InterceptedTunnel)
    /// A CONNECT tunnel whose client spoke neither TLS nor HTTP, relayed raw (`--tunnel-unknown relay`): its
    /// CONNECT was answered before its upstream opened.
    case rawTunnel

    /// The tunnel requests arrive through, if any (intercepted or cleartext).
    var tunnel: InterceptedTunnel? {
        switch self {
        case .proxyClient, .rawTunnel: nil
        case .intercepted(let tunnel), .cleartext(let tunnel): tunnel
        }
    }

    /// Whether requests arrive from inside a tunnel the proxy reads (decrypted or cleartext, origin-form).
    var isInTunnel: Bool { tunnel != nil }

    /// Whether requests arrive in cleartext from inside a CONNECT tunnel.
    var isCleartext: Bool {
        if case .cleartext = self { return true }
        return false
    }
}

/// The origin of a CONNECT tunnel the proxy reads (intercepted TLS, or cleartext HTTP), parsed once: every request
/// inside goes there, so only its path changes from request to request.
struct InterceptedTunnel {
    /// The CONNECT authority's host (canonical form) and port.
    let host: String
    let port: Int
    /// The origin as a target (URL `https://host[:port]/`, or `http://` in a cleartext tunnel), checked against the
    /// proxy's own addresses already.
    let target: RequestTarget
    /// `target`'s URL without the final "/": what the paths of requests in the tunnel follow.
    let origin: String

    /// The port a Host field or :authority without one means (443 in a TLS tunnel, 80 in a cleartext one).
    var defaultPort: Int { target.scheme.defaultPort }

    /// The URL of a request inside the tunnel for `path` (origin-form, or empty for asterisk-form).
    func url(path: String) -> String {
        var url = origin
        if !(path.isEmpty || path.utf8.first == UInt8(ascii: "/")) { url += "/" }
        url += path
        return url
    }
}
