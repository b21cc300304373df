import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// A client that refuses the proxy's certificate is a set-up failure, counted and reported as such in every
/// output: the running totals (exec's exit status), report.json, junit.xml and the log line. Regression
/// for `SessionStats.isTLSOrPolicyFailure(nil)` counting it as an ATS violation.
@Suite struct ClientUntrustedCATests {
    typealias F = ReportFixtures

    static let refused = F.record(
        "https://api.example.com:443/", .clientUntrustedCA, atsRequired: false, status: nil
    ).updating {
        $0.method = "CONNECT"
        $0.rule =
            "the client rejected the TLS handshake with the proxy (peer sent fatal alert 48 (unknown_ca)); install and fully trust the ats-proxy CA on the client"
        $0.fix = "trust the proxy's CA (ats-proxy ca export) on the device or simulator"
    }

    @Test func statsCountItApartFromViolations() {
        let stats = SessionStats()
        stats.record(Self.refused)
        stats.record(F.record("http://example.com/", .blockedCleartext, error: -1022))
        let snapshot = stats.snapshot
        #expect(snapshot.clientUntrustedCA == 1)
        #expect(snapshot.violations == 1, "only the -1022 is an ATS violation")
        #expect(snapshot.blocked == 1)
        #expect(snapshot.line.hasSuffix("violations 1  untrusted-CA 1"))
    }

    @Test func aFailureWithoutACodeIsNotAViolation() {
        #expect(!SessionStats.isTLSOrPolicyFailure(nil))
        #expect(SessionStats.isTLSOrPolicyFailure(-1022))
        #expect(SessionStats.isTLSOrPolicyFailure(-1200))
        #expect(!SessionStats.isTLSOrPolicyFailure(-1004))
        let stats = SessionStats()
        stats.record(F.record("https://gone.example.com/", .failed, error: nil))
        #expect(stats.snapshot.violations == 0)
    }

    @Test func reportJSONWithARefusedCAValidatesAgainstTheSchema() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("untrusted-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let reportPath = directory.appendingPathComponent("report.json").path
        try F.report([Self.refused]).jsonData().write(to: URL(fileURLWithPath: reportPath))
        let result = try F.checkReportJSON(
            at: reportPath,
            """
            errors = list(validator.iter_errors(document))
            for error in errors: print("/".join(str(p) for p in error.path), error.message)
            sys.exit(1 if errors else 0)
            """)
        #expect(!result.timedOut)
        #expect(result.status == 0, "\(result.output)")
    }

    @Test func reportJSONAndJUnitClassifyItTheSameWay() throws {
        let report = F.report([Self.refused])
        let document = report.document()
        #expect(document.totals.violations == 0)
        #expect(document.totals.clientUntrustedCA == 1)
        let host = try #require(document.hosts.first)
        #expect(host.status == .clientUntrustedCA)
        #expect(host.verdicts.first?.kind == .clientUntrustedCA)
        let json = String(decoding: try report.jsonData(), as: UTF8.self)
        #expect(json.contains("\"status\" : \"client-untrusted-ca\""))
        #expect(json.contains("\"clientUntrustedCA\" : 1"))
        let junit = report.junitXML()
        #expect(junit.contains(#"failures="0" errors="1""#))
        #expect(junit.contains(#"type="ClientUntrustedCA""#))
        #expect(junit.contains("the client does not trust the proxy CA: the client rejected the TLS handshake"))
        #expect(report.html().contains("client does not trust the proxy CA"))
    }

    @Test func theLogLineNamesItWithoutAQuestionMarkCode() {
        var formatter = DiagnosticsFormatter(level: .summary)
        let line = formatter.text(Self.refused).last ?? ""
        #expect(
            line.hasPrefix(
                "ats-proxy: CONNECT https://api.example.com:443/ → failed (the client does not trust the proxy CA): the client rejected"
            ), "\(line)")
        #expect(!line.contains("?"), "no unknown error code: \(line)")
        #expect(formatter.jsonLine(Self.refused).contains("\"result\":\"client-untrusted-ca\""))
    }

    @Test func aViolationStillOutranksIt() {
        #expect(HostStatus.violation > .clientUntrustedCA)
        #expect(HostStatus.clientUntrustedCA > .trustFailure)
    }
}
