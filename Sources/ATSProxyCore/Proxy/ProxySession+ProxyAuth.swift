import ATSPolicy
import Foundation

/// `--proxy-auth`: a proxy client's absolute-form requests and CONNECTs must carry `Proxy-Authorization: Basic` with
/// the proxy's credentials (SOCKS5 clients authenticate in their handshake, `SOCKS5Negotiation`). What is addressed
/// to the proxy itself (the onboarding site, the info page, `/proxy.pac`) needs none: a phone fetches those before
/// it has any proxy settings. Requests inside a tunnel were authorized with its CONNECT.
extension ProxySession {
    /// Whether `head` may use the proxy: no credentials are required, or it carries the right ones.
    func proxyAuthorized(_ head: HTTPRequestHead) -> Bool {
        guard let credentials = services.settings.proxyCredentials else { return true }
        return credentials.acceptsBasic(head.headers.first("Proxy-Authorization"))
    }

    /// Answers `head` with 407 and a Basic challenge, records the refusal (the header's value is never part of
    /// it unless `--log-secrets`), and closes.
    mutating func requireProxyAuthentication(_ head: HTTPRequestHead) {
        let sent = head.headers.first("Proxy-Authorization") != nil
        let text =
            sent
            ? "proxy authentication failed: the Proxy-Authorization credentials are not the ones ats-proxy was started with (--proxy-auth)"
            : "proxy authentication required: ats-proxy was started with --proxy-auth and the request carried no Proxy-Authorization"
        let body = Array("ats-proxy: \(text)\n".utf8)
        leg.commands.append(
            .log(
                refusalRecord(
                    head, text: text,
                    fix: "configure the client's proxy with the user name and password given to --proxy-auth",
                    status: 407, bytesToClient: body.count)))
        let response = LocalResponse(
            status: 407, reason: "Proxy Authentication Required",
            fields: [
                HTTPField(name: "Proxy-Authenticate", value: "Basic realm=\"ats-proxy\", charset=\"UTF-8\""),
                HTTPField(name: "Content-Type", value: "text/plain; charset=utf-8"),
                HTTPField(name: "Content-Length", value: String(body.count)),
            ], body: body)
        leg.sendLocal(response, keepAlive: false)
        close()
    }
}
