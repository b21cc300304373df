import ATSTestSupport
import Foundation
import Testing

/// `ats-proxy exec` running real scripts that make allowed and blocked requests with curl.
@Suite(.serialized) struct ExecTests {
    /// The e2e fixture origin (`Fixtures/origin.py`, plain HTTP) on a free loopback port; it is
    /// the direct child, killed by PID on release, and exits by itself after 120 s regardless.
    final class Origin {
        let directory: TemporaryDirectory
        let child: Child
        let port: Int

        init() throws {
            directory = try TemporaryDirectory("exec-origin")
            port = try E2E.freePort()
            child = try Child(
                executable: "/usr/bin/env",
                arguments: [
                    "python3", E2E.fixture("origin.py"), "--name", "exec", "--log", directory.file("requests.log"),
                    "--port", "\(port)", "--lifetime", "120",
                ],
                directory: directory, label: "origin")
            _ = E2E.poll(timeout: 10) { () -> Bool? in
                let probe = try? E2E.run(
                    "/usr/bin/curl", ["-s", "-o", "/dev/null", "--noproxy", "*", "http://127.0.0.1:\(port)/hello"],
                    timeout: 5)
                return probe?.status == 0 ? true : nil
            }
        }

        deinit { child.stop() }
    }

    static func script(_ body: String) throws -> String {
        try CLITests.temporaryFile("script.sh", Data("#!/bin/sh\n\(body)\n".utf8)).withExecutableBit()
    }

    /// Runs `ats-proxy exec` with a private CA directory; stdout/stderr captured in files.
    static func exec(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let caDirectory = try TemporaryDirectory("exec-ca")
        let result = try E2E.run(
            CLITests.binary.path, ["exec", "--ca-dir", caDirectory.path, "--diagnostics", "0"] + arguments, timeout: 60)
        #expect(!result.timedOut, "ats-proxy exec did not finish")
        return (result.status, result.stdoutText, result.stderrText)
    }

    /// The command gets ATS_PROXY_CA_CERT (for ATSProxyTesting); an ats-proxy it runs must not read it as its
    /// own `--ca-cert` (which needs `--ca-key`: exit 2 before the fix).
    @Test func anAtsProxyTheCommandRunsIgnoresTheExportedCACertificate() throws {
        let script = try Self.script(
            """
            [ -n "$ATS_PROXY_CA_CERT" ] && echo exported
            "\(CLITests.binary.path)" settings show > /dev/null 2> "${TMPDIR:-/tmp}/ats-proxy-nested-$$.err"
            echo "nested=$?"
            cat "${TMPDIR:-/tmp}/ats-proxy-nested-$$.err" >&2
            rm -f "${TMPDIR:-/tmp}/ats-proxy-nested-$$.err"
            """)
        let result = try Self.exec(["--", script])
        #expect(result.stdout.contains("exported"))
        #expect(result.stdout.contains("nested=0"), "\(result.stdout) \(result.stderr)")
    }

    @Test func violationsTurnASuccessfulCommandInto3() throws {
        let origin = try Origin()
        let script = try Self.script(
            """
            echo "proxy=$HTTPS_PROXY noproxy=${NO_PROXY:-unset}"
            grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"
            [ "$CURL_CA_BUNDLE" = "$SSL_CERT_FILE" ] && [ "$NODE_EXTRA_CA_CERTS" = "$SSL_CERT_FILE" ] && echo same-bundle
            grep -q "$(sed -n 2p "$ATS_PROXY_CA_CERT")" "$SSL_CERT_FILE" && echo has-proxy-ca
            curl -s -o /dev/null -w "allowed %{http_code}\\n" http://localhost:\(origin.port)/hello
            curl -s -o /dev/null -w "blocked %{http_code}\\n" http://example.com/
            """)
        let result = try Self.exec(["--", script])
        #expect(result.status == 3, "\(result.stderr)")
        #expect(result.stdout.contains("proxy=http://127.0.0.1:"))
        #expect(result.stdout.contains("noproxy=unset"))
        #expect(result.stdout.contains("same-bundle"))
        #expect(result.stdout.contains("has-proxy-ca"))
        #expect(result.stdout.contains("allowed 200"))
        #expect(result.stdout.contains("blocked 403"))
        #expect(result.stderr.contains("2 requests, 1 ATS violation"))
        let bundleCount = Int(result.stdout.split(separator: "\n").first { Int($0) != nil } ?? "0") ?? 0
        #expect(bundleCount > 1, "the bundle holds the system roots as well as the proxy CA")
    }

    @Test func allowViolationsKeepsTheCommandsStatus() throws {
        let script = try Self.script("curl -s -o /dev/null http://example.com/")
        #expect(try Self.exec(["--allow-violations", "--", script]).status == 0)
    }

    @Test func cleanRunKeepsZeroAndFailuresKeepTheirStatus() throws {
        let origin = try Origin()
        let clean = try Self.script("curl -sf -o /dev/null http://localhost:\(origin.port)/hello")
        #expect(try Self.exec(["--", clean]).status == 0)
        let failing = try Self.script("exit 7")
        #expect(try Self.exec(["--", failing]).status == 7)
    }

    @Test func reportIsWrittenWhenTheCommandEnds() throws {
        let reportDirectory = try TemporaryDirectory("exec-report")
        let script = try Self.script("curl -s -o /dev/null http://example.com/")
        let result = try Self.exec(["--report", reportDirectory.path, "--", script])
        #expect(result.status == 3)
        for name in ["report.json", "report.html", "junit.xml"] {
            #expect(FileManager.default.fileExists(atPath: reportDirectory.file(name)), "\(name) missing")
        }
        let json = try #require(FileManager.default.contents(atPath: reportDirectory.file("report.json")))
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("example.com"))
        #expect(text.contains("NSExceptionAllowsInsecureHTTPLoads"))
    }

    @Test func unwritableReportDirectoryFailsAtStart() throws {
        let result = try Self.exec(["--report", "/proc/ats-proxy-nope", "--", "/bin/true"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("/proc/ats-proxy-nope"))
    }

    @Test func aCommandThatCannotStartIs127() throws {
        let result = try Self.exec(["--", "/nonexistent/command"])
        #expect(result.status == 127)
        #expect(result.stderr.contains("cannot start '/nonexistent/command'"))
    }
}

extension String {
    /// Makes the file at this path executable and returns the path.
    func withExecutableBit() throws -> String {
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: self)
        return self
    }
}
