/// An IPv4 or IPv6 address as raw network-order bytes, parsed without any C library.
///
/// `init(parsing:)` accepts only the four-part dotted-decimal IPv4 form (what configuration keys hold);
/// `init(parsingHost:)` also reads the legacy numbers a socket layer connects to (`127.1`, `0x7f000001`).
/// IPv6 accepts the RFC 4291 text forms including `::` compression and an embedded IPv4 tail. Zone ids
/// (`%en0`) are rejected, as ATS does not support them.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address family.
    public enum Family: String, Sendable, Codable {
        case v4 = "IPv4"
        case v6 = "IPv6"
    }

    /// 4 bytes for IPv4, 16 for IPv6.
    public let bytes: [UInt8]

    public var family: Family { bytes.count == 4 ? .v4 : .v6 }

    public init?(parsing text: String) {
        if let v4 = Self.parseIPv4(Substring(text)) {
            bytes = v4
        } else if let v6 = Self.parseIPv6(Substring(text)) {
            bytes = v6
        } else {
            return nil
        }
    }

    /// Parses a host as a URL or CONNECT line carries it and as the socket layer would connect to it: the
    /// strict forms of `init(parsing:)`, plus the legacy IPv4 numbers that `inet_aton` and URL parsers
    /// accept (`127.1`, `0177.0.0.1`, `2130706433`, `0x7f000001`: one to four parts, each decimal, octal
    /// with a leading `0` or hexadecimal with `0x`, the last filling the remaining bytes). Nil for anything
    /// else, including host names whose last label is not a number.
    public init?(parsingHost text: String) {
        // The legacy reading first: it is what a socket connects to when the forms differ (`010.0.0.1` is 8.0.0.1).
        if let legacy = Self.parseLegacyIPv4(Substring(text)) {
            bytes = legacy
        } else if let v6 = Self.parseIPv6(Substring(text)) {
            bytes = v6
        } else {
            return nil
        }
    }

    public init(bytes: [UInt8]) {
        precondition(bytes.count == 4 || bytes.count == 16, "an IP address has 4 or 16 bytes")
        self.bytes = bytes
    }

    /// For an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), the IPv4 address; otherwise nil.
    public var mappedIPv4: IPAddress? {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff
        else { return nil }
        return IPAddress(bytes: Array(bytes[12..<16]))
    }

    /// 127.0.0.0/8 or ::1 (an IPv4-mapped loopback address counts).
    public var isLoopback: Bool {
        if let v4 = mappedIPv4 { return v4.isLoopback }
        switch family {
        case .v4: return bytes[0] == 127
        case .v6: return bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
        }
    }

    /// 0.0.0.0/8 or `::` (an IPv4-mapped one counts): on Linux a connection to it reaches this machine.
    public var isUnspecified: Bool {
        if let v4 = mappedIPv4 { return v4.isUnspecified }
        switch family {
        case .v4: return bytes[0] == 0
        case .v6: return bytes.allSatisfy { $0 == 0 }
        }
    }

    public var description: String {
        switch family {
        case .v4: return bytes.map(String.init).joined(separator: ".")
        case .v6: return Self.formatIPv6(bytes)
        }
    }

    static func parseIPv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var result: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = UInt8(part)
            else { return nil }
            result.append(value)
        }
        return result
    }

    /// The `inet_aton` forms (see `init(parsingHost:)`); nil unless every part is a number in range.
    static func parseLegacyIPv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt64] = []
        for part in parts {
            guard let value = legacyNumber(part) else { return nil }
            values.append(value)
        }
        let last = values.removeLast()
        guard values.allSatisfy({ $0 <= 255 }) else { return nil }
        let lastBytes = 4 - values.count
        guard last < (UInt64(1) << (8 * UInt64(lastBytes))) else { return nil }
        var result = values.map { UInt8($0) }
        for index in (0..<lastBytes).reversed() {
            result.append(UInt8(truncatingIfNeeded: last >> (8 * UInt64(index))))
        }
        return result
    }

    /// One part of a legacy IPv4 number: `0x` hexadecimal (no digits reads as 0, as `inet_aton` does), a
    /// leading `0` octal, else decimal. Nil for an empty part, a bad digit or a value beyond 32 bits.
    private static func legacyNumber(_ part: Substring) -> UInt64? {
        var digits = part.utf8[...]
        var radix: UInt64 = 10
        if digits.count >= 2, digits.first == UInt8(ascii: "0"),
            digits.dropFirst().first == UInt8(ascii: "x") || digits.dropFirst().first == UInt8(ascii: "X")
        {
            radix = 16
            digits = digits.dropFirst(2)
            if digits.isEmpty { return 0 }
        } else if digits.count >= 2, digits.first == UInt8(ascii: "0") {
            radix = 8
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            let digit: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt64(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt64(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
            guard digit < radix else { return nil }
            value = value * radix + digit
            guard value <= UInt64(UInt32.max) else { return nil }
        }
        return value
    }

    static func parseIPv6(_ text: Substring) -> [UInt8]? {
        guard !text.isEmpty, !text.contains("%") else { return nil }
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawCompression = false
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        sawCompression = halves.count == 2
        func groups(_ piece: String, allowIPv4Tail: Bool) -> [UInt16]? {
            if piece.isEmpty { return [] }
            let fields = piece.split(separator: ":", omittingEmptySubsequences: false)
            var values: [UInt16] = []
            for (index, field) in fields.enumerated() {
                if allowIPv4Tail, index == fields.count - 1, field.contains(".") {
                    guard let v4 = parseIPv4(field) else { return nil }
                    values.append(UInt16(v4[0]) << 8 | UInt16(v4[1]))
                    values.append(UInt16(v4[2]) << 8 | UInt16(v4[3]))
                    continue
                }
                guard (1...4).contains(field.count), field.allSatisfy(\.isHexDigit), field.allSatisfy(\.isASCII),
                    let value = UInt16(field, radix: 16)
                else { return nil }
                values.append(value)
            }
            return values
        }
        if sawCompression {
            guard let first = groups(halves[0], allowIPv4Tail: false),
                let second = groups(halves[1], allowIPv4Tail: true)
            else { return nil }
            head = first
            tail = second
            guard head.count + tail.count <= 7 else { return nil }
        } else {
            guard let all = groups(halves[0], allowIPv4Tail: true), all.count == 8 else { return nil }
            head = all
        }
        let words = head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
        return words.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] }
    }

    /// RFC 5952 canonical text: lower case, longest zero run (length ≥ 2) compressed.
    static func formatIPv6(_ bytes: [UInt8]) -> String {
        let words = stride(from: 0, to: 16, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
        var bestStart = -1
        var bestLength = 0
        var index = 0
        while index < 8 {
            if words[index] == 0 {
                var end = index
                while end < 8, words[end] == 0 { end += 1 }
                if end - index > bestLength {
                    bestStart = index
                    bestLength = end - index
                }
                index = end
            } else {
                index += 1
            }
        }
        let hex = words.map { String($0, radix: 16) }
        guard bestLength >= 2 else { return hex.joined(separator: ":") }
        let left = hex[0..<bestStart].joined(separator: ":")
        let right = hex[(bestStart + bestLength)...].joined(separator: ":")
        return left + "::" + right
    }
}

