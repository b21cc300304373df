import ATSPolicy
import Foundation
import Testing

/// `LintRuleCatalog` names every finding code the linter and the parser can report (SARIF lists its rules from
/// it), read out of the sources themselves so that a new code cannot be forgotten.
@Suite struct LintRuleCatalogTests {
    /// Every `code: "…"` literal in the ATSPolicy sources that build `ConfigMessage`s.
    static func codesInSources() throws -> Set<String> {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/ATSPolicy")
        let pattern = try NSRegularExpression(pattern: #"code: "([a-z0-9-]+)""#)
        var codes = Set<String>()
        for name in try FileManager.default.contentsOfDirectory(atPath: sources.path) where name.hasSuffix(".swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(name), encoding: .utf8)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                if let range = Range(match.range(at: 1), in: text) { codes.insert(String(text[range])) }
            }
        }
        return codes
    }

    @Test func everyCodeInTheSourcesHasARule() throws {
        let codes = try Self.codesInSources()
        #expect(codes.count >= 30, "the scan found \(codes.count) codes: the pattern no longer matches the sources")
        let catalogued = Set(LintRuleCatalog.rules.map(\.code))
        #expect(codes.subtracting(catalogued).isEmpty, "codes without a rule: \(codes.subtracting(catalogued))")
        #expect(catalogued.subtracting(codes).isEmpty, "rules no source reports: \(catalogued.subtracting(codes))")
    }

    @Test func rulesAreUniqueAndDescribed() {
        let codes = LintRuleCatalog.rules.map(\.code)
        #expect(Set(codes).count == codes.count)
        #expect(codes == codes.sorted())
        for rule in LintRuleCatalog.rules {
            #expect(!rule.summary.isEmpty && !rule.help.isEmpty, "\(rule.code)")
            #expect(LintRuleCatalog.rule(rule.code) == rule)
        }
    }
}
