import ATSPolicy
import ATSTestSupport
import Testing

@testable import ATSDiagnose
@testable import ATSTLS

/// `diagnose` shows the rows the nscurl of the emulated platform had: no TLSv1.3 rows before TLS 1.3.
@Suite struct DiagnoseRowsTests {
    @Test(arguments: [
        ("macos:10.12", 13), ("macos:10.14.3", 13), ("macos:10.14.4", 16), ("ios:12.1", 13), ("ios:18.0", 16),
    ])
    func rowsFollowTheEmulatedPlatform(platform: String, count: Int) throws {
        let rows = DiagnosticsRow.nscurlRows(host: "ats.test", platform: try #require(Platform(parsing: platform)))
        #expect(rows.count == count, "\(platform)")
        #expect(rows.contains { $0.name.contains("TLSv1.3") } == (count == 16), "\(platform)")
    }

    @Test func olderPlatformRunPrintsNoTLS13Row() throws {
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls12)))
        defer { server.stop() }
        let options = EvaluationOptions(platform: try #require(Platform(parsing: "macos:10.12")))
        let diagnostics = ATSDiagnostics(checker: UpstreamChecker(client: TestPKI.client()), options: options)
        let target = RequestTarget(scheme: .https, host: TestPKI.host, port: Int(server.port), url: "https://ats.test/")
        let report = diagnostics.run(target, verbose: false, appPolicy: nil, transport: server.transport)
        #expect(!report.text.contains("TLSv1.3"))
        #expect(report.text.components(separatedBy: "Result : ").count - 1 == 13)
    }
}
