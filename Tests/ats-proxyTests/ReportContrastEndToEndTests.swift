import ATSTestSupport
import Foundation
import Testing

/// report.html is read on screens and printed: every piece of its text, in the light and the dark colour scheme,
/// meets WCAG's contrast minimum (4.5:1, 3:1 for large text) in headless Chromium (`Fixtures/contrast.py`), for
/// a session with an allowed, an allowed-by-exception, a blocked and a failed host (so every badge colour shows).
@Suite(.serialized) struct ReportContrastEndToEndTests {
    @Test(.timeLimit(.minutes(4))) func reportHTMLMeetsTheContrastMinimum() throws {
        let chromium = try #require(
            LiveViewEndToEndTests.chromium, "chromium is not installed; run scripts/bootstrap test")
        let directory = try TemporaryDirectory("contrast")
        let refusedPort = try E2E.freePort()
        let stack = try ProxyStack(arguments: [
            "--report", directory.path, "--resolve", "refused.example.test:\(refusedPort):127.0.0.1",
        ])
        #expect(try stack.curl("\(stack.api)/hello").httpCode == 200)
        #expect(try stack.curl("\(stack.legacy)/hello").httpCode == 200)
        #expect(try stack.curl("\(stack.plain)/hello").httpCode == 403)
        _ = try stack.curl("https://refused.example.test:\(refusedPort)/")
        _ = try ChallengeRunEndToEndTests.stop(stack)
        let page = directory.file("report.html")
        try #require(FileManager.default.fileExists(atPath: page), "no report.html")

        let result = try E2E.run(
            "/usr/bin/python3",
            [
                E2E.fixture("contrast.py"), "--chromium", chromium, "--url", "file://\(page)", "--profile",
                directory.file("profile"),
            ], timeout: 90)
        let line = try #require(
            result.stdoutText.split(separator: "\n").first { $0.hasPrefix("RESULT ") },
            "\(result.stdoutText) \(result.stderrText)")
        let found = try #require(
            try JSONSerialization.jsonObject(with: Data(line.dropFirst(7).utf8)) as? [String: Any])
        #expect((found["checked"] as? Int ?? 0) > 50, "\(found)")
        let failures = found["failures"] as? [[String: Any]] ?? []
        #expect(failures.isEmpty, "text below the contrast minimum: \(failures)")
    }
}
