extension HTTP1ParseError {
    /// The standard reason phrase of `status`.
    public var statusReasonPhrase: String {
        switch status {
        case 431: "Request Header Fields Too Large"
        case 501: "Not Implemented"
        case 505: "HTTP Version Not Supported"
        default: "Bad Request"
        }
    }

    /// A complete `Connection: close` response that refuses the request: the status, a text body
    /// with the reason, and framing a client can read before the proxy closes the connection.
    public func rejectionResponse() -> [UInt8] {
        let body = Array("\(reason)\n".utf8)
        let head = HTTP1ResponseHead(
            status: status, reason: statusReasonPhrase,
            headers: [
                "Content-Type": "text/plain; charset=utf-8", "Content-Length": String(body.count),
                "Connection": "close",
            ])
        var bytes: [UInt8] = []
        HTTP1Serializer.writeResponseHead(head, into: &bytes)
        bytes.append(contentsOf: body)
        return bytes
    }
}
