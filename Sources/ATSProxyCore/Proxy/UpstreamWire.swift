/// The wire an upstream speaks, which decides how an exchange's request parts reach it: a type, so that no code
/// compares protocol names to choose an encoder.
///
/// The raw value is the protocol's ALPN name.
public enum UpstreamWire: String, Sendable, Equatable {
    /// A connection of the leg's own speaking HTTP/1.1: request parts become text (`HTTP1RequestEncoder`).
    case http1 = "http/1.1"
    /// A channel of a shared HTTP/2 link: request parts go to the link as they are (`sendToUpstreamChannel`), and
    /// the link encodes them as frames.
    case h2
}

/// The upstream codec of an HTTP/1.1 connection, request side: writes an exchange's request parts as HTTP/1.1 text
/// (the only place the request side does). A fresh one for each upstream a request is sent to.
///
/// Value type; owned by one `Exchange`, used on its session's loop.
struct HTTP1RequestEncoder {
    /// Frames the body as the head announced it.
    private var body: HTTP1BodyWriter

    /// An encoder for a request whose body the client framed as `framing`.
    init(framing: HTTPBodyFraming) {
        body = HTTP1BodyWriter(framing: framing)
    }

    /// Appends the text of `part` to `bytes`. A chunked head without `Transfer-Encoding` (a body of unknown length
    /// from an HTTP/2 client) gets the field, since HTTP/1.1 frames such a body with chunked coding; the end after
    /// trailers adds nothing. Body bytes beyond what the head announced are dropped here; the exchange checks
    /// them against the head before they get this far. Traps on a part that is not a request part.
    mutating func encode(_ part: HTTPPart, into bytes: inout [UInt8]) {
        switch part {
        case .request(var head, let framing):
            if framing == .chunked && !head.headers.contains("Transfer-Encoding") {
                head.headers.append(name: "Transfer-Encoding", value: "chunked")
            }
            HTTP1Serializer.writeRequestHead(head, into: &bytes)
        case .body(let slice):
            try? body.write(slice, into: &bytes)
        case .trailers(let trailers):
            guard !body.isFinished else { return }
            try? body.finish(trailers: trailers, into: &bytes)
        case .messageEnd:
            guard !body.isFinished else { return }
            try? body.finish(trailers: [:], into: &bytes)
        case .response, .upgraded, .failed:
            preconditionFailure("HTTP1RequestEncoder: \(part) is not a request part")
        }
    }
}
