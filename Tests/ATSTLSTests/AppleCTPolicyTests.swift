import Foundation
import Testing

@testable import ATSTLS

/// Tests for: Apple's CT policy as a pure function over the certificate's lifetime and its SCTs.
@Suite("Apple's CT policy")
struct AppleCTPolicyTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let day: TimeInterval = 86400

    /// One SCT of a case: operator, kind, state, source, age and validation status.
    struct SCT: CustomStringConvertible {
        var log: String
        var operatorName: String
        var kind: CTLogKind = .rfc6962
        var state: CTLogState = .usable(since: AppleCTPolicyTests.now.addingTimeInterval(-400 * 86400))
        var source: SCTDetails.Source = .embedded
        var issuedDaysAgo: Double = 1
        var status: SCTDetails.Status = .valid
        var interval: Range<Date>? = nil
        var listed = true

        var description: String { "\(log)/\(operatorName)/\(kind.rawValue)/\(state.name)/\(source.rawValue)" }

        var details: SCTDetails {
            SCTDetails(
                source: source, logIDHex: log, timestamp: now.addingTimeInterval(-issuedDaysAgo * day), status: status,
                log: listed
                    ? CTLogFacts(
                        description: log, operatorName: operatorName, kind: kind, state: state,
                        temporalInterval: interval) : nil)
        }
    }

    static func sct(_ log: String, _ operatorName: String? = nil) -> SCT {
        SCT(log: log, operatorName: operatorName ?? log)
    }

    /// One row of the table: lifetime in days (notAfter − notBefore), SCTs, expected shortfall (nil: complies).
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let lifetimeDays: Double
        let scts: @Sendable () -> [SCT]
        let shortfall: CTShortfall?
        var path: CTCompliancePath? = nil
        var testDescription: String { name }
    }

    static let retiredYesterday = CTLogState.retired(at: now.addingTimeInterval(-1 * day))
    static let retiredLongAgo = CTLogState.retired(at: now.addingTimeInterval(-30 * day))

    static let cases: [Case] = [
        Case(name: "0 SCTs, 90 days", lifetimeDays: 90, scts: { [] }, shortfall: .tooFewSCTs),
        Case(name: "1 SCT, 90 days", lifetimeDays: 90, scts: { [sct("a")] }, shortfall: .tooFewSCTs),
        Case(
            name: "2 SCTs from 2 operators, 90 days", lifetimeDays: 90, scts: { [sct("a"), sct("b")] }, shortfall: nil,
            path: .embedded),
        Case(
            name: "2 SCTs from one operator, 90 days", lifetimeDays: 90, scts: { [sct("a", "X"), sct("b", "X")] },
            shortfall: .operatorDiversity),
        Case(
            name: "2 SCTs, 198 days (needs 3)", lifetimeDays: 198, scts: { [sct("a"), sct("b")] },
            shortfall: .tooFewSCTs),
        Case(
            name: "3 SCTs from 3 operators, 198 days", lifetimeDays: 198, scts: { [sct("a"), sct("b"), sct("c")] },
            shortfall: nil, path: .embedded),
        Case(
            name: "3 SCTs, 2 from one operator, 398 days (2 per operator count)", lifetimeDays: 397,
            scts: { [sct("a", "X"), sct("b", "X"), sct("c", "Y")] }, shortfall: nil, path: .embedded),
        Case(
            name: "3 SCTs from one operator, 397 days", lifetimeDays: 397,
            scts: { [sct("a", "X"), sct("b", "X"), sct("c", "X")] }, shortfall: .operatorDiversity),
        Case(
            name: "180 days exactly is the 2-SCT row", lifetimeDays: 180 - 1 / 86400, scts: { [sct("a"), sct("b")] },
            shortfall: nil),
        Case(
            name: "one second past 180 days is the 3-SCT row", lifetimeDays: 180, scts: { [sct("a"), sct("b")] },
            shortfall: .tooFewSCTs),
        Case(
            name: "the same log twice counts once", lifetimeDays: 90, scts: { [sct("a"), sct("a")] },
            shortfall: .tooFewSCTs),
        Case(
            name: "an invalid SCT does not count", lifetimeDays: 90,
            scts: {
                var bad = sct("b")
                bad.status = .invalid
                return [sct("a"), bad]
            }, shortfall: .tooFewSCTs),
        Case(
            name: "an SCT from an unknown log does not count", lifetimeDays: 90,
            scts: {
                var unknown = sct("b")
                unknown.listed = false
                return [sct("a"), unknown]
            }, shortfall: .tooFewSCTs),
        Case(
            name: "an SCT from the future does not count", lifetimeDays: 90,
            scts: {
                var future = sct("b")
                future.issuedDaysAgo = -1
                return [sct("a"), future]
            }, shortfall: .tooFewSCTs),
        Case(
            name: "retired after the SCT: once approved, counts", lifetimeDays: 90,
            scts: {
                var retired = sct("b")
                retired.state = retiredYesterday
                retired.issuedDaysAgo = 10
                return [sct("a"), retired]
            }, shortfall: nil),
        Case(
            name: "retired before the SCT: does not count", lifetimeDays: 90,
            scts: {
                var retired = sct("b")
                retired.state = retiredLongAgo
                retired.issuedDaysAgo = 10
                return [sct("a"), retired]
            }, shortfall: .tooFewSCTs),
        Case(
            name: "only retired logs: no currently approved log", lifetimeDays: 90,
            scts: {
                var first = sct("a")
                var second = sct("b")
                first.state = retiredYesterday
                second.state = retiredYesterday
                first.issuedDaysAgo = 10
                second.issuedDaysAgo = 10
                return [first, second]
            }, shortfall: .noCurrentlyApprovedLog),
        Case(
            name: "pending and rejected logs never count", lifetimeDays: 90,
            scts: {
                var pending = sct("b")
                pending.state = .pending(since: now.addingTimeInterval(-5 * day))
                var rejected = sct("c")
                rejected.state = .rejected(since: now.addingTimeInterval(-5 * day))
                return [sct("a"), pending, rejected]
            }, shortfall: .tooFewSCTs),
        Case(
            name: "readonly logs are currently approved", lifetimeDays: 90,
            scts: {
                var frozen = sct("b")
                frozen.state = .readonly(since: now.addingTimeInterval(-5 * day))
                return [sct("a"), frozen]
            }, shortfall: nil),
        Case(
            name: "a tiled log counts beside an RFC 6962 log", lifetimeDays: 90,
            scts: {
                var tiled = sct("b")
                tiled.kind = .staticCTAPI
                return [sct("a"), tiled]
            }, shortfall: nil),
        Case(
            name: "tiled logs only: no RFC 6962 log", lifetimeDays: 90,
            scts: {
                var first = sct("a")
                var second = sct("b")
                first.kind = .staticCTAPI
                second.kind = .staticCTAPI
                return [first, second]
            }, shortfall: .noRFC6962Log),
        Case(
            name: "outside the log's temporal interval: does not count", lifetimeDays: 90,
            scts: {
                var sharded = sct("b")
                sharded.interval = now.addingTimeInterval(400 * day)..<now.addingTimeInterval(765 * day)
                return [sct("a"), sharded]
            }, shortfall: .tooFewSCTs),
        Case(
            name: "inside the log's temporal interval: counts", lifetimeDays: 90,
            scts: {
                var sharded = sct("b")
                sharded.interval = now..<now.addingTimeInterval(365 * day)
                return [sct("a"), sharded]
            }, shortfall: nil),
        Case(
            name: "TLS extension + embedded from 2 operators, 397 days", lifetimeDays: 397,
            scts: {
                var delivered = sct("b")
                delivered.source = .tlsExtension
                return [sct("a"), delivered]
            }, shortfall: nil, path: .delivered),
        Case(
            name: "2 OCSP SCTs from 2 operators", lifetimeDays: 397,
            scts: {
                var first = sct("a")
                var second = sct("b")
                first.source = .ocspStaple
                second.source = .ocspStaple
                return [first, second]
            }, shortfall: nil, path: .delivered),
        Case(
            name: "2 TLS-extension SCTs from one operator", lifetimeDays: 397,
            scts: {
                var first = sct("a", "X")
                var second = sct("b", "X")
                first.source = .tlsExtension
                second.source = .tlsExtension
                return [first, second]
            }, shortfall: .tooFewSCTs),
        Case(
            name: "delivered path needs currently approved logs", lifetimeDays: 397,
            scts: {
                var retired = sct("b")
                retired.state = retiredYesterday
                retired.source = .tlsExtension
                retired.issuedDaysAgo = 10
                return [sct("a"), retired]
            }, shortfall: .tooFewSCTs),
    ]

    @Test(arguments: cases) func policyTable(_ row: Case) {
        let notBefore = Self.now.addingTimeInterval(-Self.day)
        let notAfter = notBefore.addingTimeInterval(row.lifetimeDays * Self.day)
        let result = AppleCTPolicy.evaluate(
            notBefore: notBefore, notAfter: notAfter, scts: row.scts().map(\.details), at: Self.now)
        #expect(result.shortfall == row.shortfall, "\(row.name): \(result)")
        if let path = row.path { #expect(result.path == path) }
        #expect(result.complies == (row.shortfall == nil))
    }

    /// (notAfter − notBefore in seconds, Apple's lifetime in days).
    static let lifetimes: [(seconds: Double, days: Int)] = [
        (0, 1), (86399, 1), (86400, 2), (180 * 86400 - 1, 180), (180 * 86400, 181), (397 * 86400, 398),
    ]

    @Test(arguments: lifetimes)
    func lifetimeIsInclusiveAndRoundsUp(seconds: Double, days: Int) {
        let start = Self.now
        #expect(AppleCTPolicy.lifetimeDays(notBefore: start, notAfter: start.addingTimeInterval(seconds)) == days)
    }

    @Test func requirementRows() {
        #expect(AppleCTPolicy.embeddedRequirement(lifetimeDays: 180) == (2, 1))
        #expect(AppleCTPolicy.embeddedRequirement(lifetimeDays: 181) == (3, 2))
        #expect(AppleCTPolicy.embeddedRequirement(lifetimeDays: 398) == (3, 2))
    }

    @Test func countedSCTsAreReportedForTheSentence() {
        let notBefore = Self.now.addingTimeInterval(-Self.day)
        let result = AppleCTPolicy.evaluate(
            notBefore: notBefore, notAfter: notBefore.addingTimeInterval(300 * Self.day),
            scts: [Self.sct("a").details], at: Self.now)
        #expect(result.counted == 1)
        #expect(result.required == 3)
        #expect(result.lifetimeDays == 301)
        let sentence = UpstreamVerdict.ctSentence(valid: 1, required: 3, shortfall: .tooFewSCTs)
        #expect(sentence.contains("1 SCT from approved logs counts (3 needed)"))
    }
}
