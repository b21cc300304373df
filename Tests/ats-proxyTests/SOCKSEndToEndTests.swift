import ATSTestSupport
import Foundation
import Testing

/// SOCKS5 on the proxy's one port, end to end with real clients: curl (`socks5h://`, the proxy resolves names, and
/// `socks5://`, curl resolves them), a Python client written on a socket (with the hostile inputs), and headless
/// Chromium. A SOCKS5 tunnel is decided exactly as a CONNECT one: TLS is intercepted, cleartext HTTP is the
/// `http://` load it is; each record carries its `SOCKS5+…` route in the JSON log, the report and the HAR.
@Suite(.serialized) struct SOCKSEndToEndTests {
    typealias Challenge = ChallengeRunEndToEndTests
    typealias Routes = TunnelRoutesEndToEndTests

    /// curl through the proxy as a SOCKS5 proxy (`scheme` socks5h or socks5).
    static func curl(
        _ stack: ProxyStack, _ url: String, scheme: String = "socks5h", _ extra: [String] = []
    ) throws -> CurlResult {
        try stack.curl(url, ["-x", "\(scheme)://\(stack.proxy.address)"] + extra)
    }

    @Test func curlThroughSOCKS5GetsTheVerdictsOfTheHTTPProxy() throws {
        let directory = try TemporaryDirectory("socks-curl")
        let reportPath = directory.file("report")
        let harPath = directory.file("session.har")
        let stack = try ProxyStack(arguments: ["--log-format", "json", "--report", reportPath, "--har", harPath])

        // HTTPS: intercepted with a minted leaf (curl trusts the proxy's CA), relayed to the origin.
        let https = try Self.curl(stack, "\(stack.api)/hello")
        #expect(https.httpCode == 200, "\(https.stderr)")
        #expect(https.bodyText == "hello from tls-origin\n")
        // Cleartext without an exception: the device's -1022 answer inside the tunnel.
        let blocked = try Self.curl(stack, "\(stack.plain)/hello")
        #expect(blocked.httpCode == 403, "\(blocked.stderr)")
        #expect(blocked.headers["x-ats-error"] == "-1022")
        // Cleartext with an exception: relayed.
        let allowed = try Self.curl(stack, "\(stack.legacy)/hello")
        #expect(allowed.httpCode == 200, "\(allowed.stderr)")
        #expect(allowed.bodyText == "hello from plain-origin\n")
        // socks5:// (curl resolves the name and sends an IPv4 address): the same verdict as absolute-form for that
        // address.
        let port = stack.plainOrigin.port
        let byAddress = try Self.curl(stack, "http://127.0.0.1:\(port)/hello", scheme: "socks5")
        let absolute = try stack.curl("http://127.0.0.1:\(port)/hello")
        #expect(byAddress.httpCode == absolute.httpCode, "\(byAddress.stderr)")
        #expect(byAddress.headers["x-ats-error"] == absolute.headers["x-ats-error"])

        let stopped = try Challenge.stop(stack)
        #expect(!stopped.stderr.contains("does not trust the proxy CA"), "\(stopped.stderr)")
        let api = try #require(Routes.records(stopped.records, stack.api).first)
        #expect(api["route"] as? String == "SOCKS5+TLS")
        #expect(api["result"] as? String == "completed")
        let plain = try #require(Routes.records(stopped.records, stack.plain).first)
        #expect(plain["route"] as? String == "SOCKS5+HTTP")
        #expect(plain["result"] as? String == "blocked-cleartext")
        #expect(plain["errorCode"] as? Int == -1022)
        let legacy = try #require(Routes.records(stopped.records, stack.legacy).first)
        #expect(legacy["route"] as? String == "SOCKS5+HTTP")
        #expect(legacy["status"] as? Int == 200)
        let addressRoutes = Routes.records(stopped.records, "http://127.0.0.1:\(port)/").compactMap {
            $0["route"] as? String
        }
        #expect(addressRoutes.sorted() == ["SOCKS5+HTTP", "absolute-form"], "\(addressRoutes)")

        let report = try Routes.report(reportPath)
        #expect(Routes.routes(report, "api.example.test") == ["SOCKS5+TLS"])
        #expect(Routes.routes(report, "plain.example.test") == ["SOCKS5+HTTP"])
        let har = try HARCheck(harPath)
        #expect(har.ok, "\(har.output)")
        #expect(har.entries(matching: stack.api).first?["route"] as? String == "SOCKS5+TLS")
    }

