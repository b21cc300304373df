import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The live page's report.json and report.html downloads count the connections the host filter left
/// alone, as the report written at exit does: with `--report` (the page shares that report) and
/// without (the page's report is fed from the flow ring).
@Suite(.serialized) struct LiveViewReportDownloadTests {
    @Test(arguments: [true, false])
    func downloadsCountIgnoredConnectionsAsTheExitReportDoes(withReport: Bool) throws {
        let reportDirectory = try TemporaryDirectory("web-ignored-report")
        var extra = ["--ignore-hosts", #"^api\.example\.test:"#]
        if withReport { extra += ["--report", reportDirectory.path] }
        let (stack, webPort, _) = try LiveViewEndToEndTests.stack(extra)
        // Two ignored connections (the client sees the origin's own certificate), one judged request.
        for _ in 0..<2 {
            let ignored = try Curl.fetch("\(stack.api)/hello", proxy: stack.proxy, cacert: stack.pki.caPath)
            #expect(ignored.httpCode == 200, "\(ignored.stderr)")
        }
        #expect(try stack.curl("\(stack.legacy)/hello").httpCode == 200)
        stack.proxy.waitForLog("ats-proxy: GET \(stack.legacy)/hello")

        let base = "http://127.0.0.1:\(webPort)"
        let download = try Curl.fetch("\(base)/report.json", proxy: nil)
        #expect(download.httpCode == 200)
        let document = try #require(try JSONSerialization.jsonObject(with: download.body) as? [String: Any])
        let totals = try #require(document["totals"] as? [String: Any], "\(document)")
        #expect(totals["ignoredConnections"] as? Int == 2, "\(totals)")
        #expect(totals["ignoredHosts"] as? Int == 1, "\(totals)")
        #expect(totals["requests"] as? Int == 1, "\(totals)")
        let html = try Curl.fetch("\(base)/report.html", proxy: nil).bodyText
        #expect(html.contains("<span class=\"n\">2</span><span class=\"l\">ignored (not judged)</span>"), "\(html)")

        guard withReport else { return }
        // The report written on SIGUSR1 (as at exit) says the same.
        let written = try HostFilterEndToEndTests.report(stack, directory: reportDirectory.path)
        let writtenTotals = try #require(written["totals"] as? [String: Any])
        #expect(writtenTotals["ignoredConnections"] as? Int == totals["ignoredConnections"] as? Int)
        #expect(writtenTotals["ignoredHosts"] as? Int == totals["ignoredHosts"] as? Int)
    }
}
