/// The client side of HTTP/1.1 for responses: turns response parts (a head, body pieces, trailers, the end) into
/// the text an HTTP/1.1 client reads. With the request parser, it is the proxy's HTTP/1.1 client codec: nothing
/// else writes a status line for a client.
///
/// It owns the framing decisions only HTTP/1.1 has: hop-by-hop fields are dropped from a relayed head; a body
/// delimited by the origin's close is re-chunked for a client that keeps its connection; a chunked body is sent
/// raw and ended by closing for an HTTP/1.0 client (which knows no chunked coding); a 101 head keeps its upgrade
/// fields and switches to raw bytes. One encoder per response; not thread-safe.
struct HTTP1ResponseEncoder {
    /// Frames the body of the head written last (nil before a final head, and after the end).
    private var body: HTTP1BodyWriter?

    /// Writes an interim (1xx) head as it is: informational responses are relayed unchanged.
    static func writeInterim(_ head: HTTPResponseHead, into bytes: inout [UInt8]) {
        precondition(head.isInterim, "HTTP1ResponseEncoder.writeInterim: \(head.status) is not interim")
        HTTP1Serializer.writeResponseHead(head, into: &bytes)
    }

    /// Writes a whole response the proxy makes itself (its parts carry their own framing fields).
    static func writeLocal(_ parts: [HTTPPart], into bytes: inout [UInt8]) {
        for part in parts {
            switch part {
            case .response(let head, _): HTTP1Serializer.writeResponseHead(head, into: &bytes)
            case .body(let slice): bytes.append(contentsOf: slice)
            case .messageEnd: break
            case .request, .trailers, .upgraded, .failed:
                preconditionFailure("HTTP1ResponseEncoder.writeLocal: \(part) is not part of a local response")
            }
        }
    }

    /// Writes the origin's final head for the client.
    ///
    /// - Parameters:
    ///   - framing: how the origin framed the body (the parser's or the HTTP/2 channel's framing).
    ///   - clientIsHTTP10: the client spoke HTTP/1.0.
    ///   - keepAlive: whether the client connection stays open after this response; set to false here when the
    ///     framing chosen for the client ends with a close, or when `closeAfter` says so.
    ///   - closeAfter: the connection must close after this response whatever the framing (the request is not
    ///     complete yet); decided after the body framing, which follows the keep-alive the client asked for.
    ///   - extra: fields to append (`--mode report`'s X-ATS-* fields).
    ///   - reserving: body bytes to make room for beside the head (nil: none), so that a small body joins the head
    ///     in one buffer.
    mutating func writeHead(
        _ head: HTTPResponseHead, framing: HTTPBodyFraming, clientIsHTTP10: Bool, keepAlive: inout Bool,
        closeAfter: Bool, extra: [HTTPField], reserving: Int?, into bytes: inout [UInt8]
    ) {
        precondition(!head.isInterim && body == nil, "HTTP1ResponseEncoder.writeHead: a second final head")
        if let reserving { bytes.reserveCapacity(bytes.count + 512 + reserving) }
        var clientHead = head
        clientHead.version = .http11
        if head.status == 101 {
            clientHead.headers = HTTP1ProxyHeaders.removingHopByHop(
                head.headers, options: HTTP1ProxyHeaders.Options(upgrading: true))
            HTTP1Serializer.writeResponseHead(clientHead, into: &bytes)
            body = HTTP1BodyWriter(framing: .tunnel)
            return
        }
        if clientIsHTTP10 && (framing == .chunked || framing == .untilClose) {
            // HTTP/1.0 knows no chunked coding: send the body raw and end it by closing.
            keepAlive = false
        }
        let dechunk = clientIsHTTP10 && framing == .chunked
        let rechunk = framing == .untilClose && keepAlive
        // The hop-by-hop fields are skipped while the head is written: no copy of the field list.
        let hopByHop = HTTP1ProxyHeaders.HopByHopFilter(
            head.headers, options: HTTP1ProxyHeaders.Options(reframing: rechunk || dechunk))
        var fields: [HTTPField] = []
        var clientFraming = framing
        if rechunk {
            fields.append(HTTPField(name: "Transfer-Encoding", value: "chunked"))
            clientFraming = .chunked
        } else if dechunk {
            clientFraming = .untilClose
        }
        if closeAfter { keepAlive = false }
        if !keepAlive { fields.append(HTTPField(name: "Connection", value: "close")) }
        fields += extra
        HTTP1Serializer.writeResponseHead(clientHead, dropping: hopByHop, appending: fields, into: &bytes)
        body = HTTP1BodyWriter(framing: clientFraming)
    }

    /// Writes a piece of the body in the client's framing (nothing before a final head).
    mutating func writeBody(_ slice: ArraySlice<UInt8>, into bytes: inout [UInt8]) {
        try? body?.write(slice, into: &bytes)
    }

    /// Ends the body (the last chunk with `trailers` where the client's framing carries them). Once only: the end
    /// after trailers adds nothing.
    mutating func finish(trailers: HTTPFields = [:], into bytes: inout [UInt8]) {
        guard var writer = body, !writer.isFinished else { return }
        try? writer.finish(trailers: trailers, into: &bytes)
        body = writer
    }
}
