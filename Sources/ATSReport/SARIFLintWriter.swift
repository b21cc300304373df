import ATSPolicy
import Foundation

/// Turns a `LintReport` into a SARIF 2.1.0 log that code scanning can show on a pull request: every rule of
/// `LintRuleCatalog` (and any code the catalog lacks) as a rule, every finding as a result at the line and
/// column of its key in an XML plist (the file alone for a binary plist or an `.ipa`), with the key path as
/// the logical location. Pure apart from reading the plist file once.
public struct SARIFLintWriter: Sendable {
    public let report: LintReport
    public let source: LoadedInfoPlist
    public let toolVersion: String
    /// The directory relative artifact paths are resolved against (`%SRCROOT%`).
    public let workingDirectory: String

    public init(report: LintReport, source: LoadedInfoPlist, toolVersion: String, workingDirectory: String) {
        self.report = report
        self.source = source
        self.toolVersion = toolVersion
        self.workingDirectory = workingDirectory
    }

    /// The log, with `data` standing for the plist file's bytes (nil: read it from disk).
    public func log(fileData: Data? = nil) -> SARIFLog {
        let file = plistFile
        let locator = file.flatMap { file -> PlistKeyLocator? in
            guard file.hasLines, let data = fileData ?? FileManager.default.contents(atPath: file.path) else {
                return nil
            }
            return PlistKeyLocator(xml: data, rootPath: source.kind == .atsDictionary ? KeyPath.ats : [])
        }
        let rules = Self.rules(for: report)
        let index = Dictionary(uniqueKeysWithValues: rules.enumerated().map { ($0.element.id, $0.offset) })
        let artifact = file.map { artifactLocation(for: $0.path) }
        let results = report.findings.map { finding in
            var location = SARIFLog.Location(
                physicalLocation: nil,
                logicalLocations: [
                    SARIFLog.LogicalLocation(fullyQualifiedName: finding.keyPath.description, kind: "member")
                ])
            if let artifact {
                let region = locator?.location(of: finding.keyPath).map {
                    SARIFLog.Region(
                        startLine: $0.line, startColumn: $0.column, endLine: $0.endLine > 0 ? $0.endLine : nil,
                        endColumn: $0.endLine > 0 ? $0.endColumn : nil)
                }
                location.physicalLocation = SARIFLog.PhysicalLocation(artifactLocation: artifact, region: region)
            }
            var properties = ["keyPath": finding.keyPath.description]
            if let fix = finding.fix { properties["fix"] = fix }
            if let appleLog = finding.appleLog { properties["appleLog"] = appleLog }
            return SARIFLog.Result(
                ruleId: finding.code, ruleIndex: index[finding.code] ?? 0, level: Self.level(finding.severity),
                message: SARIFLog.Message(text: finding.message + (finding.fix.map { ". Fix: \($0)." } ?? "")),
                locations: [location],
                partialFingerprints: ["atsKeyPath/v1": "\(finding.code)|\(finding.keyPath.description)"],
                properties: properties)
        }
        let run = SARIFLog.Run(
            tool: SARIFLog.Tool(
                driver: SARIFLog.ToolComponent(
                    name: "ats-proxy", version: toolVersion, informationUri: nil, rules: rules)),
            originalUriBaseIds: artifact?.uriBaseId == nil
                ? nil : [Self.sourceRoot: SARIFLog.ArtifactLocation(uri: directoryURI, uriBaseId: nil, index: nil)],
            artifacts: artifact.map { [SARIFLog.Artifact(location: $0)] },
            results: results, columnKind: "unicodeCodePoints")
        return SARIFLog(runs: [run])
    }

    /// The log as JSON text (pretty-printed, keys sorted).
    public func json(fileData: Data? = nil) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(log(fileData: fileData))
    }

    /// The base id of paths relative to the working directory.
    static let sourceRoot = "%SRCROOT%"

    /// The file the findings are in, and whether it can have lines (an `.ipa` member cannot be pointed at).
    var plistFile: (path: String, hasLines: Bool)? {
        switch source.kind {
        case .none: return nil
        case .infoPlist, .atsDictionary: return (source.path, true)
        case .appBundle:
            return ((source.path as NSString).appendingPathComponent(source.innerPath ?? "Info.plist"), true)
        case .ipa: return (source.path, false)
        }
    }

    /// A relative path stays relative (to `%SRCROOT%`, so code scanning resolves it in the repository); an
    /// absolute one becomes a `file:` URI.
    func artifactLocation(for path: String) -> SARIFLog.ArtifactLocation {
        let encoded = Self.percentEncoded(path)
        if path.hasPrefix("/") { return SARIFLog.ArtifactLocation(uri: "file://" + encoded, uriBaseId: nil, index: 0) }
        let relative = encoded.hasPrefix("./") ? String(encoded.dropFirst(2)) : encoded
        return SARIFLog.ArtifactLocation(uri: relative, uriBaseId: Self.sourceRoot, index: 0)
    }

    /// `file:` URI of the working directory, ending in `/` as SARIF requires of a base.
    var directoryURI: String {
        let path = workingDirectory.hasSuffix("/") ? workingDirectory : workingDirectory + "/"
        return "file://" + Self.percentEncoded(path)
    }

    static func percentEncoded(_ path: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "%;")
        return path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
    }

    /// SARIF's level for a lint severity.
    static func level(_ severity: Severity) -> String {
        switch severity {
        case .error: "error"
        case .warning: "warning"
        case .note: "note"
        }
    }

    /// Every catalog rule, then a generic rule for each code of the report the catalog does not know.
    static func rules(for report: LintReport) -> [SARIFLog.ReportingDescriptor] {
        var rules = LintRuleCatalog.rules.map { rule in
            SARIFLog.ReportingDescriptor(
                id: rule.code, name: ruleName(rule.code), shortDescription: SARIFLog.Message(text: rule.summary),
                fullDescription: SARIFLog.Message(text: rule.help), help: SARIFLog.Message(text: rule.help),
                defaultConfiguration: nil)
        }
        var known = Set(rules.map(\.id))
        for finding in report.findings where known.insert(finding.code).inserted {
            rules.append(
                SARIFLog.ReportingDescriptor(
                    id: finding.code, name: ruleName(finding.code),
                    shortDescription: SARIFLog.Message(text: "ATS configuration finding \(finding.code)"),
                    fullDescription: nil,
                    help: SARIFLog.Message(text: "See the finding's message and fix; `ats-proxy lint` explains it."),
                    defaultConfiguration: nil))
        }
        return rules
    }

    /// `wildcard-key` → `WildcardKey` (SARIF's `name` is an identifier-like form of the rule).
    static func ruleName(_ code: String) -> String {
        code.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }
}
