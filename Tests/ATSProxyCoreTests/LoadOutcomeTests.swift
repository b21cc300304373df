import ATSPolicy
import Foundation
import Testing

@testable import ATSProxyCore

/// `LoadOutcome`: the one word (and the device's code) for each kind of record, and the console line that
/// starts with that word and never prints `?` for a code.
@Suite struct LoadOutcomeTests {
    static func record(
        _ url: String, method: String = "GET", result: RequestRecord.Result = .completed, errorCode: Int? = nil,
        streamError: StreamError? = nil, status: Int? = 200, atsRequired: Bool = true, appTrust: AppTrustRecord? = nil
    ) -> RequestRecord {
        RequestRecord(
            time: Date(timeIntervalSince1970: 1_700_000_000), clientAddress: "127.0.0.1:50000", taskID: "ABC.1",
            method: method, url: url, httpProtocol: "http/1.1", source: .urlsession, result: result,
            atsRequired: atsRequired, ruleChain: [], rule: "the rule", errorCode: errorCode, streamError: streamError,
            status: status, appTrust: appTrust)
    }

    static let cases: [(RequestRecord, LoadOutcome, String?)] = [
        (record("https://a/"), .allowed, nil),
        (record("http://a/", atsRequired: false), .allowedByException, nil),
        (record("https://a:8443/", method: "CONNECT"), .passthrough, nil),
        (record("http://a/", result: .blockedCleartext, errorCode: -1022, status: 403), .blocked, "-1022"),
        (record("http://127.0.0.1/", result: .refused, errorCode: -1004, status: 403), .blocked, "-1004"),
        (
            record("https://a/", result: .failed, errorCode: -1200, streamError: .secureTransport(-9836), status: 502),
            .failed,
            "-1200 [3:-9836]"
        ),
        (record("https://a/", result: .failed, errorCode: -1202, atsRequired: false), .failed, "-1202"),
        (record("https://a/", method: "CONNECT", result: .clientUntrustedCA, errorCode: -1202), .failed, "-1202"),
        (record("https://a/", result: .failed, errorCode: -1004, status: 502), .networkError, "-1004"),
        (record("https://a/", result: .failed, errorCode: -1001, status: 504), .networkError, "-1001"),
        (record("https://a/", result: .failed, errorCode: -999), .networkError, "-999"),
        (record("http://a/", result: .reported, errorCode: -1022), .reported, "-1022"),
        (record("https://a:443/", method: "CONNECT", result: .challengeRefused, status: nil), .challengePassed, nil),
        (record("https://a/", result: .challengeAccepted, status: 502), .challengeFinding, nil),
    ]

    @Test func eachKindOfRecordHasItsWordAndCode() {
        for (record, outcome, code) in Self.cases {
            #expect(LoadOutcome(record) == outcome, "\(record.result) \(record.errorCode ?? 0)")
            #expect(LoadOutcome.code(of: record) == code, "\(outcome)")
        }
        #expect(LoadOutcome.allowedByException.rawValue == "allowed by exception")
        #expect(LoadOutcome.networkError.slug == "network-error")
    }

    /// The console line says the word, then the code (or the status of a load that went through), and the JSON
    /// line carries the same word as `outcome`.
    @Test func theConsoleAndJSONLinesUseTheWordAndCode() throws {
        for (record, outcome, code) in Self.cases {
            var formatter = DiagnosticsFormatter(level: .summary)
            let line = try #require(formatter.text(record).last { $0.hasPrefix("ats-proxy: ") })
            let after = try #require(line.components(separatedBy: " → ").last)
            #expect(after.hasPrefix(outcome.rawValue + " " + (code ?? "")), "\(line)")
            #expect(!line.contains("?"), "\(line)")
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(formatter.jsonLine(record).utf8)) as? [String: Any])
            #expect(json["outcome"] as? String == outcome.rawValue)
            #expect(json["errorCode"] as? Int == record.errorCode)
        }
    }

    /// ATS violations are what the report counts as such: not the network, not the proxy's own refusals.
    @Test func onlyATSFailuresBreakATS() {
        let breaking = Self.cases.filter { LoadOutcome.breaksATS($0.0) }.map { LoadOutcome.code(of: $0.0) ?? "" }
        #expect(breaking == ["-1022", "-1200 [3:-9836]", "-1022"], "\(breaking)")
    }
}
