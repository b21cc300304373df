/// The way a load reached the proxy: how the client addressed it, and what it spoke inside a tunnel. Recorded on
/// every record (`RequestRecord.route`) and rendered as its raw value at the edges (JSON log, text log, report,
/// HAR, flows page).
public enum ProxyRoute: String, Sendable, Codable, CaseIterable {
    /// An absolute-form request to the HTTP proxy (`GET http://host/ HTTP/1.1`).
    case absoluteForm = "absolute-form"
    /// A CONNECT the proxy answered itself before any tunnel opened (refused: a local target, a bad authority).
    case connect = "CONNECT"
    /// CONNECT, then TLS inside: intercepted with a minted leaf, or passed through.
    case connectTLS = "CONNECT+TLS"
    /// CONNECT, then cleartext HTTP/1.x inside the tunnel (`curl -p`, `ws://` through a proxy).
    case connectHTTP = "CONNECT+HTTP"
    /// CONNECT, then cleartext HTTP/2 with prior knowledge (`PRI * HTTP/2.0`).
    case connectH2C = "CONNECT+h2c"
    /// CONNECT, then neither TLS nor HTTP (or nothing at all): refused, or relayed with `--tunnel-unknown relay`.
    case connectRaw = "CONNECT+raw"
    /// A SOCKS5 CONNECT the proxy refused before any tunnel opened (a local target, a loop).
    case socks5 = "SOCKS5"
    /// SOCKS5 CONNECT, then TLS inside: intercepted with a minted leaf, or passed through.
    case socks5TLS = "SOCKS5+TLS"
    /// SOCKS5 CONNECT, then cleartext HTTP/1.x inside.
    case socks5HTTP = "SOCKS5+HTTP"
    /// SOCKS5 CONNECT, then cleartext HTTP/2 with prior knowledge.
    case socks5H2C = "SOCKS5+h2c"
    /// SOCKS5 CONNECT, then neither TLS nor HTTP (or nothing at all).
    case socks5Raw = "SOCKS5+raw"
    /// A SOCKS4 or SOCKS4a request: refused (SOCKS5 or the HTTP proxy serve the same clients).
    case socks4 = "SOCKS4"
    /// An absolute-form request inside TLS to the proxy itself (an `https://` proxy).
    case tlsAbsoluteForm = "TLS+absolute-form"
    /// TLS to the proxy that opened no tunnel: the client refused the proxy's own certificate, or its CONNECT was
    /// refused.
    case tlsConnect = "TLS+CONNECT"
    /// TLS to the proxy, CONNECT, then TLS inside (TLS in TLS): intercepted, or passed through.
    case tlsConnectTLS = "TLS+CONNECT+TLS"
    /// TLS to the proxy, CONNECT, then cleartext HTTP/1.x inside.
    case tlsConnectHTTP = "TLS+CONNECT+HTTP"
    /// TLS to the proxy, CONNECT, then cleartext HTTP/2 with prior knowledge.
    case tlsConnectH2C = "TLS+CONNECT+h2c"
    /// TLS to the proxy, CONNECT, then neither TLS nor HTTP.
    case tlsConnectRaw = "TLS+CONNECT+raw"

    /// What the text log's record line adds after the URL (` [via CONNECT+HTTP]`): empty for absolute-form and
    /// CONNECT+TLS, the two routes the URL's scheme already tells apart.
    public var textLogSuffix: String {
        switch self {
        case .absoluteForm, .connectTLS: ""
        case .connect, .connectHTTP, .connectH2C, .connectRaw, .socks5, .socks5TLS, .socks5HTTP, .socks5H2C,
            .socks5Raw, .socks4, .tlsAbsoluteForm, .tlsConnect, .tlsConnectTLS, .tlsConnectHTTP, .tlsConnectH2C,
            .tlsConnectRaw:
            " [via \(rawValue)]"
        }
    }

    /// The route of a tunnel that `entry` opened and whose client turned out to speak `content`.
    public static func tunnel(_ entry: TunnelEntry, _ content: TunnelContent) -> ProxyRoute {
        switch (entry, content) {
        case (.httpConnect, .refused): .connect
        case (.httpConnect, .tls): .connectTLS
        case (.httpConnect, .http): .connectHTTP
        case (.httpConnect, .h2c): .connectH2C
        case (.httpConnect, .raw): .connectRaw
        case (.socks5, .refused): .socks5
        case (.socks5, .tls): .socks5TLS
        case (.socks5, .http): .socks5HTTP
        case (.socks5, .h2c): .socks5H2C
        case (.socks5, .raw): .socks5Raw
        case (.tlsConnect, .refused): .tlsConnect
        case (.tlsConnect, .tls): .tlsConnectTLS
        case (.tlsConnect, .http): .tlsConnectHTTP
        case (.tlsConnect, .h2c): .tlsConnectH2C
        case (.tlsConnect, .raw): .tlsConnectRaw
        }
    }

    /// Whether the route is a tunnel relayed raw (neither TLS nor HTTP inside): its client reads no HTTP answer.
    public var isRawTunnel: Bool {
        switch self {
        case .connectRaw, .socks5Raw, .tlsConnectRaw: true
        case .absoluteForm, .connect, .connectTLS, .connectHTTP, .connectH2C, .socks5, .socks5TLS, .socks5HTTP,
            .socks5H2C, .socks4, .tlsAbsoluteForm, .tlsConnect, .tlsConnectTLS, .tlsConnectHTTP, .tlsConnectH2C:
            false
        }
    }

    /// Whether the route's client asked for its tunnel with SOCKS (its refusals are SOCKS replies, not HTTP).
    public var isSOCKS: Bool {
        switch self {
        case .socks5, .socks5TLS, .socks5HTTP, .socks5H2C, .socks5Raw, .socks4: true
        case .absoluteForm, .connect, .connectTLS, .connectHTTP, .connectH2C, .connectRaw, .tlsAbsoluteForm,
            .tlsConnect, .tlsConnectTLS, .tlsConnectHTTP, .tlsConnectH2C, .tlsConnectRaw:
            false
        }
    }
}

/// How a client asked the proxy for a tunnel.
public enum TunnelEntry: Sendable {
    /// An HTTP `CONNECT host:port` request (answered `200 Connection established`).
    case httpConnect
    /// A SOCKS5 CONNECT (RFC 1928), on the same port (answered with a SOCKS5 reply).
    case socks5
    /// An HTTP `CONNECT` inside TLS to the proxy itself (answered `200 Connection established`, sealed).
    case tlsConnect
}

/// What a tunnel carried, as far as the route names it.
public enum TunnelContent: Sendable {
    /// Nothing: the tunnel was refused before it opened.
    case refused
    /// TLS (intercepted or passed through).
    case tls
    /// Cleartext HTTP/1.x.
    case http
    /// Cleartext HTTP/2 with prior knowledge.
    case h2c
    /// Neither TLS nor HTTP.
    case raw
}
