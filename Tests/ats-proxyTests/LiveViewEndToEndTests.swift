import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `--web HOST:PORT`: the live page in real headless Chromium (`Fixtures/cdp_page.py`, DevTools
/// protocol over a pipe) while curl sends HTTP/1.1 and h2 traffic through the proxy; and the web
/// server's own answers (downloads, Host check, unknown paths) with curl.
@Suite(.serialized) struct LiveViewEndToEndTests {
    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// A stack with the web view on a free port and a host whose port refuses connections.
    /// The page's title names the Info.plist as `Info.plist` (no temporary path): its screenshots go in the README.
    static func stack(_ extra: [String] = []) throws -> (ProxyStack, webPort: Int, refusedPort: Int) {
        let refusedPort = try E2E.freePort()
        for _ in 0..<3 {
            let webPort = try E2E.freePort()
            let stack = try ProxyStack(
                arguments: [
                    "--web", "127.0.0.1:\(webPort)", "--resolve", "refused.example.test:\(refusedPort):127.0.0.1",
                ] + extra, relativeConfig: true)
            if stack.proxy.child.stderrText.contains("live flows: http://127.0.0.1:\(webPort)/") {
                return (stack, webPort, refusedPort)
            }
        }
        throw E2E.Failure("the web view did not start")
    }

    @Test(.timeLimit(.minutes(4))) func pageShowsFlowsLiveFiltersThemAndExplainsOne() throws {
        let chromium = try #require(Self.chromium, "chromium is not installed; run scripts/bootstrap test")
        let (stack, webPort, refusedPort) = try Self.stack()
        let directory = stack.directory
        let screenshot = directory.file("live-flows.png")
        let browser = try Child(
            executable: "/usr/bin/env",
            arguments: [
                "python3", E2E.fixture("cdp_page.py"), "--chromium", chromium, "--url", "http://127.0.0.1:\(webPort)/",
                "--profile", directory.file("profile"), "--screenshot", screenshot, "--expect", "5",
                "--filter-host", "legacy", "--select-outcome", "blocked", "--expect-dictionary", "plain.example.test",
                "--timeout", "90", "--phone-screenshot", directory.file("live-flows-phone.png"),
                "--half-screenshot", directory.file("live-flows-900.png"),
            ], directory: directory, label: "cdp")
        let connected = E2E.poll(timeout: 90) { () -> Bool? in
            if !browser.process.isRunning { return false }
            return browser.stdoutText.contains("CONNECTED") ? true : nil
        }
        try #require(connected == true, "the page did not connect: \(browser.stdoutText) \(browser.stderrText)")

        // Traffic after the page opened: it must arrive live.
        #expect(try stack.curl("\(stack.api)/hello?v=1").httpCode == 200)
        #expect(try stack.curl("\(stack.api)/hello?v=2", ["--http2"]).httpCode == 200)
        #expect(try stack.curl("\(stack.plain)/hello").httpCode == 403)
        #expect(try stack.curl("\(stack.legacy)/hello").httpCode == 200)
        _ = try stack.curl("https://refused.example.test:\(refusedPort)/")

        #expect(browser.wait(timeout: 120), "the browser script did not finish: \(browser.stdoutText)")
        let output = browser.stdoutText
        let line = try #require(
            output.split(separator: "\n").first { $0.hasPrefix("RESULT ") }, "\(output) \(browser.stderrText)")
        let result = try #require(
            try JSONSerialization.jsonObject(with: Data(line.dropFirst(7).utf8)) as? [String: Any])
        let rows = try #require(result["rows"] as? [[String: Any]])
        func withOutcome(_ outcome: String) -> [[String: Any]] { rows.filter { $0["outcome"] as? String == outcome } }
        func cells(_ row: [String: Any]) -> [String] { row["cells"] as? [String] ?? [] }

        let allowed = withOutcome("allowed").filter { $0["host"] as? String == "api.example.test" }
        #expect(allowed.count == 2, "\(rows)")
        // Columns: time, source, method, URL, status, outcome, code, protocol, ms, up, down (what decides a row
        // first, so it stays in view beside the detail pane).
        #expect(Set(allowed.map { cells($0)[7] }) == ["http/1.1", "h2"], "\(allowed)")
        #expect(allowed.allSatisfy { cells($0)[4] == "200" && cells($0)[1] == "urlsession" && cells($0)[2] == "GET" })
        let blocked = try #require(withOutcome("blocked").first, "\(rows)")
        #expect(blocked["code"] as? String == "-1022")
        #expect(cells(blocked)[3].hasPrefix("http://plain.example.test:"))
        #expect(cells(blocked)[4] == "403")
        #expect(cells(blocked)[5] == "blocked" && cells(blocked)[6] == "-1022")
        let failed = try #require(withOutcome("network error").first, "\(rows)")
        #expect((failed["code"] as? String)?.hasPrefix("-1004") == true, "\(failed)")
        #expect(rows.contains { $0["host"] as? String == "legacy.example.test" })
        // Coloured by outcome.
        #expect(blocked["colour"] as? String != allowed.first?["colour"] as? String)
        #expect(failed["colour"] as? String != blocked["colour"] as? String)

        let filtered = try #require(result["hostFiltered"] as? [[String: Any]])
        let visible = filtered.filter { $0["hidden"] as? Bool == false }
        #expect(!visible.isEmpty && visible.allSatisfy { ($0["host"] as? String)?.contains("legacy") == true })
        #expect(filtered.count == rows.count)
        let violations = try #require(result["violationsOnly"] as? [[String: Any]]).filter {
            $0["hidden"] as? Bool == false
        }
        #expect(violations.map { $0["outcome"] as? String } == ["blocked"], "\(violations)")

        let allowedDetail = try #require(result["allowedDetail"] as? [String: Any], "\(result.keys)")
        let tlsText = allowedDetail["tls"] as? String ?? ""
        for fact in ["version", "cipher", "chain", "leafNames", "api.example.test", "leafValidity"] {
            #expect(tlsText.contains(fact), "\(fact) missing from the TLS facts: \(tlsText)")
        }
        let timingText = allowedDetail["timings"] as? String ?? ""
        #expect(timingText.contains("first byte") && timingText.contains("total"), "\(timingText)")
        let detail = try #require(result["detail"] as? [String: Any])
        #expect(detail["selected"] as? String == "\(blocked["id"] as? Int ?? -1)")
        #expect((detail["rule"] as? String)?.contains("ATS is required") == true, "\(detail)")
        #expect((detail["fix"] as? String)?.contains("NSExceptionAllowsInsecureHTTPLoads") == true, "\(detail)")
        #expect((detail["chain"] as? String)?.contains("-1022") == true, "\(detail)")
        #expect((detail["console"] as? String)?.contains("App Transport Security has blocked") == true)
        let dictionary = try #require(result["dictionary"] as? String)
        #expect(dictionary.contains("plain.example.test"), "\(dictionary)")
        #expect(dictionary.contains("NSExceptionAllowsInsecureHTTPLoads"))
        // The Verify button: every load re-decided under that dictionary; the blocked one now passes.
        let verifiedText = result["verified"] as? String ?? ""
        #expect(verifiedText.contains("PASS \(stack.plain)/hello"), "\(verifiedText)")
        #expect(verifiedText.contains("0 still fail"), "\(verifiedText)")

        // At 900 px (beside the Simulator): the outcome and code stay in view, optional columns give way, the detail
        // pane sits below the list, nothing scrolls sideways.
        let wide = try #require(result["wide"] as? [String: Any], "\(result.keys)")
        #expect(
            (wide["codeRight"] as? Double ?? 99999) <= (wide["listRight"] as? Double ?? 0),
            "at 1400 px the code column is cut off: \(wide)")
        #expect(wide["detailBelowList"] as? Bool == false, "\(wide)")
        let half = try #require(result["half"] as? [String: Any], "\(result.keys)")
        #expect((half["outcomeRight"] as? Double ?? 99999) <= 900, "\(half)")
        #expect((half["codeRight"] as? Double ?? 99999) <= 900, "\(half)")
        #expect(half["shownColumns"] as? [String] == ["time", "method", "URL", "status", "outcome", "code"], "\(half)")
        #expect(half["detailBelowList"] as? Bool == true, "\(half)")
        #expect(half["scrollWidth"] as? Int ?? 9999 <= 900, "\(half)")
        // Filters and hidden columns live in the URL, and a reload restores them.
        let search = result["search"] as? String ?? ""
        #expect(search.contains("outcome=blocked") && search.contains("hide=status"), "\(search)")
        let restored = try #require(result["restored"] as? [String: Any])
        #expect(restored["outcome"] as? String == "blocked", "\(restored)")
        #expect(restored["statusShown"] as? Bool == false, "\(restored)")
        #expect(restored["shown"] as? [String] == ["blocked"], "\(restored)")
        // Copy as curl: through this proxy, the method and URL of the flow.
        let curl = result["curl"] as? String ?? ""
        #expect(curl.hasPrefix("curl -x 'http://127.0.0.1:\(stack.proxy.port)'"), "\(curl)")
        #expect(curl.hasSuffix("'\(stack.plain)/hello'"), "\(curl)")

        // On a phone the page fits the screen's width (the table scrolls inside its own box).
        #expect(result["phoneScrollWidth"] as? Int ?? 9999 <= 390, "\(result["phoneScrollWidth"] ?? "-")")
        try FileManager.default.createDirectory(at: testArtifacts, withIntermediateDirectories: true)
        for name in ["live-flows.png", "live-flows-phone.png", "live-flows-900.png"] {
            let png = try Data(contentsOf: URL(fileURLWithPath: directory.file(name)))
            #expect(png.count > 20_000 && png.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
            let artifact = testArtifacts.appendingPathComponent(name)
            try? FileManager.default.removeItem(at: artifact)
            try FileManager.default.copyItem(at: URL(fileURLWithPath: directory.file(name)), to: artifact)
        }
    }

    @Test func downloadsAndRefusals() throws {
        let (stack, webPort, _) = try Self.stack()
        #expect(try stack.curl("\(stack.plain)/hello").httpCode == 403)
        _ = stack.proxy.waitForLog("plain.example.test")
        let base = "http://127.0.0.1:\(webPort)"
        let page = try Curl.fetch("\(base)/", proxy: nil)
        #expect(page.httpCode == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.bodyText.contains("new EventSource(\"/events\")"))
        for reference in ["<script src", "<link ", "https://", "@import"] {
            #expect(!page.bodyText.contains(reference), "the page loads something else: \(reference)")
        }

        let har = try Curl.fetch("\(base)/session.har", proxy: nil, directory: stack.directory)
        #expect(har.httpCode == 200)
        let check = try HARCheck(har.bodyPath)
        #expect(check.ok, "\(check.output)")
        #expect(check.entries.first?["code"] as? String == "-1022")

        let report = try Curl.fetch("\(base)/report.json", proxy: nil)
        #expect(report.httpCode == 200)
        let document = try JSONSerialization.jsonObject(with: report.body) as? [String: Any]
        #expect(document?["minimalDictionary"] != nil)
        #expect(try Curl.fetch("\(base)/report.html", proxy: nil).bodyText.contains("<html"))
        let ca = try Curl.fetch("\(base)/ats-proxy-ca.pem", proxy: nil)
        #expect(ca.bodyText.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(ca.body == FileManager.default.contents(atPath: stack.proxy.caPath))

        #expect(try Curl.fetch("\(base)/nothing", proxy: nil).httpCode == 404)

        // The page's Verify action: the session's loads re-decided under its own minimal dictionary. The blocked
        // cleartext load passes under it (the dictionary adds its exception).
        #expect(try Curl.fetch("\(base)/api/verify", proxy: nil).httpCode == 405, "a plain GET starts no run")
        let verified = try Curl.fetch(
            "\(base)/api/verify", proxy: nil, arguments: ["-X", "POST", "-H", "X-ATS-Proxy-Action: verify"])
        #expect(verified.httpCode == 200, "\(verified.bodyText)")
        let verification = try #require(try JSONSerialization.jsonObject(with: verified.body) as? [String: Any])
        let loads = verification["loads"] as? [[String: Any]] ?? []
        let plainLoad = loads.first { ($0["url"] as? String)?.hasPrefix(stack.plain) == true }
        #expect(plainLoad?["result"] as? String == "pass", "\(verification)")
        #expect(verification["failed"] as? Int == 0, "\(verification)")
        #expect(verification["candidate"] as? String == "the session's minimal dictionary")
        // Through the proxy: the onboarding name leads to the page, which the proxy then fetches like any load.
        let hop = try Curl.fetch("http://ats-proxy.invalid/flows", proxy: stack.proxy, directory: stack.directory)
        #expect(hop.httpCode == 200)
        #expect(hop.bodyText.contains("url=\(base)/"), "\(hop.bodyText)")
        let proxied = try Curl.fetch("\(base)/", proxy: stack.proxy, directory: stack.directory)
        #expect(proxied.httpCode == 200)
        #expect(proxied.bodyText.contains("new EventSource(\"/events\")"))
        // A page under another name (DNS rebinding) cannot read the flows.
        let rebound = try Curl.fetch("\(base)/events", proxy: nil, arguments: ["-H", "Host: evil.example.com"])
        #expect(rebound.httpCode == 421)
        #expect(try Curl.fetch("\(base)/", proxy: nil, arguments: ["-X", "POST"]).httpCode == 405)

        // The event stream replays the ring, then resumes after Last-Event-ID.
        let events = try Curl.fetch("\(base)/events", proxy: nil, arguments: ["-N", "--max-time", "2"], timeout: 5)
        #expect(events.bodyText.contains("event: hello"))
        #expect(events.bodyText.contains("id: 1\ndata: {"), "\(events.bodyText.prefix(400))")
        #expect(events.bodyText.contains("event: dictionary"))
        let resumed = try Curl.fetch(
            "\(base)/events", proxy: nil, arguments: ["-N", "--max-time", "2", "-H", "Last-Event-ID: 1"], timeout: 5)
        #expect(!resumed.bodyText.contains("id: 1\n"))
    }
}

