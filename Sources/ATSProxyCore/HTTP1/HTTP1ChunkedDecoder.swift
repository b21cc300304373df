/// Decodes the chunked transfer coding (RFC 9112 §7.1) incrementally, without copying chunk data.
///
/// Feed it chunks of the connection's bytes; it returns slices of data, and when the last-chunk's
/// trailer section ends, the trailers and the number of bytes consumed. Trailer bytes are collected
/// by an `HTTP1HeadScanner` (same 64 KiB limit and line rules as a head).
struct HTTP1ChunkedDecoder {
    /// Where in the chunked grammar the decoder is.
    /// Position inside `chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )`.
    enum ExtensionPhase {
        /// After `;`: optional whitespace, then a name.
        case beforeName
        /// Inside the name token.
        case name
        /// Whitespace after a name: `;`, `=` or the end of the line may follow.
        case afterName
        /// After `=`: optional whitespace, then a token or a quoted string.
        case beforeValue
        /// Inside a token value.
        case token
        /// Inside a quoted-string value.
        case quoted
        /// After a backslash inside a quoted string.
        case quotedEscape
        /// After a value: whitespace, `;` or the end of the line.
        case afterValue
    }

    enum State {
        /// Reading hex digits of a chunk size; `digits` counted so far.
        case size(value: Int, digits: Int)
        /// Whitespace after the size: only more whitespace or `;` may follow.
        case sizeWhitespace(value: Int)
        /// Inside chunk extensions, at `phase` of the grammar, `length` bytes in.
        case extensions(value: Int, phase: ExtensionPhase, length: Int)
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
        case end(trailers: HTTPFields, consumed: Int)
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
                    let section = trailerScanner.finishSection(input[index...], consumed: consumed)
                    do {
                        let trailers = try HTTP1HeadParser.parseTrailers(section)
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
            case HTTP1ASCII.semicolon: state = .extensions(value: value, phase: .beforeName, length: 0)
            case HTTP1ASCII.space, HTTP1ASCII.htab: state = .sizeWhitespace(value: value)
            case HTTP1ASCII.lf: return HTTP1ParseError(.bareLF)
            default: return HTTP1ParseError(.invalidChunkSize)
            }
        case .sizeWhitespace(let value):
            switch byte {
            case HTTP1ASCII.space, HTTP1ASCII.htab: break
            case HTTP1ASCII.semicolon: state = .extensions(value: value, phase: .beforeName, length: 0)
            default: return HTTP1ParseError(.invalidChunkSize)
            }
        case .extensions(let value, let phase, let length):
            return advanceExtension(byte, value: value, phase: phase, length: length)
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

    /// `chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )` (RFC 9112
    /// §7.1.1), byte by byte: an extension without a name, a value without `=`, or bytes outside
    /// the grammar are rejected.
    private mutating func advanceExtension(_ byte: UInt8, value: Int, phase: ExtensionPhase, length: Int)
        -> HTTP1ParseError?
    {
        guard length < Self.extensionLimit else { return HTTP1ParseError(.invalidChunkExtension) }
        if byte == HTTP1ASCII.lf && phase != .quoted && phase != .quotedEscape { return HTTP1ParseError(.bareLF) }
        let isSpace = byte == HTTP1ASCII.space || byte == HTTP1ASCII.htab
        let isToken = HTTP1ASCII.isTokenCharacter(byte)
        let next: ExtensionPhase
        switch phase {
        case .beforeName:
            if isSpace { next = .beforeName } else if isToken { next = .name } else { return invalidExtension() }
        case .name, .afterName:
            if byte == HTTP1ASCII.cr {
                state = .sizeLineFeed(value: value)
                return nil
            }
            if byte == HTTP1ASCII.semicolon {
                next = .beforeName
            } else if byte == HTTP1ASCII.equals {
                next = .beforeValue
            } else if isSpace {
                next = .afterName
            } else if isToken && phase == .name {
                next = .name
            } else {
                return invalidExtension()
            }
        case .beforeValue:
            if isSpace {
                next = .beforeValue
            } else if byte == HTTP1ASCII.quote {
                next = .quoted
            } else if isToken {
                next = .token
            } else {
                return invalidExtension()
            }
        case .token, .afterValue:
            if byte == HTTP1ASCII.cr {
                state = .sizeLineFeed(value: value)
                return nil
            }
            if byte == HTTP1ASCII.semicolon {
                next = .beforeName
            } else if isSpace {
                next = .afterValue
            } else if isToken && phase == .token {
                next = .token
            } else {
                return invalidExtension()
            }
        case .quoted:
            guard HTTP1ASCII.isFieldValueCharacter(byte) else { return invalidExtension() }
            if byte == HTTP1ASCII.quote {
                next = .afterValue
            } else if byte == HTTP1ASCII.backslash {
                next = .quotedEscape
            } else {
                next = .quoted
            }
        case .quotedEscape:
            guard HTTP1ASCII.isFieldValueCharacter(byte) else { return invalidExtension() }
            next = .quoted
        }
        state = .extensions(value: value, phase: next, length: length + 1)
        return nil
    }

    private func invalidExtension() -> HTTP1ParseError { HTTP1ParseError(.invalidChunkExtension) }
}
