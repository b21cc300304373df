/// One part of an HTTP message, whatever the version it travels in: the proxy's one message vocabulary. The
/// HTTP/1.1 parser reports requests and responses as parts in wire order, the HTTP/2 frontend turns streams into
/// them, an HTTP/2 upstream channel takes and returns them, and `HTTP1ResponseEncoder` and the frontend turn them
/// back into HTTP/1.1 text or HTTP/2 frames: only those codecs read or write a wire format. Two cases are the
/// HTTP/1.1 parser's own: `upgraded` (the connection left HTTP) and `failed`.
///
/// Body and upgrade bytes are slices of the caller's input (no copy); a consumer that keeps them past the next
/// `feed` keeps that input's storage alive.
public enum HTTPPart: Hashable, Sendable {
    /// A complete request head and how its body is framed (`.tunnel` for CONNECT).
    case request(HTTPRequestHead, body: HTTPBodyFraming)
    /// A complete response head (1xx interim responses included) and how its body is framed.
    case response(HTTPResponseHead, body: HTTPBodyFraming)
    /// The next piece of the body, already de-chunked.
    case body(ArraySlice<UInt8>)
    /// The trailer section of a chunked body; only reported when it has fields.
    case trailers(HTTPFields)
    /// The message is complete. The parser now pauses: further bytes are held until `resume()`.
    case messageEnd
    /// The connection stopped speaking HTTP/1 (CONNECT, 2xx to CONNECT, 101); the bytes that
    /// followed the head are handed over raw and the parser accepts no more input.
    case upgraded(remaining: ArraySlice<UInt8>)
    /// The input broke a rule; the parser accepts no more input and the connection must close.
    case failed(HTTP1ParseError)
}
