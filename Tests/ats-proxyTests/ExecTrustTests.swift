import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// `ats-proxy exec` with real clients that trust only what the system offers them: URLSession on Linux
/// (FoundationNetworking's libcurl reads only the system bundle) through the ATSProxyTesting library and
/// bare, and curl with its default bundle. The private mount namespace shows them the proxy CA; without
/// it the client refuses the proxy's certificate, which exec reports as a set-up failure (status 4).
@Suite(.serialized) struct ExecTrustTests {
    static let client = CLITests.binary.deletingLastPathComponent().appendingPathComponent(
        "ats-proxy-urlsession-client"
    ).path
    static let systemBundle = "/etc/ssl/certs/ca-certificates.crt"

    /// Two TLS origins signed by a test CA the proxy is told to trust: a modern one and a TLS 1.1 one.
    final class Origins {
        let directory: TemporaryDirectory
        let pki: TestPKI
        let modern: Origin
        let tls11: Origin

        init() throws {
            directory = try TemporaryDirectory("exec-trust")
            pki = try TestPKI(name: "exec-trust", directory: directory)
            modern = try Origin(
                name: "api", directory: directory, tls: try pki.leaf(["api.example.com"], file: "api"),
                tlsVersion: "1.2")
            tls11 = try Origin(
                name: "old", directory: directory, tls: try pki.leaf(["old.example.com"], file: "old"),
                tlsVersion: "1.1")
        }

        var proxyArguments: [String] {
            [
                "--upstream-ca", pki.caPath, "--resolve", "api.example.com:\(modern.port):127.0.0.1", "--resolve",
                "old.example.com:\(tls11.port):127.0.0.1",
            ]
        }
    }

    static func exec(_ arguments: [String], report: TemporaryDirectory? = nil) throws -> (
        status: Int32, stdout: String, stderr: String, log: String
    ) {
        let caDirectory = try TemporaryDirectory("exec-trust-ca")
        let log = caDirectory.file("proxy.log")
        var options = ["exec", "--ca-dir", caDirectory.path, "--log-file", log]
        if let report { options += ["--report", report.path] }
        let result = try E2E.run(CLITests.binary.path, options + arguments, timeout: 90)
        #expect(!result.timedOut, "ats-proxy exec did not finish")
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return (result.status, result.stdoutText, result.stderrText, text)
    }

