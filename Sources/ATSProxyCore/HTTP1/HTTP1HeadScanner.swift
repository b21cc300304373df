/// Accumulates one header (or trailer) section across arbitrary chunks and finds its end.
///
/// A section that arrives in one chunk (the usual case) is handed back as a slice of that chunk,
/// never copied; only a section spread over several chunks is collected, in a buffer that is
/// released once the section is taken (an idle connection keeps none). It rejects while
/// scanning: bare CR, bare LF (tolerated by RFC 9112 §2.2 but refused here because a proxy and the
/// server behind it must agree on where lines end), NUL, and sections over the limit. A section
/// ends with an empty line; the section includes that final CRLF.
struct HTTP1HeadScanner {
    /// The result of scanning one chunk.
    enum Outcome {
        /// The section continues past the chunk; everything was consumed.
        case needMore
        /// The section ended; `consumed` bytes of the chunk belonged to it. Take it with
        /// `finishSection`.
        case complete(consumed: Int)
        /// The section broke a rule.
        case failed(HTTP1ParseError)
    }

    /// The maximum size of a section, CRLFs included.
    static let limit = 64 * 1024

    /// The section's bytes from earlier chunks.
    private(set) var buffer: [UInt8] = []
    /// Bytes on the current line, excluding CR.
    private var lineLength = 0
    /// Whether the last byte seen was CR.
    private var previousWasCR = false
    /// Empty lines skipped before a request line; they count toward the limit.
    private var skippedBytes = 0
    /// Whether a non-empty line has ended in this section (so an empty line now ends it).
    private var started = false
    /// Skip empty lines before the first line (request side, RFC 9112 §2.2).
    private let skipsLeadingEmptyLines: Bool

    init(skipsLeadingEmptyLines: Bool) {
        self.skipsLeadingEmptyLines = skipsLeadingEmptyLines
    }

    /// Whether nothing of a section has been seen yet.
    var isEmpty: Bool { buffer.isEmpty && skippedBytes == 0 }

    /// Forgets the section (and the buffer's memory).
    mutating func reset() {
        buffer = []
        lineLength = 0
        previousWasCR = false
        skippedBytes = 0
        started = false
    }

    /// Scans `input`; a section that does not end in it is kept in the buffer.
    mutating func scan(_ input: ArraySlice<UInt8>) -> Outcome {
        let outcome = input.withUnsafeBufferPointer { scanBytes($0) }
        switch outcome {
        case .needMore: collect(input)
        case .complete, .failed: return outcome
        }
        guard buffer.count + skippedBytes <= Self.limit else { return .failed(HTTP1ParseError(.headerSectionTooLarge)) }
        return outcome
    }

    /// The finished section after `.complete(consumed)` for `input` (the chunk just scanned), then
    /// ready for the next one. A slice of `input` when the whole section was in it.
    mutating func finishSection(_ input: ArraySlice<UInt8>, consumed: Int) -> ArraySlice<UInt8> {
        let tail = input.prefix(consumed)
        let section: ArraySlice<UInt8>
        if buffer.isEmpty {
            // Leading CRLFs were counted in skippedBytes; they are not part of the section.
            section = skipsLeadingEmptyLines ? tail.drop { $0 == HTTP1ASCII.cr || $0 == HTTP1ASCII.lf } : tail
        } else {
            collect(tail)
            section = buffer[...]
        }
        reset()
        return section
    }

    private mutating func collect(_ bytes: ArraySlice<UInt8>) {
        if skipsLeadingEmptyLines && buffer.isEmpty {
            buffer.append(contentsOf: bytes.drop { $0 == HTTP1ASCII.cr || $0 == HTTP1ASCII.lf })
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    private mutating func scanBytes(_ bytes: UnsafeBufferPointer<UInt8>) -> Outcome {
        // Bytes of this chunk that still fit under the limit; the section is over it at `allowed`.
        let allowed = Self.limit - (buffer.count + skippedBytes)
        var offset = 0
        while offset < bytes.count {
            guard offset < allowed else { return .failed(HTTP1ParseError(.headerSectionTooLarge)) }
            let byte = bytes[offset]
            offset += 1
            if previousWasCR {
                guard byte == HTTP1ASCII.lf else { return .failed(HTTP1ParseError(.bareCR)) }
                previousWasCR = false
                if lineLength > 0 {
                    started = true
                    lineLength = 0
                } else if skipsLeadingEmptyLines && !started {
                    skippedBytes += 2
                } else {
                    return .complete(consumed: offset)
                }
            } else if byte > HTTP1ASCII.cr {
                // The common case: a visible byte or SP. Only CR, LF and NUL (all <= CR) need a look.
                lineLength += 1
            } else {
                switch byte {
                case HTTP1ASCII.cr: previousWasCR = true
                case HTTP1ASCII.lf: return .failed(HTTP1ParseError(.bareLF))
                case 0: return .failed(HTTP1ParseError(.nulByte))
                default: lineLength += 1
                }
            }
        }
        return .needMore
    }
}
