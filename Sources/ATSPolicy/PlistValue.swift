import Foundation

/// A property-list value with its exact plist type preserved.
///
/// Foundation hands back `Bool` for `<true/>` and `NSNumber` for `<integer>`; ATS treats the two
/// differently (a boolean key given an integer is "present" but only `1` counts as YES), so the
/// loader converts Foundation's `Any` graph into this enum once and every later stage works on it.
public enum PlistValue: Sendable, Equatable {
    /// `<true/>` or `<false/>`.
    case bool(Bool)
    /// `<integer>`.
    case integer(Int)
    /// `<real>`.
    case real(Double)
    /// `<string>`.
    case string(String)
    /// `<date>`.
    case date(Date)
    /// `<data>`.
    case data(Data)
    /// `<array>`.
    case array([PlistValue])
    /// `<dict>`; plist dictionaries have string keys.
    case dictionary([String: PlistValue])

    /// Converts a Foundation property-list object graph. Unknown object kinds become strings of
    /// their description so that nothing a plist can contain makes the loader fail.
    public init(foundation value: Any) {
        if type(of: value) == Bool.self, let flag = value as? Bool {
            self = .bool(flag)
        } else if let number = value as? NSNumber {
            if CFGetTypeIDIfAvailable(number) == .boolean {
                self = .bool(number.boolValue)
            } else if let exact = Int(exactly: number.doubleValue), !Self.isFloatingPoint(number) {
                self = .integer(exact)
            } else {
                self = .real(number.doubleValue)
            }
        } else if let text = value as? String {
            self = .string(text)
        } else if let date = value as? Date {
            self = .date(date)
        } else if let data = value as? Data {
            self = .data(data)
        } else if let list = value as? [Any] {
            self = .array(list.map(PlistValue.init(foundation:)))
        } else if let dictionary = value as? [String: Any] {
            self = .dictionary(dictionary.mapValues(PlistValue.init(foundation:)))
        } else {
            self = .string(String(describing: value))
        }
    }

    private static func isFloatingPoint(_ number: NSNumber) -> Bool {
        let code = String(cString: number.objCType)
        return code == "d" || code == "f"
    }

    /// The plist element name of this value, used in messages ("a string", "an integer").
    public var typeName: String {
        switch self {
        case .bool: "boolean"
        case .integer: "integer"
        case .real: "real"
        case .string: "string"
        case .date: "date"
        case .data: "data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }

    /// The dictionary payload, if this is a dictionary.
    public var dictionaryValue: [String: PlistValue]? {
        if case .dictionary(let value) = self { return value }
        return nil
    }

    /// The plain Foundation object for this value (for re-serialising fragments).
    public var foundationObject: Any {
        switch self {
        case .bool(let value): value
        case .integer(let value): value
        case .real(let value): value
        case .string(let value): value
        case .date(let value): value
        case .data(let value): value
        case .array(let values): values.map(\.foundationObject)
        case .dictionary(let values): values.mapValues(\.foundationObject)
        }
    }
}

/// Distinguishes CoreFoundation booleans inside `NSNumber` where the platform exposes it.
private enum NumberKind { case boolean, other }

private func CFGetTypeIDIfAvailable(_ number: NSNumber) -> NumberKind {
    #if canImport(Darwin)
        return CFGetTypeID(number) == CFBooleanGetTypeID() ? .boolean : .other
    #else
        return .other
    #endif
}
