/// Decodes the chunked transfer coding (RFC 9112 §7.1) incrementally, without copying chunk data.
///
/// Feed it chunks of the connection's bytes; it returns slices of data, and when the last-chunk's
/// trailer section ends, the trailers and the number of bytes consumed. Trailer bytes are collected
/// by an `HTTP1HeadScanner` (same 64 KiB limit and line rules as a head).
struct HTTP1ChunkedDecoder {
    /// Where in the chunked grammar the decoder is.
    enum State {
        /// Reading hex digits of a chunk size; `digits` counted so far.
        case size(value: Int, digits: Int)
        /// Whitespace after the size: only more whitespace or `;` may follow.
        case sizeWhitespace(value: Int)
        /// Inside chunk extensions; `quoted`/`escaped` track a quoted-string.
        case extensions(value: Int, quoted: Bool, escaped: Bool, length: Int)
        /// Saw CR ending the size line.
        case sizeLineFeed(value: Int)
        /// Reading chunk data; `remaining` bytes of this chunk left.
        case data(remaining: Int)
        /// Expecting CR after chunk data.
        case dataCarriageReturn
        /// Expecting LF after chunk data.
        case dataLineFeed
        /// Reading the trailer section after the last-chunk.
        case trailers
    }

    /// What one call produced.
    enum Step {
        /// Chunk data (a slice of the input).
        case data(ArraySlice<UInt8>)
        /// The message ended with these trailers after `consumed` bytes of the input.
        case end(trailers: HTTP1Headers, consumed: Int)
        /// A framing error.
        case failed(HTTP1ParseError)
    }

    /// Longest size line extension we accept; longer is treated as an attack.
    static let extensionLimit = 4096

    private var state: State = .size(value: 0, digits: 0)
    private var trailerScanner = HTTP1HeadScanner(skipsLeadingEmptyLines: false)

    /// Decodes `input`, appending steps to `steps`. Stops after `.end` or `.failed`.
    mutating func decode(_ input: ArraySlice<UInt8>, into steps: inout [Step]) {
        var index = input.startIndex
        while index < input.endIndex {
            switch state {
            case .data(let remaining):
                let count = min(remaining, input.endIndex - index)
                steps.append(.data(input[index..<(index + count)]))
                index += count
                state = remaining == count ? .dataCarriageReturn : .data(remaining: remaining - count)
            case .trailers:
                switch trailerScanner.scan(input[index...]) {
                case .needMore:
                    return
                case .complete(let consumed):
                    do {
                        let trailers = try HTTP1HeadParser.parseTrailers(trailerScanner.buffer)
                        steps.append(.end(trailers: trailers, consumed: index - input.startIndex + consumed))
                    } catch {
                        steps.append(.failed(error))
                    }
                    return
                case .failed(let error):
                    steps.append(.failed(error))
                    return
                }
            case .size, .sizeWhitespace, .extensions, .sizeLineFeed, .dataCarriageReturn, .dataLineFeed:
                if let error = advance(input[index]) {
                    steps.append(.failed(error))
                    return
                }
                index += 1
            }
        }
    }

    /// Consumes one byte of framing (size line or data CRLF); returns an error if it is invalid.
    private mutating func advance(_ byte: UInt8) -> HTTP1ParseError? {
        switch state {
        case .size(let value, let digits):
            if let digit = HTTP1ASCII.hexValue(byte) {
                guard digits < 16, value <= (Int.max - digit) >> 4 else { return HTTP1ParseError(.chunkSizeOverflow) }
                state = .size(value: value << 4 | digit, digits: digits + 1)
                return nil
            }
            guard digits > 0 else { return HTTP1ParseError(.invalidChunkSize) }
            switch byte {
            case HTTP1ASCII.cr: state = .sizeLineFeed(value: value)
            case HTTP1ASCII.semicolon: state = .extensions(value: value, quoted: false, escaped: false, length: 0)
            case HTTP1ASCII.space, HTTP1ASCII.htab: state = .sizeWhitespace(value: value)
            case HTTP1ASCII.lf: return HTTP1ParseError(.bareLF)
            default: return HTTP1ParseError(.invalidChunkSize)
            }
        case .sizeWhitespace(let value):
            switch byte {
            case HTTP1ASCII.space, HTTP1ASCII.htab: break
            case HTTP1ASCII.semicolon: state = .extensions(value: value, quoted: false, escaped: false, length: 0)
            default: return HTTP1ParseError(.invalidChunkSize)
            }
        case .extensions(let value, let quoted, let escaped, let length):
            return advanceExtension(byte, value: value, quoted: quoted, escaped: escaped, length: length)
        case .sizeLineFeed(let value):
            guard byte == HTTP1ASCII.lf else { return HTTP1ParseError(.bareCR) }
            state = value == 0 ? .trailers : .data(remaining: value)
        case .dataCarriageReturn:
            guard byte == HTTP1ASCII.cr else { return HTTP1ParseError(.invalidChunkTerminator) }
            state = .dataLineFeed
        case .dataLineFeed:
            guard byte == HTTP1ASCII.lf else { return HTTP1ParseError(.invalidChunkTerminator) }
            state = .size(value: 0, digits: 0)
        case .data, .trailers:
            preconditionFailure("HTTP1ChunkedDecoder.advance called in state \(state)")
        }
        return nil
    }

    /// `chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )`, checked by
    /// character class: tokens, `;`, `=`, whitespace outside quotes; qdtext and quoted-pairs inside.
    private mutating func advanceExtension(_ byte: UInt8, value: Int, quoted: Bool, escaped: Bool, length: Int)
        -> HTTP1ParseError?
    {
        guard length < Self.extensionLimit else { return HTTP1ParseError(.invalidChunkExtension) }
        let next = length + 1
        if quoted {
            guard HTTP1ASCII.isFieldValueCharacter(byte) else { return HTTP1ParseError(.invalidChunkExtension) }
            if escaped {
                state = .extensions(value: value, quoted: true, escaped: false, length: next)
            } else {
                let closes = byte == HTTP1ASCII.quote
                state = .extensions(
                    value: value, quoted: !closes, escaped: byte == HTTP1ASCII.backslash, length: next)
            }
            return nil
        }
        switch byte {
        case HTTP1ASCII.cr:
            state = .sizeLineFeed(value: value)
        case HTTP1ASCII.lf:
            return HTTP1ParseError(.bareLF)
        case HTTP1ASCII.quote:
            state = .extensions(value: value, quoted: true, escaped: false, length: next)
        case HTTP1ASCII.semicolon, HTTP1ASCII.equals, HTTP1ASCII.space, HTTP1ASCII.htab:
            state = .extensions(value: value, quoted: false, escaped: false, length: next)
        default:
            guard HTTP1ASCII.isTokenCharacter(byte) else { return HTTP1ParseError(.invalidChunkExtension) }
            state = .extensions(value: value, quoted: false, escaped: false, length: next)
        }
        return nil
    }
}
