/// What the parser reports, in wire order. Body and upgrade bytes are slices of the caller's input
/// (no copy); a consumer that keeps them past the next `feed` keeps that input's storage alive.
public enum HTTP1Event: Hashable, Sendable {
    /// A complete request head and how its body is framed (`.tunnel` for CONNECT).
    case request(HTTP1RequestHead, body: HTTP1BodyFraming)
    /// A complete response head (1xx interim responses included) and how its body is framed.
    case response(HTTP1ResponseHead, body: HTTP1BodyFraming)
    /// The next piece of the body, already de-chunked.
    case body(ArraySlice<UInt8>)
    /// The trailer section of a chunked body; only reported when it has fields.
    case trailers(HTTP1Headers)
    /// The message is complete. The parser now pauses: further bytes are held until `resume()`.
    case messageEnd
    /// The connection stopped speaking HTTP/1 (CONNECT, 2xx to CONNECT, 101); the bytes that
    /// followed the head are handed over raw and the parser accepts no more input.
    case upgraded(remaining: ArraySlice<UInt8>)
    /// The input broke a rule; the parser accepts no more input and the connection must close.
    case failed(HTTP1ParseError)
}
