/// Byte-level character classes of RFC 9110/9112, for parsing without allocating.
///
/// Stateless; every function works on single bytes or on `String.UTF8View`s so that no header
/// name or value is ever lower-cased into a new `String` just to compare it.
enum HTTP1ASCII {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let htab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let equals: UInt8 = 0x3D
    static let quote: UInt8 = 0x22
    static let backslash: UInt8 = 0x5C
    static let comma: UInt8 = 0x2C
    static let slash: UInt8 = 0x2F
    static let crlf: [UInt8] = [0x0D, 0x0A]

    /// `tchar` of RFC 9110 §5.6.2.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// `field-vchar` plus SP and HTAB: what may appear inside a field value (RFC 9110 §5.5).
    static func isFieldValueCharacter(_ byte: UInt8) -> Bool {
        byte == htab || (byte >= 0x20 && byte != 0x7F)
    }

    /// Visible ASCII (`VCHAR`), the only bytes allowed in a request target.
    static func isVisible(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F
    }

    static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// The value of a hexadecimal digit, or nil.
    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(byte - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    /// ASCII case-insensitive equality of two byte sequences, without allocating.
    static func equalsIgnoringCase<A: Collection<UInt8>, B: Collection<UInt8>>(_ lhs: A, _ rhs: B) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var right = rhs.makeIterator()
        for left in lhs {
            guard let other = right.next(), lowercased(left) == lowercased(other) else { return false }
        }
        return true
    }

    /// ASCII case-insensitive equality of two strings; compares contiguous UTF-8 storage directly
    /// when both strings have it (native Swift strings do), without allocating.
    static func equalsIgnoringCase(_ lhs: String, _ rhs: String) -> Bool {
        guard lhs.utf8.count == rhs.utf8.count else { return false }
        let fast = lhs.utf8.withContiguousStorageIfAvailable { left in
            rhs.utf8.withContiguousStorageIfAvailable { right in
                for index in 0..<left.count where left[index] != right[index] {
                    guard lowercased(left[index]) == lowercased(right[index]) else { return false }
                }
                return true
            }
        }
        if let fast, let result = fast { return result }
        return equalsIgnoringCase(lhs.utf8, rhs.utf8)
    }

    /// Splits a comma-separated list value into trimmed, non-empty elements (RFC 9110 §5.6.1).
    static func listElements(_ value: Substring.UTF8View) -> [Substring.UTF8View] {
        var elements: [Substring.UTF8View] = []
        var start = value.startIndex
        var index = value.startIndex
        while index <= value.endIndex {
            if index == value.endIndex || value[index] == comma {
                let element = trimmed(value[start..<index])
                if !element.isEmpty { elements.append(element) }
                if index == value.endIndex { break }
                start = value.index(after: index)
            }
            index = value.index(after: index)
        }
        return elements
    }

    /// Calls `body` with each trimmed, non-empty element of the comma-separated list `value` until
    /// it returns true; returns whether it did. Allocates nothing for native strings.
    static func forEachListElement(of value: String, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
        var value = value
        return value.withUTF8 { bytes in
            var start = 0
            var index = 0
            while index <= bytes.count {
                if index == bytes.count || bytes[index] == comma {
                    var lower = start
                    var upper = index
                    while lower < upper, bytes[lower] == space || bytes[lower] == htab { lower += 1 }
                    while upper > lower, bytes[upper - 1] == space || bytes[upper - 1] == htab { upper -= 1 }
                    if upper > lower, body(UnsafeBufferPointer(rebasing: bytes[lower..<upper])) { return true }
                    start = index + 1
                }
                index += 1
            }
            return false
        }
    }

    /// Removes leading and trailing SP/HTAB.
    static func trimmed(_ value: Substring.UTF8View) -> Substring.UTF8View {
        var lower = value.startIndex
        var upper = value.endIndex
        while lower < upper, value[lower] == space || value[lower] == htab { lower = value.index(after: lower) }
        while upper > lower {
            let before = value.index(before: upper)
            guard value[before] == space || value[before] == htab else { break }
            upper = before
        }
        return value[lower..<upper]
    }
}
