/// A path of keys inside the Info.plist, e.g. NSAppTransportSecurity → NSExceptionDomains → example.com.
public struct KeyPath: Sendable, Hashable, Codable, CustomStringConvertible, ExpressibleByArrayLiteral {
    /// The keys from the Info.plist root down.
    public let components: [String]

    public init(_ components: [String]) { self.components = components }
    public init(arrayLiteral elements: String...) { components = elements }

    /// The path of the ATS dictionary itself.
    public static let ats: KeyPath = ["NSAppTransportSecurity"]

    /// This path extended by one key.
    public func appending(_ key: String) -> KeyPath { KeyPath(components + [key]) }

    public var description: String { components.joined(separator: " → ") }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        components = text.components(separatedBy: " → ")
    }
}

/// How serious a configuration finding is.
public enum Severity: String, Sendable, Codable, Comparable {
    /// Informational: App Review flags, notes about emulation choices.
    case note
    /// A trap: legal but probably not what the author meant.
    case warning
    /// The configuration does not do what it says (wrong types, invalid values).
    case error

    private var rank: Int {
        switch self {
        case .note: 0
        case .warning: 1
        case .error: 2
        }
    }

    public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs.rank < rhs.rank }
}

/// Something the parser or linter noticed about a key, with the message Apple's own parser logs
/// (when it logs one) and a one-line fix.
public struct ConfigMessage: Sendable, Hashable, Codable {
    /// Stable identifier of the finding kind, e.g. `wrong-type`, `uppercase-domain`.
    public let code: String
    public let severity: Severity
    public let keyPath: KeyPath
    /// What is wrong, in plain words.
    public let message: String
    /// The one-line fix, if there is one.
    public let fix: String?
    /// The exact line Apple's ATS dictionary parser logs for this problem, if any.
    public let appleLog: String?

    public init(
        code: String, severity: Severity, keyPath: KeyPath, message: String, fix: String? = nil,
        appleLog: String? = nil
    ) {
        self.code = code
        self.severity = severity
        self.keyPath = keyPath
        self.message = message
        self.fix = fix
        self.appleLog = appleLog
    }
}
