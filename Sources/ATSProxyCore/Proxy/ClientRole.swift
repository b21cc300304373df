import ATSPolicy

/// How a session's client sends it requests: as a proxy client, or from inside a CONNECT tunnel the proxy
/// intercepts (HTTP/1.1 there, or HTTP/2 through the session's `HTTP2Frontend`). The tunnel is part of the case,
/// so a session is never half inside one (an authority without its parsed target, or the reverse).
enum ClientRole {
    /// A proxy client: absolute-form requests (and CONNECT) in cleartext.
    case proxyClient
    /// Inside a CONNECT tunnel the proxy intercepts: origin-form requests for the tunnel's origin, decrypted by
    /// the session's client TLS engine.
    case intercepted(InterceptedTunnel)

    /// The intercepted tunnel requests arrive through, if any.
    var tunnel: InterceptedTunnel? {
        switch self {
        case .proxyClient: nil
        case .intercepted(let tunnel): tunnel
        }
    }

    /// Whether requests arrive from inside an intercepted tunnel (decrypted, origin-form).
    var isInTunnel: Bool { tunnel != nil }
}

/// The origin of an intercepted CONNECT tunnel, parsed once at CONNECT: every request inside goes there, so only
/// its path changes from request to request.
struct InterceptedTunnel {
    /// The CONNECT authority's host (canonical form) and port.
    let host: String
    let port: Int
    /// The origin as a target (URL `https://host[:port]/`), checked against the proxy's own addresses already.
    let target: RequestTarget
    /// `target`'s URL without the final "/": what the paths of requests in the tunnel follow.
    let origin: String

    /// The URL of a request inside the tunnel for `path` (origin-form, or empty for asterisk-form).
    func url(path: String) -> String {
        var url = origin
        if !(path.isEmpty || path.utf8.first == UInt8(ascii: "/")) { url += "/" }
        url += path
        return url
    }
}