/// Memory with the page open stays bounded by the ring: 50,000 requests through the proxy.
@Suite(.serialized) struct LiveViewMemoryTests {
    /// Resident set size of `pid` in KiB.
    static func rss(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// Sends `count` blocked cleartext requests on one keep-alive connection (curl reads URLs from a config file).
    static func send(_ count: Int, stack: ProxyStack, tag: String) throws {
        var config = ""
        for index in 0..<count {
            config += "url = \"\(stack.plain)/\(tag)/\(index)\"\noutput = \"/dev/null\"\n"
        }
        let path = try stack.directory.write("urls-\(tag).txt", config)
        let result = try E2E.run(
            "/usr/bin/curl",
            ["-s", "--http1.1", "-x", "http://\(stack.proxy.address)", "-K", path, "-w", "%{http_code}\n"],
            timeout: 600)
        #expect(result.status == 0, "\(result.stderrText)")
        #expect(result.stdoutText.split(separator: "\n").allSatisfy { $0 == "403" })
    }

    @Test(.timeLimit(.minutes(10))) func fiftyThousandRequestsWithThePageOpenStayWithinTheRing() throws {
        let webPort = try E2E.freePort()
        let stack = try ProxyStack(arguments: [
            "--web", "127.0.0.1:\(webPort)", "--web-flows", "1000", "--diagnostics", "0",
        ])
        // The page: an event stream read as it comes (curl -N), like a browser tab.
        let page = try Child(
            executable: "/usr/bin/curl", arguments: ["-s", "-N", "http://127.0.0.1:\(webPort)/events"],
            directory: stack.directory, label: "page")
        defer { page.stop() }
        let pid = stack.proxy.child.pid
        try Self.send(10_000, stack: stack, tag: "warm")
        let warm = Self.rss(pid)
        try Self.send(40_000, stack: stack, tag: "more")
        let after = Self.rss(pid)
        #expect(page.process.isRunning, "the page's stream closed")
        #expect(page.stdoutText.contains("id: "), "the page got no flows")
        // 40,000 more records kept would cost well over 40 MB (each holds its headers and console lines);
        // the ring keeps 1,000, so growth stays small.
        #expect(after - warm < 24 * 1024, "RSS grew from \(warm) KiB to \(after) KiB")
        let events = try Curl.fetch(
            "http://127.0.0.1:\(webPort)/events", proxy: nil, arguments: ["-N", "--max-time", "3"], timeout: 6,
            directory: stack.directory)
        let ids = events.bodyText.split(separator: "\n").filter { $0.hasPrefix("id: ") }
        #expect(ids.count == 1000, "a new page gets the ring: \(ids.count) flows")
        #expect(ids.first == "id: 49001")
    }
}