    /// The Python client on a plain socket: a fetch, then every hostile input, then a fetch again (the proxy kept
    /// serving), with the reply RFC 1928 gives each.
    @Test func aSocketClientAndHostileInputs() throws {
        let stack = try ProxyStack(arguments: ["--log-format", "json"])
        let port = stack.plainOrigin.port
        func run(_ mode: String, host: String = "legacy.example.test") throws -> String {
            let result = try E2E.run(
                "/usr/bin/python3",
                [
                    E2E.fixture("socks5_client.py"), "--proxy", stack.proxy.address, "--host", host, "--port",
                    "\(port)", "--path", "/hello", "--mode", mode, "--timeout", "10",
                ], timeout: 30)
            #expect(result.status == 0, "\(mode): \(result.stderrText)")
            return result.stdoutText
        }
        let first = try run("get")
        #expect(first.contains("METHOD 0500"), "\(first)")
        #expect(first.contains("REPLY 05000001000000000000"), "\(first)")
        #expect(first.contains("STATUS HTTP/1.1 200 OK"), "\(first)")
        #expect(first.contains("BODY hello from plain-origin"), "\(first)")

        #expect(try run("bind").contains("REPLY 0507"))
        #expect(try run("udp").contains("REPLY 0507"))
        #expect(try run("atyp").contains("REPLY 0508"))
        #expect(try run("auth-only").contains("REPLY 05ff"))
        #expect(try run("truncated").contains("CLOSED"))
        #expect(try run("socks4").contains("REPLY 005b000000000000"))
        // Garbage inside the tunnel: refused (--tunnel-unknown refuse), closed after the success reply.
        let garbage = try run("garbage")
        #expect(garbage.contains("REPLY 05000001000000000000") && garbage.contains("AFTER 0"), "\(garbage)")
        // Blocked cleartext through the same client.
        let blocked = try run("get", host: "plain.example.test")
        #expect(blocked.contains("STATUS HTTP/1.1 403 Forbidden"), "\(blocked)")

        let again = try run("get")
        #expect(again.contains("BODY hello from plain-origin"), "\(again)")

        let stopped = try Challenge.stop(stack)
        let socks4 = stopped.records.filter { $0["route"] as? String == "SOCKS4" }
        #expect(socks4.count == 1, "\(stopped.records)")
        #expect((socks4.first?["fix"] as? String)?.contains("socks5h://") == true)
        let raw = stopped.records.filter { $0["route"] as? String == "SOCKS5+raw" }
        #expect(raw.count == 1)
        #expect((raw.first?["rule"] as? String)?.contains("not TLS, not HTTP") == true, "\(raw)")
        // The hostile handshakes that named no usable target left no record.
        #expect(stopped.records.count == 5, "\(stopped.records.map { $0["url"] ?? "" })")
    }

    @Test(.timeLimit(.minutes(4))) func chromiumLoadsHTTPSThroughSOCKS5() throws {
        let chromium = try #require(
            LiveViewEndToEndTests.chromium, "chromium is not installed; run scripts/bootstrap test")
        let directory = try TemporaryDirectory("chromium-socks")
        let pki = try TestPKI(name: "web-origin", directory: directory)
        let origin = try Origin(
            name: "web", directory: directory, tls: try pki.leaf(["www.ats.test"], file: "web-origin"))
        defer { origin.child.stop() }
        let proxy = try ProxyProcess(
            plist: infoPlist(""), resolve: [("www.ats.test", origin.port)], upstreamCAs: [pki.caPath],
            arguments: ["--log-format", "json"])
        defer { proxy.stop() }
        let home = try ChromiumTrustEndToEndTests.home(directory, name: "trusting", trusting: proxy.caPath)
        let page = try ChromiumTrustEndToEndTests.dumpDOM(
            chromium, url: "https://www.ats.test:\(origin.port)/hello", proxy: proxy, home: home,
            directory: directory, scheme: "socks5")
        #expect(page.contains("hello from web"), "\(page.prefix(2000))")
        proxy.child.signal(SIGINT)
        #expect(proxy.child.wait(timeout: 20), "the proxy did not stop")
        let records = Challenge.jsonRecords(fileLines(proxy.logPath))
        let load = records.first { ($0["url"] as? String)?.contains("www.ats.test") == true }
        #expect(load?["route"] as? String == "SOCKS5+TLS", "\(records)")
    }
}

