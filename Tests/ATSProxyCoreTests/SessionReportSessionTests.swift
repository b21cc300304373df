import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// The report fed with records a real `ProxySession` logged (pumped in memory, no sockets).
@Suite struct SessionReportSessionTests {
    typealias S = ProxySessionTests

    /// Records of a blocked cleartext request and of a TLS 1.1 origin, both under full ATS.
    static func sessionRecords() throws -> [RequestRecord] {
        var records: [RequestRecord] = []
        let cleartext = try S.Harness()
        records +=
            Transcript(
                cleartext.send("GET http://plain.example.com/a HTTP/1.1\r\nHost: plain.example.com\r\n\r\n")
            ).records

        let harness = try S.Harness()
        let client = try S.establishTunnel(harness, host: "old.example.com")
        _ = client.write(Array("GET / HTTP/1.1\r\nHost: old.example.com\r\n\r\n".utf8))
        _ = harness.send(.clientBytes(client.takeOutbound()))
        let origin = try harness.originServer(host: "old.example.com", versions: .tls11...(.tls11))
        records += Transcript(S.pumpUpstream(harness, origin: origin, first: harness.send(.upstreamConnected))).records
        return records
    }

    @Test func recordsFromTheProxySessionProduceARoundTrippingDictionary() throws {
        let records = try Self.sessionRecords()
        #expect(records.map(\.result) == [.blockedCleartext, .failed])
        let report = SessionReport(configuration: .empty, options: ReportFixtures.pinnedOptions)
        for record in records { report.record(record) }
        let document = report.document()
        #expect(document.totals.violations == 2)
        let hosts = Dictionary(uniqueKeysWithValues: document.hosts.map { ($0.host, $0) })
        #expect(hosts["plain.example.com"]?.verdicts.first?.code == "-1022")
        #expect(hosts["old.example.com"]?.verdicts.first?.code == "-1200 [3:-9836]")
        let minimal = document.minimalDictionary
        let entries = Dictionary(uniqueKeysWithValues: minimal.entries.map { ($0.key, $0) })
        #expect(entries["plain.example.com"]?.allowsInsecureHTTPLoads == true)
        // Enforce mode never learns the server's version: the lowest version is assumed and noted.
        #expect(entries["old.example.com"]?.minimumTLSVersion == "TLSv1.0")
        #expect(minimal.notes.contains { $0.hasPrefix("old.example.com: ") })
        #expect(minimal.roundTripVerified)
        let parsed = try ReportFixtures.parseFragment(minimal.plist)
        #expect(try ReportFixtures.allows(parsed, "http://plain.example.com/a"))
        #expect(try ReportFixtures.allows(parsed, "https://old.example.com/", serverVersion: .tls11))
        #expect(try !ReportFixtures.allows(parsed, "http://old.example.com/"))
        #expect(try !ReportFixtures.allows(parsed, "http://other.example.com/"))
    }
}
