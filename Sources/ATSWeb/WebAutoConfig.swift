import ATSProxyCore
import ATSProxyIO
import Synchronization

/// What the web view needs to serve `/proxy.pac`: the file, and where the proxy listens (filled in once its
/// listeners are bound, which happens after the web view starts).
///
/// Thread-safe: the addresses sit behind a mutex; the file is immutable.
public final class WebAutoConfig: Sendable {
    public let autoConfig: ProxyAutoConfig
    private let listeners = Mutex<[SocketAddress]>([])

    public init(autoConfig: ProxyAutoConfig) {
        self.autoConfig = autoConfig
    }

    /// Records the proxy's bound listen addresses.
    public func setListeners(_ addresses: [SocketAddress]) {
        listeners.withLock { $0 = addresses }
    }

    /// The proxy address a client that reached the web view at `local` can reach too: a proxy listener on the
    /// same IP, or a wildcard listener of the same family (listeners are IPv6-only) (then that IP with the listener's port). Nil when the
    /// proxy does not listen where this client is (a loopback-only proxy seen from the network).
    public func proxyAddress(forLocal local: SocketAddress) -> SocketAddress? {
        let local = local.clientFacing
        let bound = listeners.withLock { $0 }
        if let exact = bound.first(where: { $0.clientFacing.ip == local.ip }) { return exact.clientFacing }
        // Listeners are IPv6-only (IPV6_V6ONLY): a wildcard covers its own family alone.
        guard let wildcard = bound.first(where: { $0.isWildcard && $0.ip.family == local.ip.family }) else {
            return nil
        }
        return SocketAddress(ip: local.ip, port: wildcard.port)
    }

    /// The answer to `GET /proxy.pac` on a web connection whose local address is `local`.
    func response(forLocal local: SocketAddress?) -> WebResponse {
        guard let local, let proxy = proxyAddress(forLocal: local) else {
            let listening = listeners.withLock { $0 }.map(\.description).joined(separator: ", ")
            return .text(
                503, "Service Unavailable",
                "ats-proxy: the proxy does not listen on this address (it listens on \(listening)); "
                    + "start it with --listen 0.0.0.0:PORT for devices on the network\n")
        }
        return WebResponse(
            status: 200, reason: "OK", contentType: ProxyAutoConfig.contentType,
            body: Array(autoConfig.script(proxy: proxy.description).utf8))
    }
}