/// An address block in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`).
///
/// Parsing follows ATS: IPv4 shorthand such as `10/8` expands with zero octets, a prefix longer
/// than the family allows is invalid, zone-scoped blocks are invalid, and host bits are masked off.
public struct CIDRBlock: Sendable, Hashable, CustomStringConvertible {
    /// The network address with host bits cleared.
    public let network: IPAddress
    /// The prefix length in bits.
    public let prefixLength: Int

    public init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[1].isEmpty, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
            parts[1].count <= 3, let prefix = Int(parts[1])
        else { return nil }
        var address: IPAddress?
        if let full = IPAddress(parsing: String(parts[0])) {
            address = full
        } else {
            address = Self.expandIPv4Shorthand(parts[0])
        }
        guard let base = address else { return nil }
        let maximum = base.bytes.count * 8
        guard prefix <= maximum else { return nil }
        self.init(network: base, prefixLength: prefix)
    }

    public init(network: IPAddress, prefixLength: Int) {
        precondition(prefixLength >= 0 && prefixLength <= network.bytes.count * 8, "prefix out of range")
        self.prefixLength = prefixLength
        self.network = IPAddress(bytes: Self.mask(network.bytes, prefixLength))
    }

    /// True when `address` (same family) lies inside the block.
    public func contains(_ address: IPAddress) -> Bool {
        guard address.bytes.count == network.bytes.count else { return false }
        return Self.mask(address.bytes, prefixLength) == network.bytes
    }

    public var description: String { "\(network)/\(prefixLength)" }

    private static func mask(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let bitsBefore = index * 8
            if prefix >= bitsBefore + 8 { return byte }
            if prefix <= bitsBefore { return 0 }
            let keep = prefix - bitsBefore
            return byte & UInt8(truncatingIfNeeded: 0xff << (8 - keep))
        }
    }

    /// `10` → 10.0.0.0, `172.16` → 172.16.0.0 (one to three dotted-decimal parts).
    private static func expandIPv4Shorthand(_ text: Substring) -> IPAddress? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count) else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = UInt8(part)
            else { return nil }
            bytes.append(value)
        }
        while bytes.count < 4 { bytes.append(0) }
        return IPAddress(bytes: bytes)
    }
}
