/// A strict parser for the `Alt-Svc` field value (RFC 7838 §3), with the list syntax of RFC 9110 §5.6.1:
///
///     Alt-Svc       = clear / 1#alt-value
///     clear         = %s"clear"
///     alt-value     = alternative *( OWS ";" OWS parameter )
///     alternative   = protocol-id "=" alt-authority
///     protocol-id   = token            ; percent-encoded ALPN protocol name
///     alt-authority = quoted-string    ; [ uri-host ] ":" port
///     parameter     = token "=" ( token / quoted-string )
///
/// Empty list elements are accepted (`a, , b`), as the list rule requires of recipients. Anything else that
/// breaks the grammar makes the whole value malformed, as a client ignores it whole. `clear` must stand alone.
/// The `ma` parameter (delta-seconds) is read; other parameters (`persist`, unknown ones) are checked and
/// skipped. At most `maximumAlternatives` alternatives are kept.
///
/// A pure function of its input; linear in its length; faces the network (an origin's response header), so it
/// is a fuzz target (`Fuzzing/`, `alt-svc`).
public enum AltSvcParser {
    /// What a value says.
    public enum Value: Equatable, Sendable {
        /// `clear`: the origin withdraws every alternative.
        case clear
        /// The alternatives, in order.
        case alternatives([Alternative])
        /// Not valid `Alt-Svc` syntax: ignored.
        case malformed
    }

    /// One alternative service.
    public struct Alternative: Equatable, Sendable {
        /// The ALPN protocol name, percent-decoded (`h3`, `h3-29`, `h2`). Bytes that are not UTF-8 are replaced.
        public var protocolID: String
        /// The alternative authority as sent, without the quotes (`:443`, `alt.example.com:8443`).
        public var authority: String
        /// `ma`: seconds the alternative stays fresh (nil: not given, 24 hours by the RFC).
        public var maxAge: Int?
    }

    /// Alternatives kept per value.
    public static let maximumAlternatives = 16

    /// Parses one field value (several `Alt-Svc` fields are parsed joined by commas).
    public static func parse(_ text: String) -> Value {
        var cursor = Cursor(bytes: Array(text.utf8))
        cursor.skipWhitespace()
        if cursor.rest(equals: "clear") { return .clear }
        var alternatives: [Alternative] = []
        var sawElement = false
        while true {
            cursor.skipWhitespace()
            if cursor.atEnd { break }
            if cursor.current == UInt8(ascii: ",") {
                cursor.index += 1
                continue
            }
            guard let alternative = cursor.altValue() else { return .malformed }
            sawElement = true
            if alternatives.count < maximumAlternatives { alternatives.append(alternative) }
            cursor.skipWhitespace()
            if cursor.atEnd { break }
            guard cursor.current == UInt8(ascii: ",") else { return .malformed }
            cursor.index += 1
        }
        return sawElement ? .alternatives(alternatives) : .malformed
    }

