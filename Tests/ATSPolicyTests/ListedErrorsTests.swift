import Foundation
import Testing

@testable import ATSPolicy

/// Regression tests for the errors in what the tool said, found by checking it against Apple's
/// documentation (issue 16, item 7).
@Suite struct ListedErrorsTests {
    private func lint(_ ats: [String: PlistValue], platform: String = "ios:18.0") -> LintReport {
        let source = LoadedInfoPlist(
            path: "ats.plist", kind: .atsDictionary, innerPath: nil, infoPlist: nil, atsValue: .dictionary(ats),
            format: "XML")
        return ATSLinter(source: source, platform: Platform(parsing: platform)!).lint()
    }

    private func emptyEntryNotes(_ report: LintReport) -> [ConfigMessage] {
        report.findings.filter { $0.message.contains("already the default") }
    }

    @Test(arguments: [ATSKey.allowsArbitraryLoadsForMedia, ATSKey.allowsArbitraryLoadsInWebContent])
    func emptyEntryIsNotInertUnderMediaOrWebContentKeys(key: String) {
        let report = lint([
            key: .bool(true), ATSKey.exceptionDomains: .dictionary(["cdn.example.com": .dictionary([:])]),
        ])
        #expect(emptyEntryNotes(report).isEmpty, "the entry keeps ATS on for this host's \(key) loads")
        // explain agrees: the entry makes web content to that host subject to ATS.
        let ats = PlistValue.dictionary([
            key: .bool(true), ATSKey.exceptionDomains: .dictionary(["cdn.example.com": .dictionary([:])]),
        ])
        let source: RequestSource = key == ATSKey.allowsArbitraryLoadsForMedia ? .media : .webkit
        #expect(decide(ats, "http://cdn.example.com/", source: source).isBlocked)
        #expect(!decide(ats, "http://other.example.com/", source: source).isBlocked)
    }

    @Test func emptyEntryForALocalNameIsNotCalledTheDefault() {
        let report = lint([ATSKey.exceptionDomains: .dictionary(["printer.local": .dictionary([:])])])
        #expect(emptyEntryNotes(report).isEmpty)
        #expect(report.findings.contains { $0.code == "local-exception-stricter" })
        let bare = lint([ATSKey.exceptionDomains: .dictionary(["nas": .dictionary([:])])])
        #expect(emptyEntryNotes(bare).isEmpty)
    }

    @Test func emptyEntryForAPublicHostIsStillInert() {
        let report = lint([ATSKey.exceptionDomains: .dictionary(["api.example.com": .dictionary([:])])])
        #expect(emptyEntryNotes(report).count == 1)
    }

    @Test(arguments: [
        ("ios:10.0", false), ("ios:12.1", false), ("ios:12.1.1", true), ("ios:18.0", true), ("macos:10.14", false),
        ("macos:10.14.3", true),
    ])
    func certificateTransparencyKeyIsObsoleteOnlyOncePlatformCTExists(platform: String, obsolete: Bool) {
        let report = lint(
            [
                ATSKey.exceptionDomains: .dictionary([
                    "api.example.com": .dictionary([ATSKey.requiresCertificateTransparency: .bool(true)])
                ])
            ], platform: platform)
        let finding = report.findings.first { $0.code == "obsolete-key" }
        #expect((finding != nil) == obsolete, "\(platform)")
        if let finding {
            #expect(finding.message.contains("since iOS 12.1.1") || finding.message.contains("since macOS 10.14.3"))
        }
    }

    @Test func anOSOlderThanATSIsBlamedNotTheSDK() {
        let onIOS8 = decide(nil, "http://example.com/", options: options("ios:8.0", sdk: "9.0"))
        #expect(!onIOS8.isBlocked)
        let text = onIOS8.ruleChain.map(\.text).joined(separator: " ")
        #expect(text.contains("iOS 8.0 predates ATS"), "\(text)")
        #expect(!text.contains("SDK 9.0"))
        let oldSDK = decide(nil, "http://example.com/", options: options("ios:12.0", sdk: "8.0"))
        #expect(oldSDK.ruleChain.map(\.text).joined().contains("linked against SDK 8.0, which predates ATS"))
    }
}
