import ATSTestSupport
import Foundation
import Testing

/// Host filters with real clients: ignored hosts reach their origin untouched (the origin's own
/// certificate, no verdict, no log line) and appear in the report as a count only.
@Suite struct HostFilterEndToEndTests {
    /// Writes the report now (SIGUSR1) and reads report.json.
    static func report(_ stack: ProxyStack, directory: String) throws -> [String: Any] {
        let path = directory + "/report.json"
        try? FileManager.default.removeItem(atPath: path)
        stack.proxy.child.signal(SIGUSR1)
        let data = try #require(E2E.poll(timeout: 10) { FileManager.default.contents(atPath: path) })
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func hosts(_ report: [String: Any]) -> [String] {
        (report["hosts"] as? [[String: Any]] ?? []).compactMap { $0["host"] as? String }
    }

    @Test func ignoredHostsAreTunnelledAndForwardedUntouchedAndOnlyCounted() throws {
        let reportDirectory = try TemporaryDirectory("filter-report")
        let stack = try ProxyStack(arguments: [
            "--ignore-hosts", #"^api\.example\.test:"#, "--ignore-hosts", #"^plain\.example\.test:"#,
            "--report", reportDirectory.path,
        ])
        // HTTPS: the client sees the origin's own certificate (trusting only the origin's CA).
        let tls = try Curl.fetch("\(stack.api)/hello", proxy: stack.proxy, cacert: stack.pki.caPath)
        #expect(tls.httpCode == 200, "\(tls.stderr)")
        #expect(tls.bodyText == "hello from tls-origin\n")
        #expect(tls.headers["x-ats-error"] == nil)
        // Plain HTTP that ATS would block goes through untouched.
        let plain = try stack.curl("\(stack.plain)/hello")
        #expect(plain.httpCode == 200)
        #expect(plain.bodyText == "hello from plain-origin\n")
        #expect(stack.plainOrigin.requests.count == 1)
        // A judged request, for contrast.
        #expect(try stack.curl("\(stack.legacy)/hello").httpCode == 200)
        let log = stack.proxy.waitForLog("ats-proxy: GET \(stack.legacy)/hello")
        #expect(!log.contains("api.example.test"), "\(log)")
        #expect(!log.contains("plain.example.test"), "\(log)")

        let report = try Self.report(stack, directory: reportDirectory.path)
        #expect(Self.hosts(report) == ["legacy.example.test"])
        let totals = try #require(report["totals"] as? [String: Any])
        #expect(totals["requests"] as? Int == 1)
        #expect(totals["ignoredConnections"] as? Int == 2)
        #expect(totals["ignoredHosts"] as? Int == 2)
    }

    @Test func allowHostsJudgesOnlyTheListedHosts() throws {
        let reportDirectory = try TemporaryDirectory("allow-report")
        let stack = try ProxyStack(arguments: [
            "--allow-hosts", #"^legacy\.example\.test:"#, "--report", reportDirectory.path,
        ])
        let tls = try Curl.fetch("\(stack.api)/hello", proxy: stack.proxy, cacert: stack.pki.caPath)
        #expect(tls.httpCode == 200, "\(tls.stderr)")
        #expect(try stack.curl("\(stack.legacy)/hello").httpCode == 200)
        stack.proxy.waitForLog("ats-proxy: GET \(stack.legacy)/hello")
        let report = try Self.report(stack, directory: reportDirectory.path)
        #expect(Self.hosts(report) == ["legacy.example.test"])
        #expect((report["totals"] as? [String: Any])?["ignoredConnections"] as? Int == 1)
    }

    @Test func badOrConflictingFiltersAreUsageErrors() throws {
        let directory = try TemporaryDirectory("filter-usage")
        let environment = Invocation.environment(home: directory.path)
        let bad = try Invocation.run(
            ["run", "--ignore-hosts", "(unclosed"], in: directory.path, environment: environment, timeout: 10)
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--ignore-hosts: '(unclosed' is not a valid regular expression"), "\(bad.stderr)")
        let both = try Invocation.run(
            ["run", "--ignore-hosts", "a", "--allow-hosts", "b"], in: directory.path, environment: environment,
            timeout: 10)
        #expect(both.status == 2)
        #expect(both.stderr.contains("--ignore-hosts and --allow-hosts exclude each other"), "\(both.stderr)")
    }
}