    @Test func urlSessionThroughTheLibrarySeesTheDevicesErrors() throws {
        let origins = try Origins()
        let api = "https://api.example.com:\(origins.modern.port)/hello"
        let old = "https://old.example.com:\(origins.tls11.port)/"
        let result = try Self.exec(origins.proxyArguments + ["--", Self.client, api, "http://example.com/", old])
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(result.stdout)\n\(result.stderr)")
        #expect(lines.first?.hasPrefix("\(api) status 200 ") == true, "\(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix("http://example.com/ error -1022 stream -:- failing http://example.com/ rule ")
                    && $0.hasSuffix(
                        "description The resource could not be loaded because the App Transport Security policy requires the use of a secure connection."
                    ) && !$0.contains("rule -")
            }, "\(lines)")
        #expect(
            lines.contains { $0.hasPrefix("\(old) error -1200 stream 3:-9836 failing \(old) rule ") }, "\(lines)")
        #expect(result.status == 3, "two ATS violations in a passing command: \(result.stderr)")
        #expect(result.stderr.contains("3 requests, 2 ATS violations"))
        #expect(!result.stderr.contains("does not trust"))
    }

    @Test func bareURLSessionAndCurlTrustTheProxyThroughTheSystemBundlePath() throws {
        let origins = try Origins()
        let api = "https://api.example.com:\(origins.modern.port)/hello"
        let before = try E2E.sha256Hex(ofFile: Self.systemBundle)
        let outsideCount = try Self.certificateCount(Self.systemBundle)
        let script = try ExecTests.script(
            """
            echo "overlay=$ATS_PROXY_TRUST_OVERLAY"
            echo "inside=$(grep -c 'BEGIN CERTIFICATE' \(Self.systemBundle))"
            env -u SSL_CERT_FILE -u CURL_CA_BUNDLE curl -s -o /dev/null -w "curl-default %{http_code}\\n" \(api)
            curl -s -o /dev/null -w "curl-system-path %{http_code}\\n" --cacert \(Self.systemBundle) \(api)
            \(Self.client) --plain \(api)
            """)
        let result = try Self.exec(origins.proxyArguments + ["--", script])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("overlay=active"), "\(result.stdout)\n\(result.stderr)")
        #expect(
            result.stdout.contains("inside=\(outsideCount + 1)"), "the system path shows the roots plus the proxy CA")
        #expect(result.stdout.contains("curl-default 200"))
        #expect(result.stdout.contains("curl-system-path 200"))
        #expect(result.stdout.contains("\(api) status 200"), "bare URLSession trusts the proxy CA: \(result.stdout)")
        #expect(try E2E.sha256Hex(ofFile: Self.systemBundle) == before, "the machine's bundle is unchanged")
        let mounts = try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        #expect(!mounts.contains("ats-proxy-bundle"), "no mount leaked into the test's namespace")
    }

    /// Regression: the client refusing the proxy's certificate was counted as an ATS violation (exit 3)
    /// while report.json said 0 violations and junit.xml 1 error.
    @Test func aClientThatRefusesTheProxyCAIsASetUpFailureEverywhere() throws {
        let report = try TemporaryDirectory("exec-trust-report")
        let result = try Self.exec(
            ["--trust-overlay", "off", "--report", report.path, "--", Self.client, "https://localhost:1/"])
        #expect(result.status == 4, "\(result.stderr)")
        #expect(
            result.stdout.contains("https://localhost:1/ error -1 "),
            "libcurl refused the certificate: \(result.stdout)")
        #expect(
            result.stderr.contains(
                "ats-proxy: the client does not trust the proxy CA: 1 TLS handshake(s) refused (first: localhost); "),
            "\(result.stderr)")
        #expect(result.stderr.contains("1 request, 0 ATS violations, 1 host, 1 refused the proxy CA; exiting 4"))
        #expect(
            result.log.contains(
                "→ failed -1202 (the client does not trust the proxy CA): the client rejected the TLS handshake"),
            "\(result.log)")
        #expect(!result.log.contains("failed ?"), "no unknown code in the log: \(result.log)")

        let json = try #require(FileManager.default.contents(atPath: report.file("report.json")))
        let document = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        let totals = try #require(document["totals"] as? [String: Any])
        #expect(totals["violations"] as? Int == 0)
        #expect(totals["clientUntrustedCA"] as? Int == 1)
        let hosts = try #require(document["hosts"] as? [[String: Any]])
        #expect(hosts.first?["status"] as? String == "client-untrusted-ca")
        let junit = try String(contentsOfFile: report.file("junit.xml"), encoding: .utf8)
        #expect(junit.contains(#"failures="0" errors="1""#))
        #expect(junit.contains(#"type="ClientUntrustedCA""#))
    }

    @Test func anUnprivilegedUserGetsTheOverlayOrBeingToldWhatToRun() throws {
        let setpriv = "/usr/bin/setpriv"
        try #require(FileManager.default.isExecutableFile(atPath: setpriv), "util-linux setpriv is needed")
        let nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        let userNamespaces = try E2E.run(
            nobody[0], Array(nobody.dropFirst()) + ["/usr/bin/unshare", "-U", "-m", "--map-current-user", "/bin/true"],
            timeout: 30)
        let shared = try TemporaryDirectory("exec-trust-nobody")
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: shared.path)
        let script = try shared.write(
            "probe.sh",
            """
            #!/bin/sh
            echo "uid=$(id -u) overlay=$ATS_PROXY_TRUST_OVERLAY"
            env -u SSL_CERT_FILE -u CURL_CA_BUNDLE curl -s -o /dev/null -w "curl-default %{http_code}\\n" https://localhost:1/
            """)
        _ = try script.withExecutableBit()
        let result = try E2E.run(
            nobody[0],
            Array(nobody.dropFirst()) + [
                CLITests.binary.path, "exec", "--ca-dir", shared.file("ca"), "--diagnostics", "0", "--allow-violations",
                "--", script,
            ], timeout: 90)
        #expect(result.stdoutText.contains("uid=65534"), "\(result.stdoutText)\n\(result.stderrText)")
        if userNamespaces.status == 0 {
            #expect(result.stdoutText.contains("overlay=active"), "\(result.stderrText)")
            #expect(result.stdoutText.contains("curl-default 502"), "trusted, then the origin is refused")
            #expect(result.status == 0, "\(result.stderrText)")
        } else {
            #expect(result.stdoutText.contains("overlay=unavailable"))
            #expect(result.stderrText.contains("note: cannot show the proxy CA at"))
            #expect(result.stderrText.contains("sudo ats-proxy ca install --system"))
            #expect(result.status == 4, "curl refused the proxy's certificate")
        }
    }

    @Test func execHelpListsTheVariablesAndStatuses() throws {
        for arguments in [["exec", "--help"], ["help", "exec"]] {
            let result = try CLITests.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            for text in [
                "ATS_PROXY_URL", "ATS_PROXY_CA_CERT", "ATS_PROXY_CA_BUNDLE", "ATS_PROXY_TRUST_OVERLAY", "SSL_CERT_FILE",
                "4 if the client refused",
            ] {
                #expect(result.stdout.contains(text), "\(arguments) lacks \(text)")
            }
        }
    }

    static func certificateCount(_ path: String) throws -> Int {
        try String(contentsOfFile: path, encoding: .utf8).components(separatedBy: "BEGIN CERTIFICATE").count - 1
    }
}