    /// Whether `protocolID` names HTTP/3: `h3`, or a draft version `h3-NN` (digits). Google QUIC's `h3-Q050`
    /// and the like are not HTTP/3 as URLSession speaks it.
    public static func isHTTP3(_ protocolID: String) -> Bool {
        if protocolID == "h3" { return true }
        guard protocolID.hasPrefix("h3-") else { return false }
        let digits = protocolID.utf8.dropFirst(3)
        return !digits.isEmpty && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// A read position over the value's bytes.
    struct Cursor {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index >= bytes.count }
        var current: UInt8 { bytes[index] }

        /// Whether what remains (after optional trailing whitespace) is exactly `word`.
        func rest(equals word: String) -> Bool {
            var end = bytes.count
            while end > index, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
            return Array(bytes[index..<end]) == Array(word.utf8)
        }

        mutating func skipWhitespace() {
            while !atEnd, current == 0x20 || current == 0x09 { index += 1 }
        }

        static func isTokenByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "A")...UInt8(ascii: "Z"):
                return true
            default:
                return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
            }
        }

        /// `1*tchar`, or nil.
        mutating func token() -> ArraySlice<UInt8>? {
            let start = index
            while !atEnd, Self.isTokenByte(current) { index += 1 }
            return index > start ? bytes[start..<index] : nil
        }

        /// A quoted-string's content with its quoted-pairs resolved, or nil.
        mutating func quotedString() -> [UInt8]? {
            guard !atEnd, current == UInt8(ascii: "\"") else { return nil }
            index += 1
            var content: [UInt8] = []
            while !atEnd {
                let byte = current
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return content
                case UInt8(ascii: "\\"):
                    guard !atEnd, current == 0x09 || (current >= 0x20 && current != 0x7F) else { return nil }
                    content.append(current)
                    index += 1
                case 0x09, 0x20, 0x21, 0x23...0x5B, 0x5D...0x7E, 0x80...0xFF:
                    content.append(byte)
                default:
                    return nil
                }
            }
            return nil
        }

        /// `alternative *( OWS ";" OWS parameter )`, or nil.
        mutating func altValue() -> Alternative? {
            guard let encoded = token(), let protocolID = Self.percentDecoded(encoded) else { return nil }
            guard !atEnd, current == UInt8(ascii: "=") else { return nil }
            index += 1
            guard let authority = quotedString(), Self.isAltAuthority(authority) else { return nil }
            var alternative = Alternative(
                protocolID: String(decoding: protocolID, as: UTF8.self),
                authority: String(decoding: authority, as: UTF8.self), maxAge: nil)
            while true {
                let mark = index
                skipWhitespace()
                guard !atEnd, current == UInt8(ascii: ";") else {
                    index = mark
                    return alternative
                }
                index += 1
                skipWhitespace()
                guard let name = token(), !atEnd, current == UInt8(ascii: "=") else { return nil }
                index += 1
                if !atEnd, current == UInt8(ascii: "\"") {
                    guard let value = quotedString() else { return nil }
                    if Self.isMaxAge(name) {
                        guard let seconds = Self.deltaSeconds(value[...]) else { return nil }
                        alternative.maxAge = seconds
                    }
                } else {
                    guard let value = token() else { return nil }
                    if Self.isMaxAge(name) {
                        guard let seconds = Self.deltaSeconds(value) else { return nil }
                        alternative.maxAge = seconds
                    }
                }
            }
        }

        static func isMaxAge(_ name: ArraySlice<UInt8>) -> Bool {
            name.count == 2 && name.map { $0 | 0x20 } == Array("ma".utf8)
        }

        /// `1*DIGIT`, saturating at `Int.max`.
        static func deltaSeconds(_ text: ArraySlice<UInt8>) -> Int? {
            guard !text.isEmpty else { return nil }
            var value = 0
            for byte in text {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflowSum) = times.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
                value = overflowTimes || overflowSum ? Int.max : sum
            }
            return value
        }

        /// `[ uri-host ] ":" port`: a non-empty run of digits after the last colon, and a host without
        /// whitespace or controls (a bracketed IPv6 literal allowed).
        static func isAltAuthority(_ text: [UInt8]) -> Bool {
            guard let colon = text.lastIndex(of: UInt8(ascii: ":")) else { return false }
            let port = text[(colon + 1)...]
            guard !port.isEmpty, port.count <= 5,
                port.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            else { return false }
            return text[..<colon].allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") }
        }

        /// A token with `%XX` escapes decoded; nil for a `%` not followed by two hex digits.
        static func percentDecoded(_ token: ArraySlice<UInt8>) -> [UInt8]? {
            var out: [UInt8] = []
            var index = token.startIndex
            while index < token.endIndex {
                let byte = token[index]
                if byte == UInt8(ascii: "%") {
                    guard let high = hexValue(token[safe: index + 1]), let low = hexValue(token[safe: index + 2]) else {
                        return nil
                    }
                    out.append(high << 4 | low)
                    index += 3
                } else {
                    out.append(byte)
                    index += 1
                }
            }
            return out
        }

        static func hexValue(_ byte: UInt8?) -> UInt8? {
            guard let byte else { return nil }
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
    }
}

extension ArraySlice where Element == UInt8 {
    /// The byte at `position`, or nil outside the slice.
    fileprivate subscript(safe position: Int) -> UInt8? {
        position >= startIndex && position < endIndex ? self[position] : nil
    }
}
