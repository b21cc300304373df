import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// End-to-end regressions of the hardening review (issue 17) against the built binary: exchanges cut after
/// the response head are recorded (exchange timeout, end of the grace period), the proxy is found behind every
/// spelling of its address, host names that are no DNS names are refused, and a request inside a tunnel that
/// names another authority gets 421 without reaching the origin.
@Suite(.serialized) struct ProxyEndToEndHardeningTests {
    /// The JSON records in `log` whose URL ends with `suffix`.
    static func records(_ log: String, urlSuffix suffix: String) -> [[String: Any]] {
        log.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { ($0["url"] as? String)?.hasSuffix(suffix) == true }
    }

    @Test func anExchangeCutAtTheExchangeTimeoutAfterTheHeadIsRecorded() throws {
        let stack = try ProxyStack(arguments: ["--exchange-timeout", "1", "--log-format", "json"])
        let result = try stack.curl("\(stack.api)/stall-after-head?hold=8", timeout: 10)
        // The client sees the head and 10 bytes, then the connection ends short of the 1000 announced.
        #expect(result.httpCode == 200)
        #expect(result.exitCode != 0, "\(result.stderr)")
        let log = stack.proxy.waitForLog("stall-after-head")
        let records = Self.records(log, urlSuffix: "/stall-after-head?hold=8")
        #expect(records.count == 1, "\(log)")
        let record = try #require(records.first)
        #expect(record["result"] as? String == "failed")
        #expect(record["status"] as? Int == 200)
        #expect(record["errorCode"] as? Int == -1001)
        #expect((record["rule"] as? String)?.contains("after the response head") == true, "\(record)")
    }

    @Test func anExchangeCutByTheEndOfTheGracePeriodIsRecordedInTheLogAndTheReport() throws {
        let report = try TemporaryDirectory("report")
        let stack = try ProxyStack(
            arguments: ["--grace-period", "1", "--log-format", "json", "--report", report.file("out")])
        let download = try Child(
            executable: "/usr/bin/curl",
            arguments: [
                "-s", "-S", "--http1.1", "--max-time", "20", "-x", "http://\(stack.proxy.address)", "--cacert",
                stack.proxy.caPath, "-o", "/dev/null", "\(stack.api)/stall-after-head?hold=15",
            ], directory: stack.directory, label: "stalled-curl")
        defer { download.stop() }
        let arrived = E2E.poll(timeout: 10) { () -> Bool? in
            stack.tlsOrigin.requests.contains { $0.hasPrefix("GET /stall-after-head") } ? true : nil
        }
        #expect(arrived == true)
        Thread.sleep(forTimeInterval: 0.3)
        stack.proxy.child.signal(SIGTERM)
        #expect(stack.proxy.child.wait(timeout: 8), "the proxy did not exit after the grace period")
        #expect(stack.proxy.child.process.terminationStatus == 0)
        let records = Self.records(stack.proxy.log, urlSuffix: "/stall-after-head?hold=15")
        #expect(records.count == 1, "\(stack.proxy.log)")
        #expect(records.first?["result"] as? String == "failed")
        #expect((records.first?["rule"] as? String)?.contains("grace period") == true, "\(records)")
        let json = String(
            decoding: FileManager.default.contents(atPath: report.file("out/report.json")) ?? Data(), as: UTF8.self)
        #expect(json.contains("stall-after-head"), "report: \(json.prefix(400))")
    }

    @Test func everySpellingOfTheProxysOwnAddressIsALoop() throws {
        let stack = try ProxyStack()
        for host in ["127.1", "0177.0.0.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]"] {
            let client = try RawClient(port: stack.proxy.port)
            client.send("CONNECT \(host):\(stack.proxy.port) HTTP/1.1\r\nHost: \(host):\(stack.proxy.port)\r\n\r\n")
            let answer = client.readResponse()
            #expect(answer?.head.hasPrefix("HTTP/1.1 508") == true, "\(host): \(answer?.head ?? "closed")")
        }
        #expect(stack.proxy.isRunning)
    }

    @Test func aHostThatIsNoDNSNameIsRefusedBeforeAnyLeaf() throws {
        let stack = try ProxyStack()
        let client = try RawClient(port: stack.proxy.port)
        client.send("CONNECT ex%61mple.test:443 HTTP/1.1\r\nHost: ex%61mple.test:443\r\n\r\n")
        let answer = client.readResponse()
        #expect(answer?.head.hasPrefix("HTTP/1.1 400") == true, "\(answer?.head ?? "closed")")
    }

    @Test func aRequestNamingAnotherAuthorityInsideTheTunnelGets421AndNeverReachesTheOrigin() throws {
        let stack = try ProxyStack(arguments: ["--log-format", "json"])
        let result = try stack.curl("\(stack.api)/hello", ["-H", "Host: b.example.test:\(stack.tlsOrigin.port)"])
        #expect(result.httpCode == 421, "\(result.stderr)")
        #expect(!stack.tlsOrigin.requests.contains { $0.hasPrefix("GET /hello") })
        let log = stack.proxy.waitForLog("\"status\":421")
        #expect(Self.records(log, urlSuffix: "/hello").first?["status"] as? Int == 421, "\(log)")
        // The same origin in the Host field is served as before.
        #expect(try stack.curl("\(stack.api)/hello").httpCode == 200)
    }
}
