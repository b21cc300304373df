import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// HTTP/3 offers in the session report: counted per host on both of the report's paths (a record classified
/// afresh and one counted by its signature), with the latest offer and the note, in report.json (valid against
/// the schema) and report.html; a host without an offer has no `http3` at all.
@Suite struct SessionReportHTTP3Tests {
    typealias F = ReportFixtures

    static let offer = HTTP3Advertisement(alternatives: [
        HTTP3Advertisement.Alternative(protocolID: "h3", authority: ":443", maxAge: 86400)
    ])

    static func records() -> [RequestRecord] {
        let offered = F.record("https://quic.example.com/a", tls: F.tls()).updating { $0.http3 = offer }
        return [
            offered, offered,  // the second is counted by its signature only
            F.record("https://quic.example.com/b", tls: F.tls()),  // a response without the offer
            F.record("https://tcp.example.com/", tls: F.tls()),
        ]
    }

    @Test func hostsThatOfferedHTTP3SaySoWithTheNote() throws {
        let report = F.report(Self.records())
        let hosts = report.document().hosts
        let quic = try #require(hosts.first { $0.host == "quic.example.com" })
        let http3 = try #require(quic.http3)
        #expect(http3.responses == 2)
        #expect(http3.alternatives == Self.offer.alternatives)
        #expect(http3.note == HTTP3Advertisement.note)
        #expect(hosts.first { $0.host == "tcp.example.com" }?.http3 == nil)

        let html = report.html()
        #expect(html.contains("HTTP/3 offered"))
        #expect(html.contains("h3=&quot;:443&quot;; ma=86400"), "\(html)")
        #expect(html.contains("UDP 443 must be reachable"))
    }

    @Test func reportJSONWithAnOfferValidatesAgainstTheSchema() throws {
        let directory = try F.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try F.report(Self.records()).write(to: directory.path)
        let result = try F.checkReportJSON(
            at: directory.appendingPathComponent("report.json").path,
            """
            errors = list(validator.iter_errors(document))
            for error in errors:
                print("/".join(str(p) for p in error.path), error.message)
            hosts = {h["host"]: h for h in document["hosts"]}
            print("quic", json.dumps(hosts["quic.example.com"].get("http3"), sort_keys=True))
            print("tcp", "http3" in hosts["tcp.example.com"])
            # Drift is rejected: a protocol that is not HTTP/3, an unknown field.
            broken = copy.deepcopy(document)
            broken["hosts"] = [h for h in broken["hosts"] if h["host"] == "quic.example.com"]
            broken["hosts"][0]["http3"]["alternatives"][0]["protocolID"] = "h2"
            broken["hosts"][0]["http3"]["extra"] = 1
            print("rejected", len(list(validator.iter_errors(broken))))
            sys.exit(1 if errors else 0)
            """)
        #expect(!result.timedOut)
        #expect(result.status == 0, "\(result.output)")
        #expect(
            result.output.contains(
                #"quic {"alternatives": [{"authority": ":443", "maxAge": 86400, "protocolID": "h3"}], "note": "#),
            "\(result.output)")
        #expect(result.output.contains(#""responses": 2}"#), "\(result.output)")
        #expect(result.output.contains("tcp False"))
        #expect(result.output.contains("rejected 2"), "\(result.output)")
    }
}
