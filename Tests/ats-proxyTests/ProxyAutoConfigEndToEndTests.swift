import ATSTestSupport
import Foundation
import Testing

/// `/proxy.pac` with real clients: curl fetches it from the proxy's own address, through the proxy
/// (`ats-proxy.invalid`) and from `--web`; headless Chromium configured with the PAC URL loads a page through the
/// proxy (the proxy records it), then, with the proxy stopped, the same browser loads the next page direct (the
/// file's `DIRECT` fallback) from the origin.
@Suite(.serialized) struct ProxyAutoConfigEndToEndTests {
    static let pacOrigin = "pac.example.test"

    static func stack(_ extra: [String] = []) throws -> ProxyStack {
        try ProxyStack(
            extraATS: cleartextException(pacOrigin), arguments: extra,
            extraOrigins: { directory, _ in [(pacOrigin, try Origin(name: "pac", directory: directory))] })
    }

    @Test func servedOnTheProxysAddressThroughItAndOnTheWebView() throws {
        let webPort = try E2E.freePort()
        let stack = try Self.stack([
            "--ignore-hosts", #"(^|\.)apple\.com:"#, "--ignore-hosts", "(?i)tracker", "--web", "127.0.0.1:\(webPort)",
        ])
        let proxy = stack.proxy.address
        let direct = try Curl.fetch("http://\(proxy)/proxy.pac", proxy: nil)
        #expect(direct.httpCode == 200, "\(direct.stderr)")
        #expect(direct.headers["content-type"] == "application/x-ns-proxy-autoconfig")
        #expect(direct.bodyText.contains(#"var atsProxy = "PROXY \#(proxy); DIRECT";"#), "\(direct.bodyText)")
        #expect(direct.bodyText.contains(#"atsCompile("(^|\\.)apple\\.com:")"#), "\(direct.bodyText)")
        #expect(direct.bodyText.contains("// not translated ("), "the ICU-only pattern is named")
        #expect(!direct.bodyText.contains("0.0.0.0"))
        let head = try Curl.fetch("http://\(proxy)/proxy.pac?x=1", proxy: nil, arguments: ["-I"])
        #expect(head.httpCode == 200 && head.headers["content-length"] == "\(direct.body.count)")

        let through = try Curl.fetch("http://ats-proxy.invalid/proxy.pac", proxy: stack.proxy)
        #expect(through.httpCode == 200)
        #expect(through.body == direct.body, "through the proxy: the same file, naming the same address")

        let web = try Curl.fetch("http://127.0.0.1:\(webPort)/proxy.pac", proxy: nil)
        #expect(web.httpCode == 200, "\(web.bodyText)")
        #expect(web.headers["content-type"] == "application/x-ns-proxy-autoconfig")
        #expect(web.body == direct.body, "the web view names the proxy's port, not its own")
        #expect(!stack.proxy.log.contains("proxy.pac →"), "answered by the proxy itself, never recorded as a load")
    }

    @Test(.timeLimit(.minutes(5))) func chromiumGoesThroughTheProxyThenDirectOnceItStops() throws {
        let chromium = try #require(
            LiveViewEndToEndTests.chromium, "chromium is not installed; run scripts/bootstrap test")
        let stack = try Self.stack()
        let origin = try #require(stack.extras[Self.pacOrigin])
        let waitFile = stack.directory.file("proxy-stopped")
        let browser = try Child(
            executable: "/usr/bin/env",
            arguments: [
                "python3", E2E.fixture("pac_fallback.py"), "--chromium", chromium, "--profile",
                stack.directory.file("pac-profile"), "--pac", "http://\(stack.proxy.address)/proxy.pac", "--map",
                Self.pacOrigin, "--first", stack.url(Self.pacOrigin, "/hello?via=proxy", scheme: "http"), "--second",
                stack.url(Self.pacOrigin, "/hello?via=direct", scheme: "http"), "--wait-file", waitFile,
                "--timeout", "90",
            ], directory: stack.directory, label: "pac")
        let first = E2E.poll(timeout: 120) { () -> String? in
            if !browser.process.isRunning { return "exited" }
            return browser.stdoutText.contains("FIRST ") ? browser.stdoutText : nil
        }
        try #require(first?.contains("FIRST ") == true, "\(browser.stdoutText) \(browser.stderrText)")
        #expect(first?.contains("hello from pac") == true)
        let log = stack.proxy.waitForLog("/hello?via=proxy")
        #expect(
            log.contains("GET http://\(Self.pacOrigin):\(origin.port)/hello?via=proxy"), "the proxy's record: \(log)")

        stack.proxy.stop()
        #expect(!stack.proxy.isRunning)
        _ = FileManager.default.createFile(atPath: waitFile, contents: Data())
        #expect(browser.wait(timeout: 120), "the browser script did not finish: \(browser.stdoutText)")
        #expect(browser.process.terminationStatus == 0, "\(browser.stdoutText) \(browser.stderrText)")
        #expect(browser.stdoutText.contains("SECOND \"hello from pac"), "\(browser.stdoutText)")
        // Direct: the origin got it while no proxy ran, under its own name (Host), as an origin-form request.
        let requests = origin.requests
        #expect(
            requests.contains { $0.hasPrefix("GET /hello?via=direct Host=\(Self.pacOrigin):\(origin.port)") },
            "\(requests)")
        #expect(requests.contains { $0.hasPrefix("GET /hello?via=proxy ") }, "\(requests)")
    }
}
