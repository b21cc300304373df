import ATSPolicy
import ATSTLS
import Foundation

/// Answers the session makes itself: ATS failures (403/502/504 with X-ATS-* fields), bad requests, the onboarding site.
extension ProxySession {
    // MARK: - Failures and local answers

    /// Answers the current exchange with the verdict's 502/504 and the X-ATS-* headers.
    mutating func failExchange(verdict: UpstreamVerdict) {
        guard let exchange else { return close() }
        let verdict = verdict.withFix(url: exchange.url, evaluator: exchange.policy.evaluator)
        let platform = exchange.policy.evaluator.options.platform
        let context = consoleContext()
        exchange.result = .failed
        exchange.errorCode = verdict.error?.rawValue
        exchange.streamError = Self.pair(verdict)
        exchange.rule = verdict.rule
        exchange.fix = verdict.fix
        exchange.consoleLines = verdict.consoleLines(platform: platform, context: context)
        let response = ATSErrorResponse.upstreamFailure(
            url: exchange.url, error: verdict.error ?? .secureConnectionFailed, streamDomain: verdict.streamDomain,
            streamCode: verdict.streamCode, rule: verdict.rule, explanation: verdict.reasons.joined(separator: "; "),
            fix: verdict.fix, consoleLines: exchange.consoleLines)
        pendingUpstream = []
        pendingParts = []
        if case .probing = exchange.state {
            // The CONNECT of a passthrough tunnel: answered, recorded and closed (nothing follows a failed probe).
            sendLocal(LocalResponse(response), keepAlive: false)
            exchange.responseStatus = response.status
            exchange.state.answeredLocally()
            logExchange()
            close()
            return
        }
        respondLocally(response)
    }

    /// Answers the current exchange with 502 and -1011 (NSURLErrorBadServerResponse): the origin
    /// answered, but not with HTTP the client could use.
    mutating func failWithBadResponse(_ reason: String) {
        guard let exchange else { return close() }
        let code = NSURLErrorCode.badServerResponse
        let platform = exchange.policy.evaluator.options.platform
        var context = consoleContext()
        context.taskNumber = exchange.number
        exchange.result = .failed
        exchange.errorCode = code.rawValue
        exchange.streamError = nil
        exchange.rule = reason
        exchange.fix = nil
        exchange.consoleLines = [
            "\(context.prefix) \(context.taskName) finished with error [\(code.rawValue)] "
                + CFNetworkConsole.errorText(
                    code: code, url: exchange.url, host: exchange.target.host, platform: platform, context: context)
        ]
        pendingUpstream = []
        pendingParts = []
        respondLocally(
            ATSErrorResponse.upstreamFailure(
                url: exchange.url, error: code, streamDomain: nil, streamCode: nil, rule: reason, explanation: reason,
                fix: nil, consoleLines: exchange.consoleLines))
    }

    /// Sends a locally generated response for the current exchange and finishes it.
    mutating func respondLocally(_ response: ATSErrorResponse) {
        guard let exchange else { return }
        if exchange.state.responseStarted || !exchange.state.isForwarding {
            // Too late for an answer of the proxy's own: the client has (part of) another one already.
            closeUpstreamAndClient()
            return
        }
        if !exchange.state.requestComplete && exchange.requestHasBody { exchange.clientKeepAlive = false }
        exchange.state.answeredLocally()
        exchange.responseStatus = response.status
        exchange.responseHeaders = HTTP1Headers(response.headers.map { HTTP1Field(name: $0.name, value: $0.value) })
        let local = LocalResponse(response)
        exchange.bytesToClient += local.body.count
        exchange.upstreamKeepAlive = false
        sendLocal(local, keepAlive: exchange.clientKeepAlive, headOnly: exchange.method == "HEAD")
        finishIfComplete()
    }

    /// Delivers a response the proxy makes itself: to a lane's stream as parts, to an HTTP/1.1 client as text.
    mutating func sendLocal(_ response: LocalResponse, keepAlive: Bool, headOnly: Bool = false) {
        let parts = response.parts(keepAlive: keepAlive, headOnly: headOnly)
        if isStreamSession {
            for part in parts { respondToStream(part) }
            return
        }
        var bytes: [UInt8] = []
        HTTP1ResponseEncoder.writeLocal(parts, into: &bytes)
        sendToClient(bytes)
    }

    /// A response that is not part of an exchange (bad requests, loops); closes afterwards when
    /// `keepAlive` is false.
    mutating func answerLocally(status: Int, reason: String, body: String, keepAlive: Bool) {
        sendLocal(LocalResponse.text(status: status, reason: reason, body), keepAlive: keepAlive)
        if !keepAlive { close() }
    }

    /// A request or CONNECT the proxy refuses before any upstream is involved (misdirected inside a tunnel, a
    /// target on the proxy host for a client elsewhere): answered with `status`, recorded as failed, closed.
    mutating func refuse(_ head: HTTP1RequestHead, status: Int, reason: String, text: String) {
        let body = "ats-proxy: \(text)\n"
        let url: String
        switch head.target {
        case .authority(let authority): url = "https://\(authority)/"
        case .absolute, .asterisk: url = head.target.description
        case .origin(let path): url = (role.tunnel?.origin ?? "") + path
        }
        let number = head.method == "CONNECT" ? requestCount + 1 : requestCount
        commands.append(
            .log(
                RequestRecord(
                    time: now, clientAddress: clientAddress, taskID: taskIDPrefix + String(number), method: head.method,
                    url: url, httpProtocol: clientProtocol, source: .urlsession, result: .failed, atsRequired: false,
                    ruleChain: [], rule: text, status: status, requestHeaders: head.headers.fields,
                    bytesToClient: body.utf8.count)))
        answerLocally(status: status, reason: reason, body: body, keepAlive: false)
        close()
    }

    /// Why a client on another machine may not reach `host`.
    static func localTargetText(_ host: String) -> String {
        "\(host) is the machine the proxy runs on; clients on other machines may not reach its own services (start ats-proxy with --allow-local-targets to allow it)"
    }

    /// Serves the CA onboarding site (never proxied).
    mutating func answerOnboarding(_ head: HTTP1RequestHead, path: String, framing: HTTP1BodyFraming) {
        guard let site = services.onboarding else {
            answerProxyInfo(head, framing: framing)
            return
        }
        let keepAlive = framing == .none && HTTP1ProxyHeaders.isKeepAlive(version: head.version, headers: head.headers)
        let page: OnboardingSite.Page
        if head.method == "GET" || head.method == "HEAD" {
            page = site.page(for: path.hasPrefix("/") ? path : "/" + path)
        } else {
            page = OnboardingSite.Page(
                status: 405, reason: "Method Not Allowed", contentType: "text/plain; charset=utf-8", fileName: nil,
                body: Array("ats-proxy: onboarding pages answer GET only\n".utf8))
        }
        sendLocal(LocalResponse(page), keepAlive: keepAlive, headOnly: head.method == "HEAD")
        // Kept alive, the parser resumes at this request's message end (`requestEnd` without an exchange), which
        // is still on its way: resuming here would start a pipelined request before it, and that end would then
        // end the new request a second time.
        if !keepAlive { close() }
    }

    /// A request addressed to the proxy itself (origin-form): the onboarding site, or a short page
    /// saying what this is.
    mutating func answerProxyInfo(_ head: HTTP1RequestHead, framing: HTTP1BodyFraming) {
        if services.onboarding != nil, case .origin(let path) = head.target {
            answerOnboarding(head, path: path, framing: framing)
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
