import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// A record like one seen before only moves counters (the report's fast path): the report must
/// read exactly as if every record had been parsed and classified, and the live page's
/// `minimalDictionaryPlist` must always equal the document's.
@Suite struct SessionReportRepeatTests {
    typealias F = ReportFixtures

    /// Every kind of record the accumulator distinguishes: cleartext, old and static-RSA servers,
    /// a trust failure, good hosts, a local host, an unparsable URL, and another source.
    static let kinds: [RequestRecord] =
        SessionReportTests.mixedTraffic + [
            F.record("http://127.0.0.1:8080/status"),
            F.record("not a url", .failed, error: -1002, rule: "unsupported URL"),
            F.record(
                "https://good.example.com/media",
                tls: F.tls(
                    "TLSv1.2", cipher: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                    keyExchange: "ECDHE"), source: .media),
            F.record("http://plain.example.net/", .reported, error: -1022, rule: "ATS is required (the default)."),
        ]

    /// `record` with a query that makes its URL (and so its signature) unique, without changing the
    /// host, load, verdict or TLS set it counts towards.
    static func unique(_ record: RequestRecord, _ number: Int) -> RequestRecord {
        record.updating { $0.url += "?n=\(number)" }
    }

    @Test func repeatedRecordsReadAsIfEachHadBeenClassified() throws {
        // More hosts than the report analyses (the rest are counted as dropped), and more distinct
        // signatures than the fast path remembers, so that it starts over a few times.
        let many = (0..<(SessionReport.maximumHosts + 20)).map { F.record("https://h\($0).example.com/", tls: F.tls()) }
        var repeated: [RequestRecord] = []
        var uniqued: [RequestRecord] = []
        for round in 0..<4 {
            for (index, record) in (Self.kinds + many.suffix(40)).enumerated() {
                var sized = record.updating {
                    $0.bytesToClient = 100 * round + index
                    $0.durationMilliseconds = Double(round) + 0.5
                }
                if round == 1 && index == 0 { sized = sized.updating { $0.durationMilliseconds = .nan } }
                repeated.append(sized)
                // The first of each record keeps its URL (the report keeps the first URL it saw).
                uniqued.append(round == 0 ? sized : Self.unique(sized, round * 10_000 + index))
            }
        }
        // The first round comes first so that the hosts of `kinds` are analysed; `many` then fills
        // the host cap: 8 + 40 hosts of the first round, 4,048 of `many`, and its last 28 dropped.
        let fast = F.report(Array(repeated.prefix(51)) + many + repeated.dropFirst(51))
        let slow = F.report(Array(uniqued.prefix(51)) + many + uniqued.dropFirst(51))
        #expect(fast.requestCount == many.count + repeated.count)
        let fastJSON = String(decoding: try fast.jsonData(), as: UTF8.self)
        let slowJSON = String(decoding: try slow.jsonData(), as: UTF8.self)
        #expect(fastJSON == slowJSON)
        let document = fast.document()
        #expect(document.minimalDictionary.notes.contains { $0.hasPrefix("28 requests to hosts beyond") })
        let good = try #require(document.hosts.first { $0.host == "good.example.com" })
        #expect(good.requests == 12 && good.tls.map(\.count) == [8, 4] && good.sources == ["urlsession", "media"])
        let api = try #require(document.hosts.first { $0.host == "api.example.com" })
        #expect(api.blocked == 8 && api.verdicts.map(\.count) == [4, 4])
        #expect(api.verdicts.first?.exampleURL == "http://api.example.com/v1/items")
    }

    @Test func livePlistIsTheDocumentsAndFollowsCleartextCounts() throws {
        let report = F.report([])
        #expect(report.minimalDictionaryPlist() == report.document().minimalDictionary.plist)
        report.record(F.record("https://good.example.com/", tls: F.tls()))
        #expect(report.minimalDictionaryPlist() == report.document().minimalDictionary.plist)
        let cleartext = F.record(
            "http://api.example.com/v1/items", .blockedCleartext, error: -1022, rule: "ATS is required (the default).")
        report.record(cleartext)
        let one = report.minimalDictionaryPlist()
        #expect(one.contains("(1 http:// request seen)"), "\(one)")
        #expect(one == report.document().minimalDictionary.plist)
        // The same record again: the fast path still moves the count the App Review note quotes.
        report.record(cleartext)
        let two = report.minimalDictionaryPlist()
        #expect(two.contains("(2 http:// requests seen)"), "\(two)")
        #expect(two == report.document().minimalDictionary.plist)
        // Nothing new: the same text (from the cache).
        for _ in 0..<10 { report.record(F.record("https://good.example.com/", tls: F.tls())) }
        #expect(report.minimalDictionaryPlist() == two)
        // A new policy can change the dictionary: an older platform does not exempt local hosts.
        report.record(F.record("http://devbox/", .blockedCleartext, error: -1022))
        let before = report.minimalDictionaryPlist()
        #expect(before == report.document().minimalDictionary.plist)
        report.updatePolicy(
            SessionReport.Policy(
                configuration: F.configuration([:]),
                options: EvaluationOptions(platform: Platform(family: .iOS, version: OSVersion(9, 0))),
                sourceSummary: "test"))
        let after = report.minimalDictionaryPlist()
        #expect(after != before && after.contains("<key>devbox</key>"), "\(after)")
        #expect(after == report.document().minimalDictionary.plist)
    }
}
