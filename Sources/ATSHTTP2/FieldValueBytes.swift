/// Lossless conversion between the bytes of an HTTP field (header) value and a `String`.
///
/// Field values are bytes (RFC 9110 §5.5: visible ASCII plus obs-text, 0x80–0xFF). Decoding them as UTF-8
/// would replace any byte that is not part of valid UTF-8 (a Latin-1 `é`, say) with U+FFFD, and the proxy
/// would relay something other than what it received. Contract:
/// - valid UTF-8 (including all ASCII) decodes to the same `String` as `String(decoding:as: UTF8.self)`;
/// - a byte that is not part of valid UTF-8 decodes to the private-use scalar U+10FF00 + byte, and
///   `bytes(of:)` turns that scalar back into the byte;
/// - hence `bytes(of: string(from: b)) == b` for every byte sequence `b` that does not itself hold the UTF-8 of
///   U+10FF80…U+10FFFF (private-use characters of plane 16, which no real header carries).
///
/// Stateless; safe from any thread.
public enum FieldValueBytes {
    /// The first scalar of the escape range (U+10FF80…U+10FFFF stand for the bytes 0x80…0xFF).
    static let escapeBase: UInt32 = 0x10_FF00

    /// The field value for `bytes` (see the type's contract).
    public static func string<Bytes: Collection<UInt8>>(from bytes: Bytes) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        return escapedString(bytes)
    }

    /// The bytes `string` stands for: its UTF-8, except escaped scalars, which become their byte again.
    public static func bytes(of string: String) -> [UInt8] {
        var result: [UInt8] = []
        append(string, to: &result)
        return result
    }

    /// Appends the bytes `string` stands for to `buffer`.
    public static func append(_ string: String, to buffer: inout [UInt8]) {
        // UTF-8 of U+10FF80…U+10FFFF starts with F4 8F: without an F4 byte there is nothing to unescape.
        let escaped =
            string.utf8.withContiguousStorageIfAvailable { $0.contains(0xF4) } ?? string.utf8.contains(0xF4)
        guard escaped else {
            buffer.append(contentsOf: string.utf8)
            return
        }
        for scalar in string.unicodeScalars {
            if scalar.value >= escapeBase + 0x80, scalar.value <= escapeBase + 0xFF {
                buffer.append(UInt8(scalar.value - escapeBase))
            } else {
                buffer.append(contentsOf: String(scalar).utf8)
            }
        }
    }

    /// Copies valid UTF-8 sequences as they are and escapes every byte that is not part of one (the rare path,
    /// but the one fuzzed and attacked inputs take): at each position, a well-formed sequence starting there is
    /// kept whole, otherwise that one byte is escaped, so an invalid byte never swallows the bytes after it.
    /// One pass that copies runs of valid bytes in bulk into one buffer, then one `String`; O(n).
    private static func escapedString<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        if let text = bytes.withContiguousStorageIfAvailable(escapedContiguous) { return text }
        return Array(bytes).withUnsafeBufferPointer(escapedContiguous)
    }

    /// `escapedString` over contiguous bytes.
    private static func escapedContiguous(_ source: UnsafeBufferPointer<UInt8>) -> String {
        var utf8: [UInt8] = []
        utf8.reserveCapacity(source.count * 2)
        var index = 0
        var runStart = 0
        while index < source.count {
            let width = wellFormedWidth(source, at: index)
            if width > 0 {
                index += width
                continue
            }
            utf8.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<index]))
            // U+10FF80…U+10FFFF in UTF-8: F4 8F, then 10111110 or 10111111, then 10 and the byte's low six bits.
            let byte = source[index]
            utf8.append(0xF4)
            utf8.append(0x8F)
            utf8.append(byte < 0xC0 ? 0xBE : 0xBF)
            utf8.append(0x80 | (byte & 0x3F))
            index += 1
            runStart = index
        }
        utf8.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<index]))
        return String(decoding: utf8, as: UTF8.self)
    }

    /// The length of the well-formed UTF-8 sequence starting at `index` (Unicode's table 3-7: no overlong forms,
    /// no surrogates, nothing past U+10FFFF), or 0 when none starts there.
    static func wellFormedWidth(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Int {
        let lead = bytes[index]
        if lead < 0x80 { return 1 }
        /// Whether the byte `offset` after the lead exists and lies in `range`.
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            index + offset < bytes.count && range.contains(bytes[index + offset])
        }
        switch lead {
        case 0xC2...0xDF:
            return continuation(1) ? 2 : 0
        case 0xE0...0xEF:
            let second: ClosedRange<UInt8> =
                switch lead {
                case 0xE0: 0xA0...0xBF
                case 0xED: 0x80...0x9F
                default: 0x80...0xBF
                }
            return continuation(1, second) && continuation(2) ? 3 : 0
        case 0xF0...0xF4:
            let second: ClosedRange<UInt8> =
                switch lead {
                case 0xF0: 0x90...0xBF
                case 0xF4: 0x80...0x8F
                default: 0x80...0xBF
                }
            return continuation(1, second) && continuation(2) && continuation(3) ? 4 : 0
        default:
            return 0
        }
    }
}