extension ExecTrustTests {
    @Test func anOverlayThatCannotBeSetUpIsExplainedAndRequireFails() throws {
        let missing = "/nonexistent-ats-proxy/ca-bundle.pem"
        let script = try ExecTests.script("echo \"overlay=$ATS_PROXY_TRUST_OVERLAY\"")
        let auto = try Self.exec(["--diagnostics", "0", "--trust-overlay-path", missing, "--", script])
        #expect(auto.status == 0, "\(auto.stderr)")
        #expect(auto.stdout.contains("overlay=unavailable"))
        #expect(
            auto.stderr.contains(
                "note: cannot show the proxy CA at \(missing) to the command (bind-mounting "), "\(auto.stderr)")
        #expect(auto.stderr.contains("over \(missing): No such file or directory)"))
        if geteuid() == 0 {
            #expect(auto.stderr.contains("give the process CAP_SYS_ADMIN"))
            #expect(auto.stderr.contains("machine-wide: ats-proxy ca install --system --ca-dir "))
        } else {
            #expect(auto.stderr.contains("sudo ats-proxy ca install --system --ca-dir "))
            #expect(auto.stderr.contains("kernel.unprivileged_userns_clone=1"))
        }

        let required = try Self.exec([
            "--diagnostics", "0", "--trust-overlay-path", missing, "--trust-overlay", "require", "--", script,
        ])
        #expect(required.status == 2)
        #expect(!required.stdout.contains("overlay="), "the command did not run")
        #expect(required.stderr.contains("--trust-overlay require: the overlay cannot be set up"))
    }

    @Test func aChosenBundlePathShowsTheProxyCA() throws {
        let directory = try TemporaryDirectory("exec-trust-path")
        let own = try directory.write("app-roots.pem", "not a certificate\n")
        let script = try ExecTests.script(
            """
            echo "overlay=$ATS_PROXY_TRUST_OVERLAY"
            grep -c "BEGIN CERTIFICATE" \(own)
            """)
        let result = try Self.exec(["--diagnostics", "0", "--trust-overlay-path", own, "--", script])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("overlay=active"))
        let count = Int(result.stdout.split(separator: "\n").last ?? "") ?? 0
        #expect(count > 1, "the file shows the system roots and the proxy CA inside: \(result.stdout)")
        #expect(try String(contentsOfFile: own, encoding: .utf8) == "not a certificate\n", "unchanged outside")
    }
}
