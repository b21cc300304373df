import ATSTestSupport
import Foundation
import Testing

/// An origin that offers HTTP/3 (`Alt-Svc: h3=":443"; ma=86400`) and one that does not, through the proxy with
/// curl: the JSON log's records carry the typed `http3` field only for the offer, and the report (report.json,
/// report.html) and the live flow view's events say so with the note. Nothing about QUIC is intercepted: the
/// client's traffic stays on TCP.
@Suite(.serialized) struct HTTP3AdvertisementEndToEndTests {
    static let offer = "h3=\":443\"; ma=86400"

    /// JSON log lines whose `url` contains `path`.
    static func records(_ log: String, path: String) throws -> [[String: Any]] {
        try log.split(separator: "\n").filter { $0.hasPrefix("{") && $0.contains(path) }.map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    @Test func theOfferIsRecordedReportedAndShownAndItsAbsenceIsNot() throws {
        let reportDirectory = try TemporaryDirectory("http3-report")
        let webPort = try E2E.freePort()
        let stack = try ProxyStack(
            extraATS: cleartextException("tcp.example.test"),
            arguments: [
                "--log-format", "json", "--report", reportDirectory.path, "--web", "127.0.0.1:\(webPort)",
            ],
            extraOrigins: { directory, pki in
                [
                    (
                        "quic.example.test",
                        try Origin(
                            name: "quic", directory: directory, tls: try pki.leaf(["quic.example.test"], file: "quic"))
                    ),
                    ("tcp.example.test", try Origin(name: "tcp", directory: directory)),
                ]
            })
        let encoded = try #require(Self.offer.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let offered = try stack.curl(stack.url("quic.example.test", "/alt-svc?v=\(encoded)"))
        #expect(offered.httpCode == 200, "\(offered.stderr)")
        #expect(offered.headers["alt-svc"] == Self.offer, "the client still sees the origin's offer")
        #expect(try stack.curl(stack.url("tcp.example.test", "/hello", scheme: "http")).httpCode == 200)
        let cleared = try stack.curl(stack.url("quic.example.test", "/alt-svc?v=clear"))
        #expect(cleared.httpCode == 200)

        let log = stack.proxy.waitForLog("v=clear")
        let offerRecord = try #require(try Self.records(log, path: "/alt-svc?v=h3").first, "\(log)")
        let http3 = try #require(offerRecord["http3"] as? [String: Any], "\(offerRecord)")
        let alternatives = try #require(http3["alternatives"] as? [[String: Any]])
        #expect(alternatives.count == 1)
        #expect(alternatives.first?["protocolID"] as? String == "h3")
        #expect(alternatives.first?["authority"] as? String == ":443")
        #expect(alternatives.first?["maxAge"] as? Int == 86400)
        for path in ["/hello", "/alt-svc?v=clear"] {
            let record = try #require(try Self.records(log, path: path).first, "\(path): \(log)")
            #expect(record["http3"] == nil, "\(path): \(record)")
        }
        // The client's traffic stayed on TCP: the proxy spoke to the origin over TLS on TCP and relayed the answer.
        #expect(offerRecord["result"] as? String == "completed")

        stack.proxy.child.signal(SIGUSR1)
        let reportPath = reportDirectory.file("report.json")
        let data = try #require(E2E.poll(timeout: 10) { FileManager.default.contents(atPath: reportPath) })
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let hosts = try #require(document["hosts"] as? [[String: Any]])
        let quic = try #require(hosts.first { $0["host"] as? String == "quic.example.test" })
        let hostHTTP3 = try #require(quic["http3"] as? [String: Any], "\(quic)")
        #expect(hostHTTP3["responses"] as? Int == 1)
        #expect((hostHTTP3["note"] as? String)?.contains("URLSession may switch to QUIC") == true)
        #expect(hosts.first { $0["host"] as? String == "tcp.example.test" }?["http3"] == nil)
        let html = try String(contentsOfFile: reportDirectory.file("report.html"), encoding: .utf8)
        #expect(html.contains("HTTP/3 offered") && html.contains("UDP 443 must be reachable"))

        // The flow view's event stream carries the offer and the note for the detail pane.
        let events = try Curl.fetch(
            "http://127.0.0.1:\(webPort)/events", proxy: nil, arguments: ["-N", "--max-time", "2"], timeout: 5)
        let flows = events.bodyText.split(separator: "\n").filter { $0.hasPrefix("data: {\"") }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.dropFirst(6).utf8)) as? [String: Any]
        }
        let offerFlow = try #require(flows.first { ($0["url"] as? String)?.contains("v=h3") == true }, "\(flows)")
        let view = try #require(offerFlow["http3"] as? [String: Any], "\(offerFlow)")
        #expect(view["offer"] as? String == Self.offer)
        #expect((view["note"] as? String)?.contains("TLS 1.3 only") == true)
        #expect(flows.filter { $0["http3"] != nil }.count == 1, "only the offer: \(flows)")
    }
}