/// TLS to the proxy itself (an `https://` proxy), end to end: curl with `--proxy https://…` and `--proxy-cacert`
/// (absolute-form, CONNECT with TLS inside: TLS in TLS, CONNECT with cleartext inside), curl without the CA (the
/// refusal recorded), and headless Chromium with an `https://` proxy trusting the CA through NSS.
@Suite(.serialized) struct ProxyTLSEndToEndTests {
    typealias Challenge = ChallengeRunEndToEndTests
    typealias Routes = TunnelRoutesEndToEndTests

    @Test func curlThroughAnHTTPSProxyGetsTheVerdictsOfTheHTTPProxy() throws {
        let stack = try ProxyStack(arguments: ["--log-format", "json"])
        let proxy = ["-x", "https://localhost:\(stack.proxy.port)", "--proxy-cacert", stack.proxy.caPath]
        let https = try stack.curl("\(stack.api)/hello", proxy)
        #expect(https.httpCode == 200, "\(https.stderr)")
        #expect(https.bodyText == "hello from tls-origin\n")
        let blocked = try stack.curl("\(stack.plain)/hello", proxy)
        #expect(blocked.httpCode == 403, "\(blocked.stderr)")
        #expect(blocked.headers["x-ats-error"] == "-1022")
        let tunnelled = try stack.curl("\(stack.legacy)/hello", proxy + ["-p"])
        #expect(tunnelled.httpCode == 200, "\(tunnelled.stderr)")
        #expect(tunnelled.bodyText == "hello from plain-origin\n")
        // Without the CA for the proxy's own certificate the client refuses the handshake: nothing is loaded.
        let untrusting = try stack.curl(
            "\(stack.legacy)/hello?untrusted", ["-x", "https://localhost:\(stack.proxy.port)"])
        #expect(untrusting.httpCode == 0 && untrusting.exitCode != 0, "\(untrusting.stderr)")

        let stopped = try Challenge.stop(stack)
        #expect(Routes.records(stopped.records, stack.api).first?["route"] as? String == "TLS+CONNECT+TLS")
        let plain = try #require(Routes.records(stopped.records, stack.plain).first)
        #expect(plain["route"] as? String == "TLS+absolute-form")
        #expect(plain["result"] as? String == "blocked-cleartext")
        #expect(Routes.records(stopped.records, stack.legacy).first?["route"] as? String == "TLS+CONNECT+HTTP")
        let refused = stopped.records.filter { $0["route"] as? String == "TLS+CONNECT" }
        #expect(refused.count == 1, "\(stopped.records)")
        #expect(refused.first?["result"] as? String == "client-untrusted-ca")
        #expect((refused.first?["rule"] as? String)?.contains("TLS handshake with the proxy itself") == true)
        #expect(!stack.plainOrigin.requests.contains { $0.contains("untrusted") })
    }

    @Test(.timeLimit(.minutes(4))) func chromiumLoadsHTTPSThroughAnHTTPSProxy() throws {
        let chromium = try #require(
            LiveViewEndToEndTests.chromium, "chromium is not installed; run scripts/bootstrap test")
        let directory = try TemporaryDirectory("chromium-https-proxy")
        let pki = try TestPKI(name: "web-origin", directory: directory)
        let origin = try Origin(
            name: "web", directory: directory, tls: try pki.leaf(["www.ats.test"], file: "web-origin"))
        defer { origin.child.stop() }
        let proxy = try ProxyProcess(
            plist: infoPlist(""), resolve: [("www.ats.test", origin.port)], upstreamCAs: [pki.caPath],
            arguments: ["--log-format", "json"])
        defer { proxy.stop() }
        let home = try ChromiumTrustEndToEndTests.home(directory, name: "trusting", trusting: proxy.caPath)
        let page = try ChromiumTrustEndToEndTests.dumpDOM(
            chromium, url: "https://www.ats.test:\(origin.port)/hello", proxy: proxy, home: home,
            directory: directory, scheme: "https", proxyHost: "localhost")
        #expect(page.contains("hello from web"), "\(page.prefix(2000))")
        proxy.child.signal(SIGINT)
        #expect(proxy.child.wait(timeout: 20), "the proxy did not stop")
        let records = Challenge.jsonRecords(fileLines(proxy.logPath))
        let load = records.first { ($0["url"] as? String)?.contains("www.ats.test") == true }
        #expect(load?["route"] as? String == "TLS+CONNECT+TLS", "\(records)")
    }
}

