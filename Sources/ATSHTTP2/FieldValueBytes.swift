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

    /// Decodes valid UTF-8 sequences as UTF-8 and escapes every byte that is not part of one (the rare path:
    /// a fresh decoder at each position, so an invalid byte never swallows the bytes after it).
    private static func escapedString<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        let all = Array(bytes)
        var scalars = String.UnicodeScalarView()
        var index = 0
        while index < all.count {
            var decoder = UTF8()
            var iterator = all[index...].makeIterator()
            if case .scalarValue(let scalar) = decoder.decode(&iterator) {
                scalars.append(scalar)
                index += UTF8.width(scalar)
            } else {
                scalars.append(Unicode.Scalar(escapeBase + UInt32(all[index]))!)
                index += 1
            }
        }
        return String(scalars)
    }
}
