import ATSPolicy
import ATSTLS
import Foundation

/// Answers the session makes itself, outside any exchange: bad requests, loops, refused targets, the proxy's
/// info page and the onboarding site.
extension ProxySession {
    // MARK: - Local answers

    /// A response that is not part of an exchange (bad requests, loops); closes afterwards when
    /// `keepAlive` is false.
    mutating func answerLocally(status: Int, reason: String, body: String, keepAlive: Bool) {
        if socksReplyPending {
            // A SOCKS5 client refused before its tunnel opened reads a SOCKS5 reply, and nothing follows it.
            refuseSOCKSTunnel(SOCKS5Reply.code(forHTTPStatus: status))
            close()
            return
        }
        leg.sendLocal(LocalResponse.text(status: status, reason: reason, body), keepAlive: keepAlive)
        if !keepAlive { close() }
    }

    /// A request or CONNECT the proxy refuses before any upstream is involved (misdirected inside a tunnel, a
    /// target on the proxy host for a client elsewhere): answered with `status`, recorded as refused with `code`
    /// (what a device's task would end with), closed.
    mutating func refuse(
        _ head: HTTPRequestHead, status: Int, reason: String, text: String, code: NSURLErrorCode = .cannotConnectToHost
    ) {
        let body = "ats-proxy: \(text)\n"
        leg.commands.append(
            .log(
                refusalRecord(
                    head, text: text, code: code, status: status,
                    bytesToClient: socksReplyPending ? 10 : body.utf8.count)))
        answerLocally(status: status, reason: reason, body: body, keepAlive: false)
        close()
    }

    /// The record of a request the proxy refused itself before any upstream work (`result: .refused`): its URL as
    /// the client addressed it, `text` as the rule, and a CONNECT counted as the tunnel's first task.
    func refusalRecord(
        _ head: HTTPRequestHead, text: String, fix: String? = nil, code: NSURLErrorCode? = nil, status: Int,
        bytesToClient: Int
    ) -> RequestRecord {
        let url: String
        switch head.target {
        case .authority(let authority): url = "https://\(authority)/"
        case .absolute, .asterisk: url = head.target.description
        case .origin(let path): url = (role.tunnel?.origin ?? "") + path
        }
        let number = head.method == "CONNECT" ? requestCount + 1 : requestCount
        return leg.client.record(
            task: number, time: now, method: head.method, url: url, result: .refused, rule: text, fix: fix,
            errorCode: code?.rawValue, status: status,
            requestHeaders: head.headers.fields, bytesToClient: bytesToClient,
            route: head.method == "CONNECT" ? .tunnel(entry, .refused) : leg.route)
    }

    /// Why a client on another machine may not reach `host`.
    static func localTargetText(_ host: String) -> String {
        "\(host) is the machine the proxy runs on; clients on other machines may not reach its own services (start ats-proxy with --allow-local-targets to allow it)"
    }

    /// Serves the CA onboarding site (never proxied).
    mutating func answerOnboarding(_ head: HTTPRequestHead, path: String, framing: HTTPBodyFraming) {
        guard let site = services.onboarding else {
            answerProxyInfo(head, framing: framing)
            return
        }
        let keepAlive = framing == .none && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        let page: OnboardingSite.Page
        if head.method == "GET" || head.method == "HEAD" {
            let path = path.hasPrefix("/") ? path : "/" + path
            page = autoConfigPage(for: path) ?? site.page(for: path)
        } else {
            page = OnboardingSite.Page(
                status: 405, reason: "Method Not Allowed", contentType: "text/plain; charset=utf-8", fileName: nil,
                body: Array("ats-proxy: onboarding pages answer GET only\n".utf8))
        }
        leg.sendLocal(LocalResponse(page), keepAlive: keepAlive, headOnly: head.method == "HEAD")
        // Kept alive, the parser resumes at this request's message end (`requestEnd` without an exchange), which
        // is still on its way: resuming here would start a pipelined request before it, and that end would then
        // end the new request a second time.
        if !keepAlive { close() }
    }

    /// A request addressed to the proxy itself (origin-form): the onboarding site, or a short page
    /// saying what this is.
    mutating func answerProxyInfo(_ head: HTTPRequestHead, framing: HTTPBodyFraming) {
        if services.onboarding != nil, case .origin(let path) = head.target {
            answerOnboarding(head, path: path, framing: framing)
            return
        }
        if case .origin(let path) = head.target, head.method == "GET" || head.method == "HEAD",
            let page = autoConfigPage(for: path)
        {
            let keepAlive =
                framing == .none && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
            leg.sendLocal(LocalResponse(page), keepAlive: keepAlive, headOnly: head.method == "HEAD")
            if !keepAlive { close() }
            return
        }
        let snapshot = services.policy.snapshot
        let body = """
            ats-proxy is running: an HTTP proxy that enforces App Transport Security.
            Policy: \(snapshot.sourceSummary)
            Platform: \(snapshot.evaluator.options.platform)
            Configure this address as the HTTP and HTTPS proxy of your client.

            """
        let keepAlive = framing == .none && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        if head.target == .origin("/") {
            answerLocally(status: 200, reason: "OK", body: body, keepAlive: keepAlive)
        } else {
            answerLocally(status: 404, reason: "Not Found", body: "ats-proxy: not found\n", keepAlive: keepAlive)
        }
        // Kept alive, the parser resumes at this request's message end (see `answerOnboarding`).
    }
}