/// `--proxy-auth`, end to end with curl: HTTP (absolute-form and CONNECT, 407 with a Basic challenge), SOCKS5
/// (username/password), TLS to the proxy; the PAC file stays open; the password never reaches the log.
@Suite(.serialized) struct ProxyAuthEndToEndTests {
    @Test func everyRouteNeedsTheCredentials() throws {
        let stack = try ProxyStack(environment: ["ATS_PROXY_PROXY_AUTH": "alice:s3cr:et"])
        let proxy = stack.proxy.address
        let none = try stack.curl("\(stack.legacy)/hello")
        #expect(none.httpCode == 407, "\(none.stderr)")
        #expect(none.headers["proxy-authenticate"]?.hasPrefix("Basic realm=\"ats-proxy\"") == true)
        #expect(try stack.curl("\(stack.legacy)/hello", ["-U", "alice:wrong"]).httpCode == 407)
        let absolute = try stack.curl("\(stack.legacy)/hello", ["-U", "alice:s3cr:et"])
        #expect(absolute.httpCode == 200, "\(absolute.stderr)")
        let tunnel = try stack.curl("\(stack.api)/hello", ["-U", "alice:s3cr:et"])
        #expect(tunnel.httpCode == 200, "\(tunnel.stderr)")
        #expect(try stack.curl("\(stack.api)/hello").exitCode != 0, "CONNECT without credentials is refused")

        let socks = try stack.curl("\(stack.legacy)/hello", ["-x", "socks5h://alice:s3cr:et@\(proxy)"])
        #expect(socks.httpCode == 200, "\(socks.stderr)")
        let socksWrong = try stack.curl("\(stack.legacy)/hello", ["-x", "socks5h://alice:guess@\(proxy)"])
        #expect(socksWrong.exitCode != 0 && socksWrong.httpCode == 0, "\(socksWrong.stderr)")
        let socksNone = try stack.curl("\(stack.legacy)/hello", ["-x", "socks5h://\(proxy)"])
        #expect(socksNone.exitCode != 0 && socksNone.httpCode == 0, "\(socksNone.stderr)")

        let tls = try stack.curl(
            "\(stack.legacy)/hello",
            [
                "-x", "https://localhost:\(stack.proxy.port)", "--proxy-cacert", stack.proxy.caPath, "-U",
                "alice:s3cr:et",
            ])
        #expect(tls.httpCode == 200, "\(tls.stderr)")

        let pac = try Curl.fetch("http://\(proxy)/proxy.pac", proxy: nil)
        #expect(pac.httpCode == 200 && pac.bodyText.contains("FindProxyForURL"), "\(pac.bodyText.prefix(200))")

        let stopped = try ChallengeRunEndToEndTests.stop(stack)
        #expect(stopped.stderr.contains("proxy-auth user alice, password hidden"), "\(stopped.stderr.prefix(3000))")
        #expect(!stopped.stderr.contains("s3cr"), "the password reached the log")
        #expect(!fileLines(stack.proxy.logPath).contains { $0.contains("s3cr") }, "the password reached the log")
        #expect(fileLines(stack.proxy.logPath).contains { $0.contains("proxy authentication required") })
        #expect(fileLines(stack.proxy.logPath).contains { $0.contains("proxy authentication failed") })
        // Only the three authorized loads reached the cleartext origin (absolute-form, SOCKS5, TLS to the proxy).
        #expect(stack.plainOrigin.requests.count == 3, "\(stack.plainOrigin.requests)")
    }
}
