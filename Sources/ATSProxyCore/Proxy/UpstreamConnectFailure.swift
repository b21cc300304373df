import ATSPolicy

/// Why a connection to an upstream could not be opened, as the I/O layer classified it. The exchange turns it into
/// the device's NSURLError code and the record's words; a refusal, an unreachable network and the proxy running out
/// of its own descriptors are different causes and stay different here (never recognised from text).
public enum UpstreamConnectFailure: Sendable, Equatable {
    /// The host name did not resolve (-1003).
    case nameNotResolved
    /// Every address refused the connection (-1004).
    case refused
    /// No address answered within the connect timeout (-1001).
    case timedOut
    /// The connection was reset while it was being established (-1005).
    case reset
    /// The network or the host is unreachable (-1004).
    case unreachable
    /// The proxy itself could not open a socket: out of descriptors or memory (`EMFILE`, `ENFILE`, `ENOBUFS`,
    /// `ENOMEM`). The server was never contacted; `detail` is the failing call and its error.
    case proxyResources(detail: String)
    /// Another socket failure; `detail` is the failing call and its error.
    case other(detail: String)
    /// The upstream proxy (`--upstream-proxy`) could not be reached or did not open the tunnel: its code and its own
    /// words (`UpstreamProxy.detailPrefix` first, never a secret).
    case upstreamProxy(NSURLErrorCode, detail: String)

    /// The NSURLError code a device reports for this failure.
    public var code: NSURLErrorCode {
        switch self {
        case .nameNotResolved: .cannotFindHost
        case .refused, .unreachable, .proxyResources, .other: .cannotConnectToHost
        case .timedOut: .timedOut
        case .reset: .networkConnectionLost
        case .upstreamProxy(let code, _): code
        }
    }
}
