import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How one `URLSession` reaches ats-proxy when it is routed per session
/// (`ATSProxyTesting.configuration(through:route:)`), without system or device proxy settings.
public enum ATSProxyRoute: String, Sendable, CaseIterable {
    /// An HTTP proxy: `http://` loads as absolute-form requests, `https://` through CONNECT.
    case httpConnect = "http-connect"
    /// The same, inside TLS to the proxy (the proxy presents a certificate its CA signed).
    case tlsToProxy = "tls-to-proxy"
    /// A SOCKS5 proxy (host names resolved by the proxy).
    case socks5
}

/// Applies an `ATSProxyRoute` to a `URLSessionConfiguration`, with what each platform honours:
///
/// - iOS 17+, macOS 14+ (and the matching tvOS, watchOS, visionOS): `proxyConfigurations` with Network.framework's
///   `ProxyConfiguration(httpCONNECTProxy:tlsOptions:)` (TLS options that trust the proxy CA for `tlsToProxy`) or
///   `ProxyConfiguration(socksv5Proxy:)`.
/// - Earlier Apple systems: `connectionProxyDictionary` with the HTTP and HTTPS proxy keys, or the SOCKS keys;
///   `tlsToProxy` has no dictionary form there and throws.
/// - Linux (FoundationNetworking): its libcurl ignores `connectionProxyDictionary` (tried with Swift 6.3: the
///   request went direct) and reads the proxy from the process environment on every transfer, so the route is set
///   as `http_proxy` and `https_proxy` (`http://`, `https://` or `socks5h://` URLs). That is process-wide, not per
///   session: every session of the process that does not set its own proxy follows it.
///
/// The Apple branches are compiled on Apple platforms only; they are written against Apple's documented API and
/// were not compiled or run on the Linux machine this package is tested on.
enum ATSProxySessionRoute {
    /// `configuration` routed through `proxy` by `route`. Throws `ATSProxyTesting.Unavailable` when the platform
    /// cannot take the route.
    static func apply(
        _ route: ATSProxyRoute, proxy: ATSProxyEnvironment, to configuration: URLSessionConfiguration
    ) throws -> URLSessionConfiguration {
        #if canImport(Network)
            if #available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *) {
                configuration.proxyConfigurations = [try ATSProxyNetworkConfiguration.make(route, proxy: proxy)]
                return configuration
            }
            configuration.connectionProxyDictionary = try dictionary(route, proxy: proxy)
            return configuration
        #else
            for (name, value) in environment(route, proxy: proxy) { setenv(name, value, 1) }
            return configuration
        #endif
    }

    /// The `connectionProxyDictionary` for `route` (string keys: the values of `kCFNetworkProxies*`, which iOS
    /// does not export by name).
    static func dictionary(_ route: ATSProxyRoute, proxy: ATSProxyEnvironment) throws -> [AnyHashable: Any] {
        switch route {
        case .httpConnect:
            return proxy.connectionProxyDictionary
        case .socks5:
            return ["SOCKSEnable": 1, "SOCKSProxy": proxy.host, "SOCKSPort": proxy.port]
        case .tlsToProxy:
            throw ATSProxyTesting.Unavailable(
                description:
                    "TLS to the proxy needs proxyConfigurations (iOS 17, macOS 14 or later); use .httpConnect here")
        }
    }

    /// The variables FoundationNetworking's libcurl reads for `route`: lower-case names, which libcurl prefers
    /// (it reads `http_proxy` only in lower case).
    static func environment(_ route: ATSProxyRoute, proxy: ATSProxyEnvironment) -> [(String, String)] {
        let host = proxy.host.contains(":") ? "[\(proxy.host)]" : proxy.host
        let scheme: String
        switch route {
        case .httpConnect: scheme = "http"
        case .tlsToProxy: scheme = "https"
        case .socks5: scheme = "socks5h"
        }
        let url = "\(scheme)://\(host):\(proxy.port)"
        return [("http_proxy", url), ("https_proxy", url)]
    }
}
