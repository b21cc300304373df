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

    /// What the text log's record line adds after the URL (` [via CONNECT+HTTP]`): empty for absolute-form and
    /// CONNECT+TLS, the two routes the URL's scheme already tells apart.
    public var textLogSuffix: String {
        switch self {
        case .absoluteForm, .connectTLS: ""
        case .connect, .connectHTTP, .connectH2C, .connectRaw: " [via \(rawValue)]"
        }
    }
}
