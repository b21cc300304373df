import ATSPolicy
import ATSProxyCore
import ArgumentParser

/// `--http2`: where HTTP/2 is offered in ALPN.
enum HTTP2Setting: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// To clients (intercepted tunnels) and to origins (the default).
    case on
    /// To clients only; origins are spoken to in HTTP/1.1.
    case client
    /// To origins only; clients get HTTP/1.1.
    case upstream
    /// Nowhere: HTTP/1.1 only.
    case off

    /// Whether an intercepted client may negotiate h2.
    var offersToClients: Bool {
        switch self {
        case .on, .client: true
        case .upstream, .off: false
        }
    }

    /// Whether the proxy offers h2 to origins.
    var offersToOrigins: Bool {
        switch self {
        case .on, .upstream: true
        case .client, .off: false
        }
    }

    /// `one of on, client, upstream, off`, for messages.
    static var choices: String { "one of " + allCases.map(\.rawValue).joined(separator: ", ") }
}

/// `--source`: which component the proxy takes requests to come from.
enum SourceOption: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// From each request's User-Agent (the default).
    case auto
    case urlsession
    case webkit
    case media

    /// The session setting it stands for.
    var setting: SourceSetting {
        switch self {
        case .auto: .auto
        case .urlsession: .fixed(.urlsession)
        case .webkit: .fixed(.webkit)
        case .media: .fixed(.media)
        }
    }

    /// `one of auto, urlsession, webkit, media`, for messages.
    static var choices: String { "one of " + allCases.map(\.rawValue).joined(separator: ", ") }
}
