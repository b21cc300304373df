import ATSSystemTools
import ATSTestSupport
import Foundation
import Testing

/// Exit statuses and summaries a CI can use: a run driven only by a settings file, its summary at
/// exit, `--fail-on-violations`, the lint line at start, and explain's 0/1/2.
@Suite struct ExitStatusTests {
    /// The proxy started with `arguments` in `directory`, stopped with SIGINT after `traffic`.
    static func runProxy(
        _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String], port: Int,
        traffic: () throws -> Void
    ) throws -> (status: Int32, stderr: String) {
        let stderrPath = directory.file("proxy-\(UUID().uuidString.prefix(6)).err")
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let process = try ChildProcess(
            executable: CLITests.binary.path, arguments: arguments, environment: environment,
            currentDirectory: directory.path, standardOutput: .null, standardError: .file(stderrPath))
        defer { process.send(SIGKILL) }
        let stderr = { String(decoding: FileManager.default.contents(atPath: stderrPath) ?? Data(), as: UTF8.self) }
        let started = E2E.poll(timeout: 15) { () -> Bool? in
            if !process.isRunning { return false }
            return stderr().contains("listening on 127.0.0.1:\(port)") ? true : nil
        }
        guard started == true else { throw E2E.Failure("the proxy did not start: \(stderr())") }
        try traffic()
        process.send(SIGINT)
        let exited = E2E.poll(timeout: 20) { process.isRunning ? nil : true } ?? false
        guard exited else { throw E2E.Failure("the proxy did not stop: \(stderr())") }
        return (process.terminationStatus, stderr())
    }

    @Test func settingsFileDrivesARunAndViolationsFailItWithASummary() throws {
        let directory = try TemporaryDirectory("exit-run")
        let port = try E2E.freePort()
        // NSAllowsArbitraryLoads as a string: a lint error, and ATS stays on.
        _ = try directory.write(
            "Info.plist", infoPlist("<key>NSAllowsArbitraryLoads</key><string>YES</string>", executable: "ExitApp"))
        _ = try directory.write(
            "ats-proxy.yaml",
            """
            config: Info.plist
            listen: [127.0.0.1:\(port)]
            ca-dir: ca
            loops: 1
            quiet: true
            fail-on-violations: true
            """)
        let environment = Invocation.environment(home: directory.path)
        var response: CurlResult?
        let failing = try Self.runProxy([], in: directory, environment: environment, port: port) {
            response = try CLITests.curlThrough(port: port, url: "http://blocked.example.test/", directory: directory)
        }
        let blocked = try #require(response)
        #expect(blocked.httpCode == 403)
        #expect(blocked.headers["x-ats-fix"]?.contains("NSExceptionAllowsInsecureHTTPLoads = YES") == true)
        #expect(failing.status == 3, "\(failing.stderr)")
        let lines = failing.stderr.split(separator: "\n").map(String.init)
        #expect(
            lines.contains { $0.hasPrefix("  lint: 1 error in this Info.plist's ATS keys; 'ats-proxy lint --config ") })
        #expect(
            lines.contains("  new CA created just now: install and trust it on each device (onboarding page below)"))
        #expect(lines.contains("  CA certificate: \(directory.file("ca/ats-proxy-ca.pem"))"))
        #expect(lines.contains { $0.contains("→ blocked -1022: ") && $0.contains("; fix: ") }, "\(failing.stderr)")
        #expect(lines.contains("ats-proxy: 1 request, 1 host, 1 blocked or failed, 1 ATS violation"))
        #expect(lines.contains { $0.hasPrefix("  1 × ") })
        #expect(lines.contains { $0.hasPrefix("  no report written (add --report DIR") })
        #expect(lines.last == "ats-proxy: exiting 3: ATS violations were seen (--fail-on-violations)")

        // The environment turns the file's flag off; a flag adds a report: exit 0, and the summary says where.
        let passing = try Self.runProxy(
            ["--report", "out"], in: directory,
            environment: Invocation.environment(home: directory.path, ["ATS_PROXY_FAIL_ON_VIOLATIONS": "false"]),
            port: port
        ) {
            _ = try CLITests.curlThrough(port: port, url: "http://blocked.example.test/", directory: directory)
        }
        #expect(passing.status == 0, "\(passing.stderr)")
        #expect(!passing.stderr.contains("new CA created"))
        #expect(passing.stderr.contains("  report: out (report.html, report.json, junit.xml)"))
        #expect(FileManager.default.fileExists(atPath: directory.file("out/report.json")))
    }

    @Test func explainExitsOneWhenAnyURLIsBlocked() throws {
        #expect(try CLITests.run(["explain", "https://example.com/"]).status == 0)
        #expect(try CLITests.run(["explain", "https://example.com/", "http://example.com/"]).status == 1)
        #expect(try CLITests.run(["explain", "--format", "json", "http://example.com/"]).status == 1)
        #expect(try CLITests.run(["explain", "--config", "/nonexistent.plist", "http://example.com/"]).status == 2)
        #expect(try CLITests.run(["explain", "--help"]).stdout.contains("Exit status: 0 when every URL is allowed"))
    }
}

extension CLITests {
    /// curl through the proxy on `port` (no CA: http:// URLs only).
    static func curlThrough(port: Int, url: String, directory: TemporaryDirectory) throws -> CurlResult {
        let headersPath = directory.file("headers-\(UUID().uuidString.prefix(6))")
        let bodyPath = directory.file("body-\(UUID().uuidString.prefix(6))")
        let result = try E2E.run(
            "/usr/bin/curl",
            [
                "-s", "-D", headersPath, "-o", bodyPath, "-w", "%{http_code}", "--max-time", "15", "-x",
                "http://127.0.0.1:\(port)", url,
            ], timeout: 20)
        let headerText = String(decoding: FileManager.default.contents(atPath: headersPath) ?? Data(), as: UTF8.self)
        var headers: [String: String] = [:]
        for line in headerText.components(separatedBy: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let body = FileManager.default.contents(atPath: bodyPath) ?? Data()
        return CurlResult(
            exitCode: result.status, httpCode: Int(result.stdoutText.prefix(3)) ?? 0, headers: headers,
            statusLine: headerText.components(separatedBy: "\r\n").first ?? "", body: body, bodyPath: bodyPath,
            stderr: result.stderrText, writeOut: result.stdoutText)
    }
}
