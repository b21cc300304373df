import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// Tests for: the session report says when Certificate Transparency could not be evaluated.
@Suite("Report: CT not evaluated")
struct ReportCTTests {
    @Test func aHostWhoseCTWasNotEvaluatedCarriesTheSentence() throws {
        var unchecked = ReportFixtures.tls()
        unchecked["ct"] = CTStatus.notEvaluatedText
        var checked = ReportFixtures.tls()
        checked["ct"] = "complies (embedded SCTs, 2 counted)"
        let document = ReportFixtures.report([
            ReportFixtures.record("https://public.example.com/", tls: unchecked),
            ReportFixtures.record("https://checked.example.com/", tls: checked),
        ]).document()
        let host = try #require(document.hosts.first { $0.host == "public.example.com" })
        #expect(host.needs.assumptions.contains { $0.hasPrefix("CT not evaluated: run `ats-proxy ct update`") })
        #expect(document.minimalDictionary.notes.contains { $0.contains("CT not evaluated") })
        let other = try #require(document.hosts.first { $0.host == "checked.example.com" })
        #expect(other.needs.assumptions.isEmpty)
    }
}
