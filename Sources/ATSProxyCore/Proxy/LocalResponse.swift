/// A response a session makes itself (the `X-ATS-*` 403/502/504 answers, 400/403/408/421/508, the onboarding
/// pages), as message parts: the same vocabulary relayed responses use, so that one path delivers it to an HTTP/1.1
/// client (as text) or to an HTTP/2 stream (as frames). Not covered: the `200 Connection established` of a
/// CONNECT (an HTTP/1.1-only answer with no body, written by `HTTP1Serializer` directly) and the HTTP/2 frontend's
/// own 405/421 for streams no lane serves.
struct LocalResponse: Sendable {
    /// The status code.
    var status: Int
    /// The reason phrase an HTTP/1.1 client sees.
    var reason: String
    /// The header fields in order, `Content-Length` included; `Connection: close` is added by `parts`.
    var fields: [HTTPField]
    /// The body.
    var body: [UInt8]

    /// The response as parts: the head (with `Connection: close` when the connection ends after it), the body
    /// unless `headOnly` (a HEAD request: the head keeps the body's length), and the message end.
    func parts(keepAlive: Bool, headOnly: Bool = false) -> [HTTPPart] {
        var headers = HTTPFields(fields)
        if !keepAlive { headers.append(name: "Connection", value: "close") }
        let head = HTTPResponseHead(status: status, reason: reason, headers: headers)
        var parts: [HTTPPart] = [.response(head, body: headOnly ? .none : .contentLength(body.count))]
        if !headOnly && !body.isEmpty { parts.append(.body(body[...])) }
        parts.append(.messageEnd)
        return parts
    }

    /// A short plain-text answer (400, 404, 508 …).
    static func text(status: Int, reason: String, _ text: String) -> LocalResponse {
        let body = Array(text.utf8)
        return LocalResponse(
            status: status, reason: reason,
            fields: [
                HTTPField(name: "Content-Type", value: "text/plain; charset=utf-8"),
                HTTPField(name: "Content-Length", value: String(body.count)),
            ], body: body)
    }

    /// An ATS failure answer: its `X-ATS-*` fields and explanation.
    init(_ response: ATSErrorResponse) {
        let body = Array(response.body.utf8)
        var fields = response.headers.map { HTTPField(name: $0.name, value: $0.value) }
        fields.append(HTTPField(name: "Content-Length", value: String(body.count)))
        self.init(status: response.status, reason: response.reason, fields: fields, body: body)
    }

    /// An onboarding page (the CA download carries its file name).
    init(_ page: OnboardingSite.Page) {
        var fields = [
            HTTPField(name: "Content-Type", value: page.contentType),
            HTTPField(name: "Content-Length", value: String(page.body.count)),
            HTTPField(name: "Cache-Control", value: "no-store"),
        ]
        if let fileName = page.fileName {
            fields.append(HTTPField(name: "Content-Disposition", value: "attachment; filename=\"\(fileName)\""))
        }
        self.init(status: page.status, reason: page.reason, fields: fields, body: page.body)
    }

    /// Memberwise.
    init(status: Int, reason: String, fields: [HTTPField], body: [UInt8]) {
        self.status = status
        self.reason = reason
        self.fields = fields
        self.body = body
    }
}
