import ATSPolicy
import ATSTLS
import Foundation

/// Answers the leg makes itself for its exchange: ATS failures (403/502/504 with X-ATS-* fields) and responses the
/// origin broke, delivered like a relayed response.
extension ExchangeLeg {
    /// Answers the current exchange with the verdict's 502/504 and the X-ATS-* headers.
    mutating func failExchange(verdict: UpstreamVerdict) {
        guard let exchange else { return shutDown() }
        let verdict = verdict.withFix(url: exchange.url, evaluator: exchange.policy.evaluator)
        let platform = exchange.policy.evaluator.options.platform
        let context = consoleContext()
        exchange.outcome.result = .failed
        exchange.outcome.errorCode = verdict.error?.rawValue
        exchange.outcome.streamError = verdict.streamError
        exchange.outcome.rule = verdict.rule
        exchange.outcome.fix = verdict.fix
        exchange.outcome.consoleLines = verdict.consoleLines(platform: platform, context: context)
        let response = ATSErrorResponse.upstreamFailure(
            url: exchange.url, error: verdict.error ?? .secureConnectionFailed, streamDomain: verdict.streamDomain,
            streamCode: verdict.streamCode, rule: verdict.rule, explanation: verdict.reasons.joined(separator: "; "),
            fix: verdict.fix, consoleLines: exchange.outcome.consoleLines)
        upstream.pendingBytes = []
        upstream.pendingParts = []
        if case .probing = exchange.state {
            // The CONNECT of a passthrough tunnel: answered, recorded and closed (nothing follows a failed probe). A
            // raw tunnel's CONNECT was answered already, and its client speaks no HTTP: it is only closed.
            // A SOCKS5 client's failed probe is refused with a SOCKS5 reply, the session's to write.
            if route.isRawTunnel {
            } else if route.isSOCKS {
                signals.append(.tunnelRefused(SOCKS5Reply.code(for: verdict.error)))
            } else {
                sendLocal(LocalResponse(response), keepAlive: false)
            }
            exchange.response.status = response.status
            exchange.state.answeredLocally()
            logExchange()
            shutDown()
            return
        }
        respondLocally(response)
    }

    /// Answers the current exchange with 502 and -1011 (NSURLErrorBadServerResponse): the origin
    /// answered, but not with HTTP the client could use.
    mutating func failWithBadResponse(_ reason: String) {
        guard let exchange else { return shutDown() }
        let code = NSURLErrorCode.badServerResponse
        let platform = exchange.policy.evaluator.options.platform
        var context = consoleContext()
        context.taskNumber = exchange.number
        exchange.outcome.result = .failed
        exchange.outcome.errorCode = code.rawValue
        exchange.outcome.streamError = nil
        exchange.outcome.rule = reason
        exchange.outcome.fix = nil
        exchange.outcome.consoleLines = [
            "\(context.prefix) \(context.taskName) finished with error [\(code.rawValue)] "
                + CFNetworkConsole.errorText(
                    code: code, url: exchange.url, host: exchange.target.host, platform: platform, context: context)
        ]
        upstream.pendingBytes = []
        upstream.pendingParts = []
        respondLocally(
            ATSErrorResponse.upstreamFailure(
                url: exchange.url, error: code, streamDomain: nil, streamCode: nil, rule: reason, explanation: reason,
                fix: nil, consoleLines: exchange.outcome.consoleLines))
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
        exchange.response.status = response.status
        exchange.response.headers = HTTPFields(response.headers.map { HTTPField(name: $0.name, value: $0.value) })
        let local = LocalResponse(response)
        exchange.bytesToClient += local.body.count
        exchange.response.upstreamKeepAlive = false
        sendLocal(local, keepAlive: exchange.clientKeepAlive, headOnly: exchange.method == "HEAD")
        finishIfComplete()
    }

    /// Delivers a response the proxy makes itself: to a stream as parts, to an HTTP/1.1 client as text.
    mutating func sendLocal(_ response: LocalResponse, keepAlive: Bool, headOnly: Bool = false) {
        let parts = response.parts(keepAlive: keepAlive, headOnly: headOnly)
        if deliversToStream {
            for part in parts { respondToStream(part) }
            return
        }
        var bytes: [UInt8] = []
        HTTP1ResponseEncoder.writeLocal(parts, into: &bytes)
        sendToClient(bytes)
    }
}
