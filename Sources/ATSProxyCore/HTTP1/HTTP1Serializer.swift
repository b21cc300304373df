import ATSHTTP2

/// Writes HTTP/1.1 message heads and chunked framing into a caller-owned byte buffer.
///
/// Stateless: appending into `inout [UInt8]` lets the connection reuse one output buffer and
/// coalesce a head with the first body bytes into one write. Field values are written as UTF-8.
public enum HTTP1Serializer {
    /// Appends `method SP target SP version CRLF fields CRLF`. Use `HTTPRequestHead.forOrigin()`
    /// first when sending an absolute-form request to an origin server.
    public static func writeRequestHead(_ head: HTTPRequestHead, into buffer: inout [UInt8]) {
        #if DEBUG
            HTTP1TextCounter.countWrite()
        #endif
        let target = head.target.description
        buffer.reserveCapacity(
            buffer.count + head.method.utf8.count + target.utf8.count + 13 + fieldsSize(head.headers))
        buffer.append(contentsOf: head.method.utf8)
        buffer.append(HTTP1ASCII.space)
        buffer.append(contentsOf: target.utf8)
        buffer.append(HTTP1ASCII.space)
        buffer.append(contentsOf: head.version.description.utf8)
        buffer.append(contentsOf: HTTP1ASCII.crlf)
        appendFields(head.headers, into: &buffer)
        buffer.append(contentsOf: HTTP1ASCII.crlf)
    }

    /// Appends `version SP status SP reason CRLF fields CRLF`.
    public static func writeResponseHead(_ head: HTTPResponseHead, into buffer: inout [UInt8]) {
        #if DEBUG
            HTTP1TextCounter.countWrite()
        #endif
        buffer.reserveCapacity(buffer.count + head.reason.utf8.count + 15 + fieldsSize(head.headers))
        appendStatusLine(head, into: &buffer)
        appendFields(head.headers, into: &buffer)
        buffer.append(contentsOf: HTTP1ASCII.crlf)
    }

    /// Appends a response head whose fields are `head`'s without those `filter` drops, followed by `extra`:
    /// what `removingHopByHop` and appending would produce, without copying the field list.
    public static func writeResponseHead(
        _ head: HTTPResponseHead, dropping filter: HTTP1ProxyHeaders.HopByHopFilter, appending extra: [HTTPField],
        into buffer: inout [UInt8]
    ) {
        #if DEBUG
            HTTP1TextCounter.countWrite()
        #endif
        var size = fieldsSize(head.headers)
        for field in extra { size += field.name.utf8.count + field.value.utf8.count + 4 }
        buffer.reserveCapacity(buffer.count + head.reason.utf8.count + 15 + size)
        appendStatusLine(head, into: &buffer)
        for field in head.headers where !filter.drops(field) { appendField(field, into: &buffer) }
        for field in extra { appendField(field, into: &buffer) }
        buffer.append(contentsOf: HTTP1ASCII.crlf)
    }

    /// `version SP status SP reason CRLF`.
    private static func appendStatusLine(_ head: HTTPResponseHead, into buffer: inout [UInt8]) {
        buffer.append(contentsOf: head.version.description.utf8)
        buffer.append(HTTP1ASCII.space)
        buffer.append(contentsOf: String(head.status).utf8)
        buffer.append(HTTP1ASCII.space)
        buffer.append(contentsOf: head.reason.utf8)
        buffer.append(contentsOf: HTTP1ASCII.crlf)
    }

    /// Appends one chunk (`size-in-hex CRLF data CRLF`). Empty data writes nothing, because an
    /// empty chunk would be the last-chunk.
    public static func writeChunk<Data: Collection<UInt8>>(_ data: Data, into buffer: inout [UInt8]) {
        guard !data.isEmpty else { return }
        buffer.append(contentsOf: String(data.count, radix: 16).utf8)
        buffer.append(contentsOf: HTTP1ASCII.crlf)
        buffer.append(contentsOf: data)
        buffer.append(contentsOf: HTTP1ASCII.crlf)
    }

    /// Appends the last-chunk `0 CRLF`, the trailer fields and the final CRLF.
    public static func writeLastChunk(trailers: HTTPFields = [:], into buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "0"))
        buffer.append(contentsOf: HTTP1ASCII.crlf)
        writeFields(trailers, into: &buffer)
        buffer.append(contentsOf: HTTP1ASCII.crlf)
    }

    /// The bytes of `name: value CRLF` per field plus the closing CRLF.
    static func fieldsSize(_ headers: HTTPFields) -> Int {
        var size = 2
        for field in headers.fields { size += field.name.utf8.count + field.value.utf8.count + 4 }
        return size
    }

    /// Appends `name: value CRLF` per field, in order.
    static func writeFields(_ headers: HTTPFields, into buffer: inout [UInt8]) {
        buffer.reserveCapacity(buffer.count + fieldsSize(headers))
        appendFields(headers, into: &buffer)
    }

    /// `writeFields` without the reservation (the caller reserved for the whole head).
    private static func appendFields(_ headers: HTTPFields, into buffer: inout [UInt8]) {
        for field in headers { appendField(field, into: &buffer) }
    }

    private static func appendField(_ field: HTTPField, into buffer: inout [UInt8]) {
        buffer.append(contentsOf: field.name.utf8)
        buffer.append(HTTP1ASCII.colon)
        buffer.append(HTTP1ASCII.space)
        FieldValueBytes.append(field.value, to: &buffer)
        buffer.append(contentsOf: HTTP1ASCII.crlf)
    }
}
