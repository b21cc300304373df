import ATSPolicy

/// The HTTP response the proxy sends in place of a load that ATS would fail, so that any HTTP
/// client can read why: a status, `X-ATS-*` headers and a plain-text explanation.
public struct ATSErrorResponse: Sendable, Equatable {
    public let status: Int
    public let reason: String
    /// Header fields in order.
    public let headers: [(name: String, value: String)]
    public let body: String

    public static func == (lhs: ATSErrorResponse, rhs: ATSErrorResponse) -> Bool {
        lhs.status == rhs.status && lhs.reason == rhs.reason && lhs.body == rhs.body
            && lhs.headers.map(\.name) == rhs.headers.map(\.name)
            && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }

    /// 403 for a cleartext load ATS blocks (-1022): the origin is never contacted.
    public static func cleartextBlocked(_ decision: ATSDecision, consoleLines: [String]) -> ATSErrorResponse {
        let code = NSURLErrorCode.appTransportSecurityRequiresSecureConnection
        var body = "ats-proxy blocked this request the way App Transport Security would on \(decision.platform).\n\n"
        body += "\(decision.target.url)\n"
        body +=
            "NSURLErrorDomain \(code.rawValue): \(code.localizedDescription(host: decision.target.host, platform: decision.platform))\n\n"
        body += "Why:\n"
        for (index, step) in decision.ruleChain.enumerated() { body += "  \(index + 1). \(step.text)\n" }
        if let fix = decision.fix { body += "\nFix: \(fix)\n" }
        if !consoleLines.isEmpty {
            body += "\nWhat the device logs:\n"
            for line in consoleLines { body += "  \(line)\n" }
        }
        return ATSErrorResponse(
            status: 403, reason: "Forbidden",
            headers: [
                ("X-ATS-Error", "\(code.rawValue)"), ("X-ATS-Rule", oneLine(decision.ruleSummary)),
            ] + (decision.fix.map { [("X-ATS-Fix", oneLine($0))] } ?? []) + [
                ("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store"),
            ], body: body)
    }

    /// 502 (or 504 for timeouts) for a load that fails upstream: TLS verdicts and connection
    /// faults. `streamDomain`/`streamCode` give the `[3:-9802]` pair.
    public static func upstreamFailure(
        url: String, error: NSURLErrorCode, streamDomain: Int?, streamCode: Int?, rule: String, explanation: String,
        fix: String?, consoleLines: [String]
    ) -> ATSErrorResponse {
        var headers: [(String, String)] = [("X-ATS-Error", "\(error.rawValue)")]
        if let streamDomain, let streamCode { headers.append(("X-ATS-Stream-Error", "\(streamDomain):\(streamCode)")) }
        headers.append(("X-ATS-Rule", oneLine(rule)))
        if let fix { headers.append(("X-ATS-Fix", oneLine(fix))) }
        headers.append(("Content-Type", "text/plain; charset=utf-8"))
        headers.append(("Cache-Control", "no-store"))
        var body = "ats-proxy failed this load the way the device would.\n\n\(url)\n"
        let pair = streamDomain.flatMap { d in streamCode.map { " [\(d):\($0)]" } } ?? ""
        body += "NSURLErrorDomain \(error.rawValue)\(pair): \(explanation)\n"
        if let fix { body += "\nFix: \(fix)\n" }
        if !consoleLines.isEmpty {
            body += "\nWhat the device logs:\n"
            for line in consoleLines { body += "  \(line)\n" }
        }
        let timeout = error == .timedOut
        return ATSErrorResponse(
            status: timeout ? 504 : 502, reason: timeout ? "Gateway Timeout" : "Bad Gateway", headers: headers,
            body: body)
    }

    /// Header fields added to an origin's response that ATS would have failed but `--mode report`
    /// let through, so a client can tell which answers a device would not have received:
    /// `X-ATS-Would-Fail: -1200 [3:-9836]`, `X-ATS-Error`, `X-ATS-Stream-Error`, `X-ATS-Rule` and
    /// `X-ATS-Fix`.
    public static func reportedFields(errorCode: Int?, streamError: StreamError?, rule: String, fix: String?)
        -> [HTTPField]
    {
        let code = errorCode.map(String.init) ?? "?"
        var fields = [HTTPField(name: "X-ATS-Would-Fail", value: code + (streamError.map { " [\($0)]" } ?? ""))]
        fields.append(HTTPField(name: "X-ATS-Error", value: code))
        if let streamError { fields.append(HTTPField(name: "X-ATS-Stream-Error", value: streamError.description)) }
        fields.append(HTTPField(name: "X-ATS-Rule", value: oneLine(rule)))
        if let fix { fields.append(HTTPField(name: "X-ATS-Fix", value: oneLine(fix))) }
        return fields
    }

    /// Header values must be one line of visible ASCII; anything else becomes a space or `?`.
    static func oneLine(_ text: String) -> String {
        String(
            text.unicodeScalars.map { scalar -> Character in
                if scalar == "\r" || scalar == "\n" || scalar == "\t" { return " " }
                if scalar.value >= 0x20 && scalar.value < 0x7F { return Character(scalar) }
                switch scalar {
                case "→": return ">"
                case "–", "—": return "-"
                case "≥": return "+"
                case "“", "”": return "\""
                default: return "?"
                }
            })
    }
}
