import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// The identity of a violation (`ViolationKey`) is the same whether it comes from a live record or from the
/// report.json that record ended up in, so a session compared with its own report has nothing new; and the
/// step summary marks what the baseline did not know.
@Suite struct ViolationBaselineTests {
    static let records = [
        ReportFixtures.record(
            "http://a.example.test/x", .blockedCleartext, error: -1022, rule: "cleartext is not allowed",
            fix: "add NSExceptionAllowsInsecureHTTPLoads", status: nil),
        ReportFixtures.record(
            "https://b.example.test/", .failed, error: -1200, stream: .secureTransport(-9836),
            rule: "TLS 1.2 is required",
            fix: "set NSExceptionMinimumTLSVersion"),
        ReportFixtures.record("https://ok.example.test/", tls: ReportFixtures.tls()),
        ReportFixtures.record("https://down.example.test/", .failed, error: -1004, rule: "connection refused"),
    ]

    /// The report.json of `records`, read back as a baseline.
    static func baseline(_ records: [RequestRecord]) throws -> ViolationBaseline {
        let directory = try ReportFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("report.json").path
        try ReportFixtures.report(records).jsonData().write(to: URL(fileURLWithPath: path))
        return try ViolationBaseline.load(path: path)
    }

    @Test func aSessionAgainstItsOwnReportHasNothingNew() throws {
        let baseline = try Self.baseline(Self.records)
        let ledger = ViolationLedger()
        for record in Self.records { ledger.record(record) }
        #expect(ledger.violations.count == 2, "allowed and transport failures are no violations")
        #expect(baseline.violations == ledger.violations)
        let comparison = BaselineComparison(baseline: baseline, seen: ledger.violations)
        #expect(comparison.new.isEmpty && comparison.gone.isEmpty && comparison.unchanged.count == 2)
    }

    @Test func newAndGoneViolationsAreListed() throws {
        let baseline = try Self.baseline(Self.records)
        let ledger = ViolationLedger()
        ledger.record(Self.records[1])
        ledger.record(
            ReportFixtures.record(
                "http://c.example.test/", .blockedCleartext, error: -1022, rule: "cleartext is not allowed",
                status: nil))
        let comparison = BaselineComparison(baseline: baseline, seen: ledger.violations)
        #expect(comparison.new.map(\.host) == ["c.example.test"])
        #expect(comparison.gone.map(\.host) == ["a.example.test"])
        #expect(comparison.unchanged.map(\.code) == ["-1200 [3:-9836]"])
        #expect(
            comparison.lines.first
                == "ats-proxy: baseline \(baseline.path): 1 new violation, 1 gone since the baseline, 1 unchanged")
        #expect(comparison.lines.contains("  new: c.example.test -1022: cleartext is not allowed"))

        let markdown = StepSummaryWriter.markdown(
            ReportFixtures.report(Self.records).document(), exitStatus: 3, baseline: comparison)
        #expect(
            markdown.contains(
                "| a.example.test | -1022 | 1 | cleartext is not allowed | add NSExceptionAllowsInsecureHTTPLoads | known |"
            ), "\(markdown)")
        #expect(markdown.contains("- a.example.test -1022: cleartext is not allowed"))
    }

    @Test func aFileThatIsNotAReportIsRefused() throws {
        let directory = try ReportFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("other.json").path
        try Data(#"{"schemaVersion": 9, "hosts": []}"#.utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: ViolationBaseline.LoadError.self) { try ViolationBaseline.load(path: path) }
        #expect(throws: ViolationBaseline.LoadError.self) { try ViolationBaseline.load(path: path + ".missing") }
    }
}
