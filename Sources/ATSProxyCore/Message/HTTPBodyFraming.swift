/// How the body after a head is delimited (RFC 9112 §6.3); the parser decides it, the proxy uses it
/// to re-frame when forwarding.
public enum HTTPBodyFraming: Hashable, Sendable {
    /// No body: HEAD responses, 1xx/204/304, requests without Content-Length or Transfer-Encoding.
    case none
    /// Exactly this many bytes.
    case contentLength(Int)
    /// Chunked transfer coding, possibly with trailers.
    case chunked
    /// Everything until the peer closes (responses only).
    case untilClose
    /// The connection stops being HTTP after the head: CONNECT requests, 2xx to CONNECT, 101.
    case tunnel

    /// Framing of a request (RFC 9112 §6.3 rules 4–7 for requests). Rejects every smuggling pattern.
    static func forRequest(_ head: HTTPRequestHead) throws(HTTP1ParseError) -> HTTPBodyFraming {
        if head.method == "CONNECT" { return .tunnel }
        return try fromFields(head.headers, version: head.version, isRequest: true) ?? .none
    }

    /// Framing of a response to a request with `requestMethod` (RFC 9112 §6.3 rules 1–7).
    static func forResponse(_ head: HTTPResponseHead, requestMethod: String) throws(HTTP1ParseError)
        -> HTTPBodyFraming
    {
        if head.status == 101 { return .tunnel }
        if requestMethod == "CONNECT" && head.status >= 200 && head.status < 300 { return .tunnel }
        if requestMethod == "HEAD" || head.status < 200 || head.status == 204 || head.status == 304 {
            return .none
        }
        return try fromFields(head.headers, version: head.version, isRequest: false) ?? .untilClose
    }

    /// Framing from Transfer-Encoding and Content-Length, or nil when neither is present.
    private static func fromFields(_ headers: HTTPFields, version: HTTP1Version, isRequest: Bool)
        throws(HTTP1ParseError) -> HTTPBodyFraming?
    {
        var hasTransferEncoding = false
        var hasContentLength = false
        // Content-Length values are checked as they come (no list of them is built); the first fault is
        // kept and reported only if Transfer-Encoding does not take precedence.
        var length: Int?
        var lengthFault: HTTP1ParseError?
        for field in headers.fields {
            switch field.name.utf8.count {
            case 14 where HTTPFields.nameMatches(field.name, "Content-Length"):
                hasContentLength = true
                if lengthFault == nil {
                    do throws(HTTP1ParseError) {
                        try accumulateContentLength(field.value, into: &length)
                    } catch {
                        lengthFault = error
                    }
                }
            case 17 where HTTPFields.nameMatches(field.name, "Transfer-Encoding"): hasTransferEncoding = true
            default: continue
            }
        }
        if hasTransferEncoding {
            // Both present is a smuggling signature; RFC 9112 §6.3 allows rejecting it, and we do on
            // both sides. TE in HTTP/1.0 means the framing is faulty (RFC 9112 §6.1).
            if hasContentLength { throw HTTP1ParseError(.contentLengthWithTransferEncoding) }
            if !version.isAtLeastHTTP11 { throw HTTP1ParseError(.transferEncodingInHTTP10) }
            return try transferCoding(headers.listElements("Transfer-Encoding"), isRequest: isRequest)
        }
        guard hasContentLength else { return nil }
        if let lengthFault { throw lengthFault }
        guard let length else { throw HTTP1ParseError(.invalidContentLength) }
        return .contentLength(length)
    }

    /// Only `chunked` alone is implemented. A final coding other than chunked (or chunked applied
    /// twice) is a framing error for requests (400); for responses it means read-until-close. Other
    /// codings before chunked are valid HTTP but not implemented by this proxy (501).
    private static func transferCoding(_ codings: [Substring], isRequest: Bool) throws(HTTP1ParseError)
        -> HTTPBodyFraming
    {
        func isChunked(_ coding: Substring) -> Bool { HTTP1ASCII.equalsIgnoringCase(coding.utf8, "chunked".utf8) }
        guard let last = codings.last, isChunked(last), codings.filter(isChunked).count == 1 else {
            if isRequest || codings.isEmpty { throw HTTP1ParseError(.transferEncodingNotChunked) }
            return .untilClose
        }
        guard codings.count == 1 else { throw HTTP1ParseError(.unsupportedTransferEncoding) }
        return .chunked
    }

    /// Content-Length: one decimal number; a list or repeated fields must all carry the same value. Checks
    /// one field's `value` against the length the earlier fields gave (`result`, nil before the first).
    private static func accumulateContentLength(_ value: String, into result: inout Int?) throws(HTTP1ParseError) {
        var sawElement = false
        var invalid = false
        var conflicting = false
        var current = result
        // An empty element ("5,,5" is fine, "" or "," is not) leaves nothing to parse.
        _ = HTTP1ASCII.forEachListElement(of: value) { element in
            sawElement = true
            guard element.count <= 18, element.allSatisfy(HTTP1ASCII.isDigit) else {
                invalid = true
                return true
            }
            let length = element.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            if let current, current != length {
                conflicting = true
                return true
            }
            current = length
            return false
        }
        if invalid || !sawElement { throw HTTP1ParseError(.invalidContentLength) }
        if conflicting { throw HTTP1ParseError(.conflictingContentLength) }
        result = current
    }
}
