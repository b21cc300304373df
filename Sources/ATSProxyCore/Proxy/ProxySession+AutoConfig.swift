/// `/proxy.pac` on the proxy's own address: the proxy auto-configuration file naming the address this
/// connection reached the proxy at.
extension ProxySession {
    /// The PAC file when `path` (query and fragment ignored) is `/proxy.pac`; nil for any other path. Without a
    /// known local address the answer is a 503 saying so (never a file naming an unreachable proxy).
    func autoConfigPage(for path: String) -> OnboardingSite.Page? {
        guard path.prefix(while: { $0 != "?" && $0 != "#" }) == ProxyAutoConfig.path else { return nil }
        guard let localAddress else {
            return OnboardingSite.Page(
                status: 503, reason: "Service Unavailable", contentType: "text/plain; charset=utf-8", fileName: nil,
                body: Array("ats-proxy: this connection's local address is unknown; no PAC file\n".utf8))
        }
        return ProxyAutoConfig(filter: services.settings.hostFilter).page(proxy: localAddress)
    }
}
