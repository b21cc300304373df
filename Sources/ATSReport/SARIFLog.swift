/// The part of SARIF 2.1.0 (OASIS Static Analysis Results Interchange Format) that `lint --format sarif`
/// writes: one run of one tool, its rules, and results pointing at a file region. Encoded with `JSONEncoder`;
/// nil properties are left out, as SARIF wants absent rather than null values.
public struct SARIFLog: Sendable, Codable, Equatable {
    public static let schemaURI = "https://json.schemastore.org/sarif-2.1.0.json"

    public var schema = SARIFLog.schemaURI
    public var version = "2.1.0"
    public var runs: [Run]

    enum CodingKeys: String, CodingKey {
        case schema = "$schema"
        case version, runs
    }

    /// One invocation of one tool.
    public struct Run: Sendable, Codable, Equatable {
        public var tool: Tool
        /// `%SRCROOT%` → the directory relative artifact URIs are resolved against.
        public var originalUriBaseIds: [String: ArtifactLocation]?
        public var artifacts: [Artifact]?
        public var results: [Result]
        public var columnKind: String?
    }

    public struct Tool: Sendable, Codable, Equatable {
        public var driver: ToolComponent
    }

    public struct ToolComponent: Sendable, Codable, Equatable {
        public var name: String
        public var version: String?
        public var informationUri: String?
        public var rules: [ReportingDescriptor]
    }

    /// A rule: its id, its descriptions and the level its results get by default.
    public struct ReportingDescriptor: Sendable, Codable, Equatable {
        public var id: String
        public var name: String?
        public var shortDescription: Message
        public var fullDescription: Message?
        public var help: Message?
        public var defaultConfiguration: Configuration?
    }

    public struct Configuration: Sendable, Codable, Equatable {
        public var level: String
    }

    /// Plain text (and optionally Markdown) shown to a reader.
    public struct Message: Sendable, Codable, Equatable {
        public var text: String
        public var markdown: String?

        public init(text: String, markdown: String? = nil) {
            self.text = text
            self.markdown = markdown
        }
    }

    public struct Artifact: Sendable, Codable, Equatable {
        public var location: ArtifactLocation
    }

    public struct ArtifactLocation: Sendable, Codable, Equatable {
        public var uri: String
        public var uriBaseId: String?
        public var index: Int?
    }

    /// One finding.
    public struct Result: Sendable, Codable, Equatable {
        public var ruleId: String
        public var ruleIndex: Int
        /// `error`, `warning` or `note`.
        public var level: String
        public var message: Message
        public var locations: [Location]
        public var partialFingerprints: [String: String]?
        public var properties: [String: String]?
    }

    public struct Location: Sendable, Codable, Equatable {
        public var physicalLocation: PhysicalLocation?
        public var logicalLocations: [LogicalLocation]?
    }

    public struct PhysicalLocation: Sendable, Codable, Equatable {
        public var artifactLocation: ArtifactLocation
        /// Absent for a binary plist or an archive member: the file is named, no line.
        public var region: Region?
    }

    /// 1-based lines and columns; `endColumn` is one past the last character.
    public struct Region: Sendable, Codable, Equatable {
        public var startLine: Int
        public var startColumn: Int?
        public var endLine: Int?
        public var endColumn: Int?
    }

    /// The key path of the finding, e.g. `NSAppTransportSecurity/NSExceptionDomains/example.com`.
    public struct LogicalLocation: Sendable, Codable, Equatable {
        public var fullyQualifiedName: String
        public var kind: String?
    }
}
