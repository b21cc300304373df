/// One header (or trailer) field line: name and value exactly as received, original case kept.
///
/// The value has its leading and trailing whitespace removed (RFC 9112 §5) and is decoded as
/// UTF-8; bytes that are not valid UTF-8 (obs-text) are kept losslessly as private-use scalars
/// (`FieldValueBytes`), which the serializers turn back into the same bytes.
public struct HTTPField: Hashable, Sendable, Codable {
    /// The field name as the peer spelled it.
    public var name: String
    /// The field value without surrounding whitespace.
    public var value: String

    /// Creates a field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// An ordered list of fields that keeps duplicates, order and case, with case-insensitive lookup.
///
/// Lookups compare names byte-wise ignoring ASCII case and never allocate a lower-cased copy.
public struct HTTPFields: Hashable, Sendable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    /// The fields in wire order.
    public var fields: [HTTPField]

    /// Creates headers from fields in wire order.
    public init(_ fields: [HTTPField] = []) {
        self.fields = fields
    }

    /// Creates headers from `(name, value)` pairs in order; duplicates are kept.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { HTTPField(name: $0.0, value: $0.1) }
    }

    public var startIndex: Int { fields.startIndex }
    public var endIndex: Int { fields.endIndex }
    public subscript(position: Int) -> HTTPField { fields[position] }

    /// The first value of the field `name`, compared case-insensitively.
    public func first(_ name: String) -> String? {
        fields.first { Self.nameMatches($0.name, name) }?.value
    }

    /// Every value of the field `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.nameMatches($0.name, name) }.map(\.value)
    }

    /// Whether any field is named `name`.
    public func contains(_ name: String) -> Bool {
        fields.contains { Self.nameMatches($0.name, name) }
    }

    /// The number of fields named `name`.
    public func count(of name: String) -> Int {
        fields.reduce(0) { $0 + (Self.nameMatches($1.name, name) ? 1 : 0) }
    }

    /// The trimmed, non-empty comma-separated elements of every field named `name` (RFC 9110 §5.6.1).
    public func listElements(_ name: String) -> [Substring] {
        var result: [Substring] = []
        for field in fields where Self.nameMatches(field.name, name) {
            let value = Substring(field.value)
            for element in HTTP1ASCII.listElements(value.utf8) {
                result.append(Substring(element))
            }
        }
        return result
    }

    /// Whether the comma-separated list in the fields `name` has the element `token` (case-insensitive).
    /// Walks the values in place; nothing is allocated.
    public func hasListElement(_ name: String, _ token: String) -> Bool {
        for field in fields where Self.nameMatches(field.name, name) {
            let found = HTTP1ASCII.forEachListElement(of: field.value) { element in
                HTTP1ASCII.equalsIgnoringCase(element, token.utf8)
            }
            if found { return true }
        }
        return false
    }

    /// Appends a field at the end.
    public mutating func append(name: String, value: String) {
        fields.append(HTTPField(name: name, value: value))
    }

    /// Removes every field named `name`.
    public mutating func remove(_ name: String) {
        fields.removeAll { Self.nameMatches($0.name, name) }
    }

    /// Replaces the first field named `name` in place and removes the others, or appends it.
    public mutating func replaceOrAppend(name: String, value: String) {
        if let index = fields.firstIndex(where: { Self.nameMatches($0.name, name) }) {
            fields[index].value = value
            var position = fields.index(after: index)
            while position < fields.endIndex {
                if Self.nameMatches(fields[position].name, name) {
                    fields.remove(at: position)
                } else {
                    position = fields.index(after: position)
                }
            }
        } else {
            append(name: name, value: value)
        }
    }

    /// Leaves exactly one `Content-Length: length` field, in the place of the first one, when the head carried
    /// several that agree or a list (`5, 5`) that the framing check accepted: RFC 9110 §8.6 forbids forwarding
    /// such a value, and an origin that reads the list otherwise would frame the message differently from the
    /// proxy. A head with one plain decimal field (the common case) is left untouched without allocating.
    public mutating func collapseContentLength(to length: Int) {
        var count = 0
        var canonical = true
        for field in fields where field.name.utf8.count == 14 && Self.nameMatches(field.name, "Content-Length") {
            count += 1
            if count > 1 { break }
            canonical = Self.isDecimal(field.value, equalTo: length)
        }
        guard count != 1 || !canonical else { return }
        replaceOrAppend(name: "Content-Length", value: String(length))
    }

    /// Whether `text` is exactly the decimal spelling of `value` (no sign, no leading zeros, no spaces).
    private static func isDecimal(_ text: String, equalTo value: Int) -> Bool {
        var remaining = value
        var digits = 0
        for byte in text.utf8.reversed() {
            guard HTTP1ASCII.isDigit(byte), digits == 0 || remaining > 0 else { return false }
            guard Int(byte - UInt8(ascii: "0")) == remaining % 10 else { return false }
            remaining /= 10
            digits += 1
        }
        return digits > 0 && remaining == 0
    }

    /// Case-insensitive field-name comparison without allocation.
    public static func nameMatches(_ lhs: String, _ rhs: String) -> Bool {
        HTTP1ASCII.equalsIgnoringCase(lhs, rhs)
    }
}
