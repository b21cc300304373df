import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Per-session routing: one `URLSession` through ats-proxy, with no system proxy, no device settings and no
/// `ats-proxy exec` around the tests (a Simulator test target pointed at a proxy on the Mac, for instance).
///
/// ```swift
/// let proxy = ATSProxyEnvironment(host: "127.0.0.1", port: 8080, caCertificatePath: "/path/to/ats-proxy-ca.pem")!
/// let session = try ATSProxyTesting.session(through: proxy)          // HTTP CONNECT
/// let socks = try ATSProxyTesting.session(through: proxy, route: .socks5)
/// ```
///
/// The returned configuration carries the route (see `ATSProxySessionRoute` for what each platform honours) and
/// `ATSProxyURLProtocol` first in `protocolClasses`, whose transport session trusts the proxy CA through its
/// delegate (`ATSProxyTrustDelegate`, Apple platforms) and turns `X-ATS-Error` answers into the device's
/// `URLError`. The transport is shared by the process: the latest configuration made names the proxy every
/// routed session uses.
extension ATSProxyTesting {
    /// `base` (default `.ephemeral`) routed through `proxy` by `route`. Throws `Unavailable` when this platform
    /// cannot take the route (TLS to the proxy before iOS 17/macOS 14).
    public static func configuration(
        through proxy: ATSProxyEnvironment, route: ATSProxyRoute = .httpConnect,
        _ base: URLSessionConfiguration = .ephemeral
    ) throws -> URLSessionConfiguration {
        let transport = try ATSProxySessionRoute.apply(
            route, proxy: proxy, to: base.copy() as! URLSessionConfiguration)
        transport.protocolClasses = (transport.protocolClasses ?? []).filter { $0 != ATSProxyURLProtocol.self }
        ATSProxyURLProtocol.install(transport: makeTransportSession(transport, environment: proxy))
        let configuration = try ATSProxySessionRoute.apply(
            route, proxy: proxy, to: base.copy() as! URLSessionConfiguration)
        configuration.protocolClasses = [ATSProxyURLProtocol.self] + (configuration.protocolClasses ?? [])
        return configuration
    }

    /// A session on `configuration(through:route:base)`.
    public static func session(
        through proxy: ATSProxyEnvironment, route: ATSProxyRoute = .httpConnect,
        _ base: URLSessionConfiguration = .ephemeral
    ) throws -> URLSession {
        URLSession(configuration: try configuration(through: proxy, route: route, base))
    }
}
