import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One outcome vocabulary (`LoadOutcome`): one flow of each kind the proxy can produce in enforcing mode goes
/// through a real proxy with curl, and the JSON log, report.json, the HAR and the live page's event stream all
/// name it with the same word and the same code.
@Suite(.serialized) struct OutcomeVocabularyEndToEndTests {
    /// What one output said about one URL.
    struct Said: Equatable, CustomStringConvertible {
        var word: String
        var code: String?
        var description: String { word + (code.map { " \($0)" } ?? "") }
    }

    @Test(.timeLimit(.minutes(4))) func everyOutputNamesEachFlowWithTheSameWordAndCode() throws {
        let refusedPort = try E2E.freePort()
        let directory = try TemporaryDirectory("outcomes")
        let harPath = directory.file("session.har")
        let reportDirectory = directory.file("report")
        var started: (ProxyStack, Int)?
        for _ in 0..<3 where started == nil {
            let webPort = try E2E.freePort()
            let stack = try ProxyStack(
                arguments: [
                    "--web", "127.0.0.1:\(webPort)", "--har", harPath, "--report", reportDirectory,
                    "--log-format", "json", "--passthrough", "raw.example.test", "--ignore-hosts",
                    #"^ignored\.example\.test:"#, "--resolve", "refused.example.test:\(refusedPort):127.0.0.1",
                ]
            ) { directory, pki in
                [
                    (
                        "raw.example.test",
                        try Origin(name: "raw", directory: directory, tls: pki.leaf(["raw.example.test"], file: "raw"))
                    ),
                    (
                        "old.example.test",
                        try Origin(
                            name: "old", directory: directory, tls: pki.leaf(["old.example.test"], file: "old"),
                            tlsVersion: "1.1")
                    ),
                    ("ignored.example.test", try Origin(name: "ignored", directory: directory)),
                ]
            }
            if stack.proxy.child.stderrText.contains("live flows: http://127.0.0.1:\(webPort)/") {
                started = (stack, webPort)
            }
        }
        let (stack, webPort) = try #require(started, "the web view did not start")

        let allowed = "\(stack.api)/hello?kind=allowed"
        let exception = "\(stack.legacy)/hello?kind=exception"
        let blocked = "\(stack.plain)/hello?kind=blocked"
        let failed = stack.url("old.example.test", "/hello?kind=failed")
        let networkError = "https://refused.example.test:\(refusedPort)/?kind=network"
        let passthrough = stack.url("raw.example.test", "/hello")
        let passthroughRecord = "https://raw.example.test:\(stack.extras["raw.example.test"]?.port ?? 0)/"
        #expect(try stack.curl(allowed).httpCode == 200)
        #expect(try stack.curl(exception).httpCode == 200)
        #expect(try stack.curl(blocked).httpCode == 403)
        #expect(try stack.curl(failed).httpCode == 502)
        _ = try stack.curl(networkError)
        let tunnelled = try Curl.fetch(
            passthrough, proxy: stack.proxy, cacert: stack.pki.caPath, directory: stack.directory)
        #expect(tunnelled.httpCode == 200, "\(tunnelled.stderr)")
        let ignored = try stack.curl(stack.url("ignored.example.test", "/hello", scheme: "http"))
        #expect(ignored.httpCode == 200, "\(ignored.stderr)")

        let expected: [String: Said] = [
            allowed: Said(word: "allowed", code: nil),
            exception: Said(word: "allowed by exception", code: nil),
            blocked: Said(word: "blocked", code: "-1022"),
            failed: Said(word: "failed", code: "-1200 [3:-9836]"),
            networkError: Said(word: "network error", code: "-1004 [1:61]"),
            passthroughRecord: Said(word: "passthrough", code: nil),
        ]
        let log = E2E.poll(timeout: 10) { () -> [[String: Any]]? in
            let lines = Self.jsonLines(stack.proxy.log)
            return lines.count >= expected.count ? lines : nil
        }
        let records = try #require(log, "\(stack.proxy.log)")
        stack.proxy.child.signal(SIGUSR1)
        stack.proxy.waitForLog("report written to", timeout: 10)
        stack.proxy.waitForLog("HAR written to", timeout: 10)

        var fromLog: [String: Said] = [:]
        for record in records {
            guard let url = record["url"] as? String, let word = record["outcome"] as? String else { continue }
            let code = (record["errorCode"] as? Int).map {
                "\($0)" + ((record["streamError"] as? String).map { " [\($0)]" } ?? "")
            }
            fromLog[url] = Said(word: word, code: code)
        }

        let har = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: harPath)))
        let entries = try #require(((har as? [String: Any])?["log"] as? [String: Any])?["entries"] as? [[String: Any]])
        var fromHAR: [String: Said] = [:]
        for entry in entries {
            guard let url = (entry["request"] as? [String: Any])?["url"] as? String,
                let word = entry["_atsOutcome"] as? String
            else { continue }
            fromHAR[url] = Said(word: word, code: entry["_atsCode"] as? String)
        }

        let reportData = try Data(contentsOf: URL(fileURLWithPath: reportDirectory + "/report.json"))
        let report = try #require(try JSONSerialization.jsonObject(with: reportData) as? [String: Any])
        var fromReport: [String: Said] = [:]
        for host in report["hosts"] as? [[String: Any]] ?? [] {
            for verdict in host["verdicts"] as? [[String: Any]] ?? [] {
                guard let url = verdict["exampleURL"] as? String, let word = verdict["outcome"] as? String else {
                    continue
                }
                fromReport[url] = Said(word: word, code: verdict["code"] as? String)
            }
        }
        let totals = try #require(report["totals"] as? [String: Any])
        let outcomes = try #require(totals["outcomes"] as? [String: Int], "\(totals)")
        #expect(outcomes["ignored"] == 1, "the host filter's connection is counted under its word: \(outcomes)")
        for (_, said) in expected { #expect((outcomes[said.word] ?? 0) >= 1, "\(said.word) in \(outcomes)") }

        let events = try Curl.fetch(
            "http://127.0.0.1:\(webPort)/events", proxy: nil, arguments: ["-N", "--max-time", "2"], timeout: 5)
        var fromPage: [String: Said] = [:]
        for line in events.bodyText.split(separator: "\n") where line.hasPrefix("data: {") {
            guard let flow = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any],
                let url = flow["url"] as? String, let word = flow["outcome"] as? String
            else { continue }
            fromPage[url] = Said(word: word, code: flow["code"] as? String)
        }

        for (url, said) in expected {
            #expect(fromLog[url] == said, "JSON log for \(url): \(fromLog[url].map(\.description) ?? "none")")
            #expect(fromHAR[url] == said, "HAR for \(url): \(fromHAR[url].map(\.description) ?? "none")")
            #expect(fromReport[url] == said, "report.json for \(url): \(fromReport[url].map(\.description) ?? "none")")
            #expect(fromPage[url] == said, "page for \(url): \(fromPage[url].map(\.description) ?? "none")")
        }
        // The host filter's connection is in no per-flow output (it is never judged), only in the count above.
        #expect(!fromLog.keys.contains { $0.contains("ignored.example.test") })
        #expect(!stack.proxy.log.contains(#""outcome":"?"#) && !stack.proxy.log.contains("failed ?"))
    }

    /// The JSON objects among `log`'s lines (the banner and notes are text).
    static func jsonLines(_ log: String) -> [[String: Any]] {
        log.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }
}
