import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSDiagnose
@testable import ATSTLS

/// Tests for: ats-proxy diagnose: nscurl's format against loopback servers.
@Suite("ats-proxy diagnose: nscurl's format against loopback servers")
struct DiagnoseTests {
    static let fixedUUID = UUID(uuidString: "1C1C4F6F-771B-4349-9122-0F42AFFC0021")!

    static func run(
        _ server: TestServer, verbose: Bool = false, appPolicy: PolicyContext? = nil
    ) -> DiagnosticsReport {
        let options = EvaluationOptions(platform: Platform(parsing: "ios:18.0")!)
        let diagnostics = ATSDiagnostics(
            checker: UpstreamChecker(client: TestPKI.client()), options: options,
            contextFor: {
                ConsoleContext(
                    processName: "nscurl", pid: 100, threadID: 200, date: Date(timeIntervalSince1970: 0),
                    timeZone: TimeZone(identifier: "UTC")!, taskUUID: fixedUUID, taskNumber: $0)
            })
        let target = RequestTarget(scheme: .https, host: TestPKI.host, port: Int(server.port), url: "https://ats.test/")
        return diagnostics.run(target, verbose: verbose, appPolicy: appPolicy, transport: server.transport)
    }

    static func rows(_ results: [String]) -> String {
        let names = DiagnosticsRow.nscurlRows(host: TestPKI.host)
        var text = ""
        var section: String?
        for (index, row) in names.enumerated() {
            if row.section != section {
                if section != nil { text += String(repeating: "=", count: 80) + "\n" }
                text += "\n\(row.section)\n" + (index > 0 ? "\n" : "")
                section = row.section
            }
            text += "---\n\(row.name)\nResult : \(results[index])\n---\n\n"
        }
        return text + String(repeating: "=", count: 80) + "\n"
    }

    static let header = """
        Starting ATS Diagnostics

        Configuring ATS Info.plist keys and displaying the result of HTTPS loads to https://ats.test/.
        A test will "PASS" if URLSession:task:didCompleteWithError: returns a nil error.
        Use '--verbose' to view the ATS dictionaries used and to display the error received in URLSession:task:didCompleteWithError:.
        ================================================================================

        """

    @Test func compliantServerPassesEveryRowButNothingElse() throws {
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls12)))
        defer { server.stop() }
        let report = Self.run(server)
        let expected =
            Self.header
            + Self.rows([
                "PASS", "PASS", "PASS", "PASS", "PASS", "PASS", "PASS", "PASS", "PASS", "PASS", "PASS", "PASS", "PASS",
                "PASS", "PASS", "PASS",
            ])
        #expect(report.text == expected)
        #expect(report.defaultPassed)
    }

    @Test func tls10OnlyServerGolden() throws {
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls10, maximum: .tls10)))
        defer { server.stop() }
        let report = Self.run(server)
        let results = [
            "FAIL", "PASS", "FAIL", "FAIL", "FAIL", "PASS", "FAIL", "FAIL", "FAIL", "FAIL", "FAIL", "PASS", "FAIL",
            "FAIL",
            "FAIL", "PASS",
        ]
        let reasons = """

            Why each FAIL failed (ats-proxy):
            ATS Default Connection: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3); the server accepts TLS 1.0
            TLSv1.3: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.3); the server accepts TLS 1.0
            TLSv1.2: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3); the server accepts TLS 1.0
            TLSv1.1: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.1–TLS 1.3); the server accepts TLS 1.0
            Disabling Perfect Forward Secrecy: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3); the server accepts TLS 1.0
            Disabling Perfect Forward Secrecy and Allowing Insecure HTTP: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3); the server accepts TLS 1.0
            TLSv1.3 with PFS disabled: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.3); the server accepts TLS 1.0
            TLSv1.2 with PFS disabled: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3); the server accepts TLS 1.0
            TLSv1.1 with PFS disabled: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.1–TLS 1.3); the server accepts TLS 1.0
            TLSv1.3 with PFS disabled and insecure HTTP allowed: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.3); the server accepts TLS 1.0
            TLSv1.2 with PFS disabled and insecure HTTP allowed: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3); the server accepts TLS 1.0
            TLSv1.1 with PFS disabled and insecure HTTP allowed: -1200 [3:-9836]: the server accepts none of the TLS versions this host allows (TLS 1.1–TLS 1.3); the server accepts TLS 1.0

            """
        #expect(report.text == Self.header + Self.rows(results) + reasons)
        #expect(!report.defaultPassed)
    }

    @Test func verboseStaticRSAServerWithAppPolicyGolden() throws {
        let server = try TestServer(.tls(Fixture.staticRSAOnly.makeContext()))
        defer { server.stop() }
        let report = Self.run(server, verbose: true, appPolicy: Policies.standard)
        let lines = report.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(!lines.contains { $0.hasPrefix("Use '--verbose'") })
        let defaultRow = """
            ---
            ATS Default Connection
            ATS Dictionary:
            {
            }
            Result : FAIL
            Error : Error Domain=NSURLErrorDomain Code=-1200 "A TLS error caused the secure connection to fail." UserInfo={NSLocalizedDescription=A TLS error caused the secure connection to fail., NSLocalizedRecoverySuggestion=Would you like to connect to the server anyway?, _kCFStreamErrorDomainKey=3, _kCFStreamErrorCodeKey=-9824, NSErrorFailingURLStringKey=https://ats.test/, NSErrorFailingURLKey=https://ats.test/, _NSURLErrorRelatedURLSessionTaskErrorKey=(
                "LocalDataTask <1C1C4F6F-771B-4349-9122-0F42AFFC0021>.<1>"
            ), _NSURLErrorFailingURLSessionTaskErrorKey=LocalDataTask <1C1C4F6F-771B-4349-9122-0F42AFFC0021>.<1>, NSUnderlyingError=0x6000affc0020 {Error Domain=kCFErrorDomainCFNetwork Code=-1200 "(null)" UserInfo={_kCFNetworkCFStreamSSLErrorOriginalValue=-9824, _kCFStreamErrorDomainKey=3, _kCFStreamErrorCodeKey=-9824}}}
            ---
            """
        #expect(report.text.contains(defaultRow))
        let pfsRow = """
            ---
            Disabling Perfect Forward Secrecy and Allowing Insecure HTTP
            ATS Dictionary:
            {
                NSExceptionDomains =     {
                    "ats.test" =         {
                        NSExceptionAllowsInsecureHTTPLoads = true;
                        NSExceptionRequiresForwardSecrecy = false;
                    };
                };
            }
            Result : PASS
            ---
            """
        #expect(report.text.contains(pfsRow))
        let tail = """
            App policy (iOS 18.0) for https://ats.test/:
            Result : FAIL -1200 [3:-9824]: the server accepts none of the cipher suites this host allows (handshake_failure); this server offers only RSA key exchange at TLS 1.2 (it chose TLS_RSA_WITH_AES_128_GCM_SHA256 and refused every ECDHE suite)
            Smallest change: add NSExceptionDomains → ats.test with NSExceptionRequiresForwardSecrecy = NO

            """
        #expect(report.text.hasSuffix(tail))
        #expect(
            report.results.map { $0.verdict.isBlocked } == [
                true, false, true, true, true, true, false, false, true, false, false, false, true, false, false, false,
            ])
    }
}
