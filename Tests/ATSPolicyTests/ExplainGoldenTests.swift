import Foundation
import Testing

@testable import ATSPolicy

/// Golden output of `explain` for a few URLs, with a fixed clock, process and task UUID so that
/// the console lines are reproducible. Expected texts live in `Golden/*.txt` beside this file;
/// when a comparison fails the actual text is written to `/tmp/ats-golden/NAME.txt` for review.
@Suite struct ExplainGoldenTests {
    static let context = ConsoleContext(
        processName: "NewsReader", pid: 4242, threadID: 4243, date: Date(timeIntervalSince1970: 1_767_323_045.678901),
        timeZone: TimeZone(identifier: "UTC")!, taskUUID: UUID(uuidString: "B2AAF92D-1CA3-48A2-9FFD-CA2F3EBE14D7")!,
        taskNumber: 1)

    static let mixAndMatch: ATSConfiguration = {
        var configuration = ATSConfiguration()
        configuration.allowsLocalNetworking = .value(true)
        var legacy = ExceptionDomain(key: "legacy-feeds.example.com")
        legacy.allowsInsecureHTTPLoads = true
        var media = ExceptionDomain(key: "media.example.net")
        media.includesSubdomains = true
        media.minimumTLSVersion = .tls11
        media.minimumTLSVersionSpecified = true
        media.requiresForwardSecrecy = false
        configuration.exceptionDomains = [legacy.key: legacy, media.key: media]
        return configuration
    }()

    private func render(_ configuration: ATSConfiguration, _ url: String, platform: String = "ios:18.0") throws
        -> String
    {
        let options = EvaluationOptions(platform: Platform(parsing: platform)!)
        let decision = ATSEvaluator(configuration: configuration, options: options).evaluate(
            try RequestTarget(parsing: url))
        return DecisionRenderer.text(DecisionRenderer.explain(decision, context: Self.context)) + "\n"
    }

    private func compare(_ actual: String, golden name: String) throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")
        let expected = try String(contentsOf: directory.appendingPathComponent("\(name).txt"), encoding: .utf8)
        if actual != expected {
            let out = URL(fileURLWithPath: "/tmp/ats-golden")
            try? FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
            try? actual.write(to: out.appendingPathComponent("\(name).txt"), atomically: true, encoding: .utf8)
        }
        #expect(actual == expected, "golden \(name) differs; actual written to /tmp/ats-golden/\(name).txt")
    }

    @Test func blockedCleartextOnIOS18() throws {
        try compare(render(.empty, "http://example.com/feed?page=2"), golden: "blocked-cleartext-ios18")
    }

    @Test func blockedCleartextOnIOS12UsesTheOldWording() throws {
        try compare(render(.empty, "http://example.com/", platform: "ios:12.0"), golden: "blocked-cleartext-ios12")
    }

    @Test func subdomainExceptionWithTLS11AndNoForwardSecrecy() throws {
        try compare(render(Self.mixAndMatch, "https://video.media.example.net/clip.m3u8"), golden: "https-pfs-waived")
    }

    @Test func localHostIsAllowed() throws {
        try compare(render(Self.mixAndMatch, "http://printer.local:631/"), golden: "local-allowed")
    }

    @Test func jsonOutputCarriesTheDecision() throws {
        let options = EvaluationOptions()
        let decision = ATSEvaluator(configuration: .empty, options: options).evaluate(
            try RequestTarget(parsing: "http://example.com/"))
        let report = ExplainReport(
            source: "test", platform: options.platform, configurationMessages: [],
            decisions: [DecisionRenderer.explain(decision, context: Self.context)])
        let json = try #require(
            JSONSerialization.jsonObject(with: Data(DecisionRenderer.json(report).utf8)) as? [String: Any])
        let decisions = try #require(json["decisions"] as? [[String: Any]])
        let first = try #require(decisions.first?["decision"] as? [String: Any])
        #expect(first["atsRequired"] as? Bool == true)
        #expect((first["outcome"] as? [String: Any])?["cleartextBlocked"] != nil)
        #expect((decisions.first?["consoleLines"] as? [String])?.count == 3)
    }
}
