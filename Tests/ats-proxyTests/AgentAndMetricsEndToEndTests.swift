import ATSTestSupport
import Foundation
import Synchronization
import Testing

/// A scripted MCP client: `ats-proxy mcp` as a child with pipes on stdin and stdout, spoken to in
/// newline-delimited JSON-RPC as an agent does (initialize, notifications/initialized, tools/list, tools/call).
final class MCPStdioClient: @unchecked Sendable {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors: String
    /// The lines the server wrote so far (filled by a reader thread).
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        var snapshot: [String] { lines.withLock { $0 } }
    }
    private let received = Lines()
    private var nextID = 1

    init(arguments: [String], directory: TemporaryDirectory) throws {
        errors = directory.file("mcp-\(UUID().uuidString.prefix(6)).err")
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        process.executableURL = CLITests.binary
        process.arguments = ["mcp"] + arguments
        process.environment = E2E.environment
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: errors)
        try process.run()
        let handle = output.fileHandleForReading
        let received = self.received
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    received.lines.withLock { $0.append(line) }
                }
            }
        }
    }

    var stderrText: String { String(decoding: FileManager.default.contents(atPath: errors) ?? Data(), as: UTF8.self) }

    /// Writes one JSON-RPC message as a line.
    func send(_ message: [String: Any]) throws {
        var data = try JSONSerialization.data(withJSONObject: message)
        data.append(0x0A)
        input.fileHandleForWriting.write(data)
    }

    /// Sends a request and waits (at most `timeout` seconds) for the response with its id.
    func request(_ method: String, _ params: [String: Any] = [:], timeout: Double = 60) throws -> [String: Any] {
        let id = nextID
        nextID += 1
        try send(["jsonrpc": "2.0", "id": id, "method": method, "params": params])
        let response = E2E.poll(timeout: timeout) { () -> [String: Any]? in
            for line in received.snapshot {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["id"] as? Int == id
                else { continue }
                return object
            }
            return nil
        }
        guard let response else { throw E2E.Failure("no answer to \(method) within \(timeout) s: \(stderrText)") }
        return response
    }

    /// Calls a tool; returns its text and whether it is an error.
    func callTool(_ name: String, _ arguments: [String: Any] = [:]) throws -> (text: String, isError: Bool) {
        let response = try request("tools/call", ["name": name, "arguments": arguments])
        let result = try #require(response["result"] as? [String: Any], "\(response)")
        let content = try #require(result["content"] as? [[String: Any]], "\(result)")
        let text = content.compactMap { $0["text"] as? String }.joined(separator: "\n")
        return (text, result["isError"] as? Bool ?? false)
    }

    /// The JSON object a tool answered with.
    func callToolJSON(_ name: String, _ arguments: [String: Any] = [:]) throws -> [String: Any] {
        let (text, isError) = try callTool(name, arguments)
        #expect(!isError, "\(name): \(text)")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    /// initialize, then notifications/initialized; returns the initialize result.
    func handshake() throws -> [String: Any] {
        let response = try request(
            "initialize",
            [
                "protocolVersion": "2025-06-18", "capabilities": [:] as [String: Any],
                "clientInfo": ["name": "ats-proxy-tests", "version": "1"],
            ])
        try send(["jsonrpc": "2.0", "method": "notifications/initialized"])
        return try #require(response["result"] as? [String: Any], "\(response)")
    }

    /// The names tools/list offers.
    func toolNames() throws -> [String] {
        let response = try request("tools/list")
        let tools = (response["result"] as? [String: Any])?["tools"] as? [[String: Any]] ?? []
        return tools.compactMap { $0["name"] as? String }
    }

    /// Closes stdin (the server then ends) and waits; kills by PID if it does not.
    func finish() -> Bool {
        try? input.fileHandleForWriting.close()
        let ended = E2E.poll(timeout: 10) { process.isRunning ? nil : true } ?? false
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        return ended
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// `ats-proxy mcp` against a proxy the test runs with `--web` (the flow tools read its JSON API), and standalone.
@Suite(.serialized) struct MCPServerEndToEndTests {
    @Test(.timeLimit(.minutes(4))) func anAgentAsksWhyALoadFailedAndGetsTheRuleAndFix() throws {
        let (stack, webPort, _) = try LiveViewEndToEndTests.stack()
        #expect(try stack.curl("\(stack.plain)/hello").httpCode == 403)
        #expect(try stack.curl("\(stack.api)/hello", ["-H", "Authorization: Bearer sekrit-token-123"]).httpCode == 200)
        // Flows reach the ring after the log line; wait for both.
        _ = stack.proxy.waitForLog("api.example.test")

        let client = try MCPStdioClient(
            arguments: ["--web", "http://127.0.0.1:\(webPort)", "--config", stack.proxy.configPath],
            directory: stack.directory)
        let initialized = try client.handshake()
        #expect((initialized["serverInfo"] as? [String: Any])?["name"] as? String == "ats-proxy")
        #expect((initialized["capabilities"] as? [String: Any])?["tools"] != nil, "\(initialized)")
        #expect(
            try client.toolNames() == [
                "list_flows", "get_flow", "session_summary", "minimal_info_plist", "explain", "lint", "diagnose",
            ])

        let violations = try client.callToolJSON("list_flows", ["violations_only": true])
        let rows = try #require(violations["flows"] as? [[String: Any]])
        #expect(rows.count == 1, "\(violations)")
        let blockedRow = try #require(rows.first)
        #expect(blockedRow["outcome"] as? String == "blocked")
        #expect(blockedRow["code"] as? String == "-1022")
        #expect((blockedRow["url"] as? String)?.hasPrefix("http://plain.example.test:") == true)
        #expect(violations["matched"] as? Int == 1)

        // Why did it fail: the rule, the fix and the console lines come back.
        let id = try #require(blockedRow["id"] as? Int)
        let flow = try client.callToolJSON("get_flow", ["id": id])
        #expect((flow["rule"] as? String)?.isEmpty == false, "\(flow)")
        #expect((flow["fix"] as? String)?.contains("NSExceptionAllowsInsecureHTTPLoads") == true, "\(flow)")
        #expect((flow["console"] as? [String])?.contains { $0.contains("App Transport Security") } == true)
        let byURL = try client.callToolJSON("get_flow", ["url": "plain.example.test"])
        #expect(byURL["id"] as? Int == id)

        // Secrets are redacted as in the log.
        let apiRows = try client.callToolJSON("list_flows", ["host": "api.example", "outcome": "allowed"])
        let apiID = try #require((apiRows["flows"] as? [[String: Any]])?.first?["id"] as? Int, "\(apiRows)")
        let (apiText, _) = try client.callTool("get_flow", ["id": apiID])
        #expect(!apiText.contains("sekrit-token-123"))
        #expect(apiText.contains("<redacted 23 bytes>"), "\(apiText)")

        let summary = try client.callToolJSON("session_summary")
        #expect((summary["totals"] as? [String: Any])?["violations"] as? Int == 1, "\(summary)")
        let (plist, plistError) = try client.callTool("minimal_info_plist")
        #expect(!plistError)
        #expect(plist.contains("<key>plain.example.test</key>"), "\(plist)")

        let missing = try client.callTool("get_flow", ["id": 999_999])
        #expect(missing.isError)
        #expect(missing.text.contains("not (or no longer) in the ring"))
        #expect(client.finish(), "the server ends when stdin closes")
    }

    @Test func standaloneOffersOnlyTheOfflineTools() throws {
        let directory = try TemporaryDirectory("mcp-standalone")
        let config = try directory.write(
            "Info.plist",
            infoPlist("<key>NSExceptionDomains</key><dict><key>*.example.com</key><dict/></dict>"))
        let client = try MCPStdioClient(arguments: ["--config", config], directory: directory)
        _ = try client.handshake()
        #expect(try client.toolNames() == ["explain", "lint", "diagnose"])

        let explained = try client.callToolJSON("explain", ["urls": ["http://example.com/"]])
        let decision = try #require((explained["decisions"] as? [[String: Any]])?.first, "\(explained)")
        let text = String(decoding: try JSONSerialization.data(withJSONObject: decision), as: UTF8.self)
        #expect(text.contains("-1022"), "\(text)")

        let (lint, lintError) = try client.callTool("lint")
        #expect(!lintError)
        #expect(lint.contains("wildcard-key"), "\(lint)")

        let attachedOnly = try client.callTool("list_flows")
        #expect(attachedOnly.isError)
        #expect(attachedOnly.text.contains("--web"))
        #expect(client.finish())
    }

    @Test func aWebAddressOffThisMachineIsRefused() throws {
        let result = try CLITests.run(["mcp", "--web", "http://192.0.2.1:8081"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("not a loopback address"), "\(result.stderr)")
    }
}

/// `/metrics` on the `--web` listener, read back with prometheus_client's text parser after known flows.
@Suite(.serialized) struct MetricsEndToEndTests {
    struct Sample {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    /// GETs `/metrics` from the web view (no proxy) and parses it with `Fixtures/metricscheck.py`.
    static func scrape(webPort: Int, directory: TemporaryDirectory) throws -> [Sample] {
        let path = directory.file("metrics-\(UUID().uuidString.prefix(6)).txt")
        let fetched = try E2E.run(
            "/usr/bin/curl", ["-s", "-S", "--noproxy", "*", "-o", path, "http://127.0.0.1:\(webPort)/metrics"],
            timeout: 30)
        #expect(fetched.status == 0, "\(fetched.stderrText)")
        let parsed = try E2E.run("/usr/bin/env", ["python3", E2E.fixture("metricscheck.py"), path], timeout: 60)
        #expect(parsed.stdoutText.contains("METRICS OK"), "\(parsed.stdoutText)\(parsed.stderrText)")
        return parsed.stdoutText.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                return nil
            }
            return Sample(
                name: object["name"] as? String ?? "", labels: object["labels"] as? [String: String] ?? [:],
                value: object["value"] as? Double ?? (object["value"] as? Int).map(Double.init) ?? -1)
        }
    }

    @Test(.timeLimit(.minutes(3))) func metricsCountTheFlowsSent() throws {
        let (stack, webPort, refusedPort) = try LiveViewEndToEndTests.stack()
        #expect(try stack.curl("\(stack.api)/hello?1").httpCode == 200)
        #expect(try stack.curl("\(stack.api)/hello?2").httpCode == 200)
        #expect(try stack.curl("\(stack.plain)/hello").httpCode == 403)
        _ = try stack.curl("https://refused.example.test:\(refusedPort)/")
        _ = stack.proxy.waitForLog("refused.example.test")

        let samples = try E2E.poll(timeout: 10) { () -> [Sample]? in
            let samples = try Self.scrape(webPort: webPort, directory: stack.directory)
            let total = samples.filter { $0.name == "ats_proxy_requests_total" }.reduce(0) { $0 + $1.value }
            return total >= 4 ? samples : nil
        }
        let all = try #require(samples, "the four requests never showed in /metrics")
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            all.first { sample in
                sample.name == name && labels.allSatisfy { key, value in sample.labels[key] == value }
            }?.value
        }
        #expect(value("ats_proxy_requests_total", ["outcome": "allowed", "route": "CONNECT+TLS"]) == 2)
        #expect(value("ats_proxy_requests_total", ["outcome": "blocked", "route": "absolute-form"]) == 1)
        #expect(value("ats_proxy_requests_total", ["outcome": "network-error", "route": "CONNECT+TLS"]) == 1)
        #expect(value("ats_proxy_ats_violations_total", ["code": "-1022"]) == 1)
        #expect(all.filter { $0.name == "ats_proxy_ats_violations_total" }.count == 1)
        #expect(value("ats_proxy_request_duration_seconds_count") == 4)
        #expect(value("ats_proxy_request_duration_seconds_bucket", ["le": "+Inf"]) == 4)
        #expect(value("ats_proxy_open_connections") != nil)
        #expect(all.filter { $0.name == "ats_proxy_handshake_failures_total" }.isEmpty, "no TLS failed here")
    }
}
