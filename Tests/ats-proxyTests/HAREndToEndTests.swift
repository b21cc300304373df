import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `--har FILE`: an HTTP Archive 1.2 of the session, written on SIGUSR1 and at exit, validated
/// against the HAR 1.2 schema the tests carry and read back by haralyzer (a HAR library from PyPI).
@Suite(.serialized) struct HAREndToEndTests {
    @Test func harHoldsEveryFlowWithItsVerdictAndRedactedSecrets() throws {
        let refusedPort = try E2E.freePort()
        let directory = try TemporaryDirectory("har")
        let harPath = directory.file("session.har")
        let stack = try ProxyStack(arguments: [
            "--har", harPath, "--resolve", "refused.example.test:\(refusedPort):127.0.0.1",
        ])
        #expect(stack.proxy.child.stderrText.contains("HAR: \(harPath)"))
        let allowed = try stack.curl(
            "\(stack.api)/hello?lang=en&q=two%20words",
            ["-H", "Cookie: session=sekrit-cookie", "-H", "Authorization: Bearer sekrit-token"])
        #expect(allowed.httpCode == 200, "\(allowed.stderr)")
        let h2 = try stack.curl("\(stack.api)/hello?over=h2", ["--http2"])
        #expect(h2.httpCode == 200, "\(h2.stderr)")
        let blocked = try stack.curl("\(stack.plain)/hello")
        #expect(blocked.httpCode == 403)
        let failed = try stack.curl("https://refused.example.test:\(refusedPort)/nothing")
        #expect(failed.httpCode == 502 || failed.httpCode == 504, "\(failed.statusLine)")
        _ = stack.proxy.waitForLog("refused.example.test")

        stack.proxy.child.signal(SIGUSR1)
        stack.proxy.waitForLog("HAR written to \(harPath)", timeout: 10)
        let check = try HARCheck(harPath)
        #expect(check.ok, "\(check.output)")
        #expect(check.entries.count == 4, "\(check.output)")

        let first = try #require(check.entries(matching: "lang=en").first, "\(check.output)")
        #expect(first["status"] as? Int == 200)
        #expect(first["outcome"] as? String == "allowed")
        #expect(first["httpVersion"] as? String == "HTTP/1.1")
        #expect(first["code"] is NSNull)
        #expect((first["tls"] as? [String: String])?["version"]?.hasPrefix("TLS") == true, "\(first)")
        // A new upstream connection: connect and TLS are timed, and the phases add up to the total.
        let timings = first["timings"] as? [String: Double] ?? [:]
        #expect((timings["connect"] ?? -1) >= 0 && (timings["ssl"] ?? -1) >= 0, "\(timings)")
        #expect((timings["connect"] ?? 0) >= (timings["ssl"] ?? 0), "HAR counts TLS inside connect: \(timings)")
        let phases = ["blocked", "dns", "connect", "send", "wait", "receive"].map { max(0, timings[$0] ?? 0) }
        #expect(abs(phases.reduce(0, +) - (first["time"] as? Double ?? -1)) < 0.01, "\(timings) \(first)")
        // The detailed facts the HAR asks for: the chain, the leaf's names and validity, SCTs.
        let tls = first["tls"] as? [String: String] ?? [:]
        #expect(tls["leafNames"]?.contains("api.example.test") == true, "\(tls)")
        #expect(tls["chain"]?.hasPrefix("0: ") == true, "\(tls)")
        #expect(tls["leafValidity"]?.hasSuffix("days)") == true, "\(tls)")
        #expect(tls["scts"] != nil && tls["anchor"] == "user-installed", "\(tls)")
        let headers = first["requestHeaders"] as? [String: String] ?? [:]
        #expect(headers["cookie"]?.hasPrefix("<redacted") == true, "\(headers)")
        #expect(headers["authorization"]?.hasPrefix("<redacted") == true, "\(headers)")
        #expect(!check.output.contains("sekrit"), "a secret reached the HAR")

        let second = try #require(check.entries(matching: "over=h2").first)
        #expect(second["httpVersion"] as? String == "HTTP/2.0")
        #expect(second["outcome"] as? String == "allowed")

        let block = try #require(check.entries(matching: "plain.example.test").first)
        #expect(block["outcome"] as? String == "blocked")
        #expect(block["code"] as? String == "-1022")
        #expect((block["fix"] as? String)?.contains("NSExceptionAllowsInsecureHTTPLoads") == true, "\(block)")
        #expect((block["rule"] as? String)?.isEmpty == false)

        let fail = try #require(check.entries(matching: "refused.example.test").first)
        #expect(fail["outcome"] as? String == "network error")
        #expect((fail["code"] as? String)?.hasPrefix("-1004") == true, "\(fail)")

        // The raw file: HAR's query string parsed, custom fields present, timings non-negative.
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: harPath)))
        let log = try #require((json as? [String: Any])?["log"] as? [String: Any])
        #expect(log["version"] as? String == "1.2")
        let entries = try #require(log["entries"] as? [[String: Any]])
        let query = (entries.first?["request"] as? [String: Any])?["queryString"] as? [[String: String]]
        #expect(
            query == [["name": "lang", "value": "en"], ["name": "q", "value": "two words"]],
            "\(String(describing: query))")
        for entry in entries { #expect(entry["_atsRuleChain"] is [String]) }

        // At exit the file is written again, with everything.
        let more = try stack.curl("\(stack.api)/hello?after=usr1")
        #expect(more.httpCode == 200)
        _ = stack.proxy.waitForLog("after=usr1")
        stack.proxy.child.signal(SIGTERM)
        #expect(stack.proxy.child.wait(timeout: 20))
        let final = try HARCheck(harPath)
        #expect(final.ok, "\(final.output)")
        #expect(final.entries.count == 5)
    }

    @Test func secretsAppearOnlyWithLogSecrets() throws {
        let directory = try TemporaryDirectory("har-secrets")
        let harPath = directory.file("session.har")
        let stack = try ProxyStack(arguments: ["--har", harPath, "--log-secrets"])
        let result = try stack.curl("\(stack.api)/hello", ["-H", "Cookie: session=visible-cookie"])
        #expect(result.httpCode == 200)
        _ = stack.proxy.waitForLog("/hello")
        stack.proxy.child.signal(SIGUSR1)
        stack.proxy.waitForLog("HAR written to", timeout: 10)
        let check = try HARCheck(harPath)
        #expect(check.ok, "\(check.output)")
        #expect((check.entries.first?["requestHeaders"] as? [String: String])?["cookie"] == "session=visible-cookie")
    }

    @Test func captureBodiesKeepsTheFirstBytesAsTextOrBase64AndNeverLogsThem() throws {
        let directory = try TemporaryDirectory("har-bodies")
        let harPath = directory.file("session.har")
        let stack = try ProxyStack(arguments: ["--har", harPath, "--capture-bodies", "16", "--log-format", "json"])
        let form = "name=ats&value=proxy-body-capture"
        let post = try stack.curl(
            "\(stack.api)/echo",
            ["--data-binary", form, "-H", "Content-Type: application/x-www-form-urlencoded", "-H", "Expect:"])
        #expect(post.httpCode == 200, "\(post.stderr)")
        let hello = try stack.curl("\(stack.api)/hello")
        #expect(hello.bodyText == "hello from tls-origin\n")
        _ = stack.proxy.waitForLog("/hello")
        stack.proxy.child.signal(SIGUSR1)
        stack.proxy.waitForLog("HAR written to", timeout: 10)
        let check = try HARCheck(harPath)
        #expect(check.ok, "\(check.output)")

        let echo = try #require(check.entries(matching: "/echo").first, "\(check.output)")
        let postData = echo["postData"] as? [String: Any] ?? [:]
        #expect(postData["text"] as? String == String(form.prefix(16)), "\(postData)")
        #expect(postData["mimeType"] as? String == "application/x-www-form-urlencoded")
        #expect((postData["comment"] as? String)?.contains("first 16 bytes") == true)
        // The echo comes back as application/octet-stream: base64 of its first 16 bytes.
        let echoed = echo["content"] as? [String: Any] ?? [:]
        #expect(echoed["encoding"] as? String == "base64", "\(echoed)")
        #expect(echoed["text"] as? String == Data(form.prefix(16).utf8).base64EncodedString())
        #expect(echoed["size"] as? Int == form.utf8.count)

        let text = try #require(check.entries(matching: "/hello").first)
        let content = text["content"] as? [String: Any] ?? [:]
        #expect(content["text"] as? String == "hello from tls-o", "\(content)")
        #expect(content["encoding"] == nil)
        #expect(
            !stack.proxy.log.contains("proxy-body") && !stack.proxy.log.contains("\"bodies\""), "bodies reached the log"
        )
    }

    @Test func badObservationOptionsAreRefusedNamingTheFlag() throws {
        let cases: [([String], String)] = [
            (["--web", "nonsense"], "--web 'nonsense' is not HOST:PORT"),
            (["--web-flows", "0"], "--web-flows must be at least 1"),
            (["--keylog", "/nonexistent-dir/keys.log"], "--keylog: TLS key log /nonexistent-dir/keys.log"),
            (["--har", "/tmp/x.har", "--capture-bodies", "lots"], "--capture-bodies 'lots' is not a size"),
            (["--capture-bodies", "64k"], "--capture-bodies needs --har or --web"),
        ]
        for (arguments, message) in cases {
            let result = try E2E.run(CLITests.binary.path, arguments + ["--listen", "127.0.0.1:0"], timeout: 30)
            #expect(result.status != 0, "\(arguments)")
            #expect(result.stderrText.contains(message), "\(arguments): \(result.stderrText)")
        }
    }

    @Test func unwritableHARDirectoryIsRefusedAtStart() throws {
        let result = try E2E.run(
            CLITests.binary.path, ["--har", "/nonexistent-dir/session.har", "--listen", "127.0.0.1:0"], timeout: 30)
        #expect(result.status != 0)
        #expect(result.stderrText.contains("--har /nonexistent-dir/session.har"), "\(result.stderrText)")
    }
}
