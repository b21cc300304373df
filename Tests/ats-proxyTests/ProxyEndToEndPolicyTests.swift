import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// The log with volatile values replaced: console timestamps → `<T>`, object addresses → `<PTR>`,
/// durations and client ports → placeholders.
func normalizedLog(_ log: String) -> String {
    var text = log
    let replacements = [
        (#"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}[+-]\d{4} "#, "<T> "),
        (#"0x6000[0-9a-f]{8}"#, "<PTR>"),
        (#"transaction_duration_ms=\d+"#, "transaction_duration_ms=<MS>"),
        (#"client=127\.0\.0\.1:\d+"#, "client=127.0.0.1:<PORT>"),
    ]
    for (pattern, template) in replacements {
        text = text.replacingOccurrences(of: pattern, with: template, options: .regularExpression)
    }
    return text
}

/// The task UUID of the first `Task <UUID>.<N>` in the log.
func firstTaskUUID(_ log: String) -> String? {
    guard let range = log.range(of: #"Task <[0-9A-F-]{36}>"#, options: .regularExpression) else { return nil }
    return String(log[range].dropFirst(6).dropLast())
}

/// Decisions and their diagnostics: blocked cleartext, TLS version and trust failures, success;
/// report and upgrade modes; passthrough of pinned hosts; WebSockets.
@Suite(.serialized) struct ProxyEndToEndPolicyTests {
    static let tls11 = "tls11.example.test"
    static let untrusted = "untrusted.example.test"

    @Test func blockedCleartextNeverReachesTheOriginAndLogsCFNetworkLines() throws {
        let stack = try ProxyStack()
        let url = "\(stack.plain)/hello"
        let result = try stack.curl(url)
        #expect(result.httpCode == 403)
        #expect(result.statusLine == "HTTP/1.1 403 Forbidden")
        #expect(result.headers["x-ats-error"] == "-1022")
        let rule = try #require(result.headers["x-ats-rule"])
        #expect(!rule.isEmpty)
        #expect(
            result.bodyText.contains(
                "NSURLErrorDomain -1022: The resource could not be loaded because the App Transport Security policy requires the use of a secure connection."
            ), "\(result.bodyText)")
        #expect(result.bodyText.contains(url))
        #expect(result.bodyText.contains("Fix: "))
        #expect(stack.plainOrigin.requests.isEmpty, "the origin was contacted: \(stack.plainOrigin.requests)")

        let log = normalizedLog(stack.proxy.waitForLog("ats-proxy: GET \(url)"))
        let uuid = try #require(firstTaskUUID(log), "\(log)")
        let pid = stack.proxy.child.pid
        let prefix = "<T> E2EApp[\(pid):\(pid + 1)]"
        let description =
            "The resource could not be loaded because the App Transport Security policy requires the use of a secure connection."
        let expected = [
            "\(prefix) App Transport Security has blocked a cleartext HTTP connection to plain.example.test since it is insecure. Use HTTPS instead or add this domain to Exception Domains in your Info.plist.",
            "\(prefix) Cannot start load of Task <\(uuid)>.<1> since it does not conform to ATS policy",
            "\(prefix) Task <\(uuid)>.<1> finished with error [-1022] Error Domain=NSURLErrorDomain Code=-1022 \"\(description)\" UserInfo={NSLocalizedDescription=\(description), NSErrorFailingURLStringKey=\(url), NSErrorFailingURLKey=\(url), _NSURLErrorRelatedURLSessionTaskErrorKey=(",
            "    \"LocalDataTask <\(uuid)>.<1>\"",
            "), _NSURLErrorFailingURLSessionTaskErrorKey=LocalDataTask <\(uuid)>.<1>, NSUnderlyingError=<PTR> {Error Domain=kCFErrorDomainCFNetwork Code=-1022 \"(null)\"}}",
            "[Summary] Task <\(uuid)>.<1> summary for task failure {transaction_duration_ms=<MS>, response_status=403, protocol=\"http/1.1\", request_bytes=0, response_bytes=\(result.body.count), client=127.0.0.1:<PORT>}",
            // The rule's closing full stop gives way to "; fix: …".
            "ats-proxy: GET \(url) → blocked -1022: \(rule.hasSuffix(".") ? String(rule.dropLast()) : rule); fix: ",
        ].joined(separator: "\n")
        #expect(log.contains(expected), "log was:\n\(log)")
        // The response body quotes the same device lines.
        #expect(normalizedLog(result.bodyText).contains(expected.components(separatedBy: "\n")[1]))
    }

    @Test func tlsVersionFailureIs1200With9836AndExactLines() throws {
        let stack = try ProxyStack { directory, pki in
            let leaf = try pki.leaf([Self.tls11], file: "tls11")
            return [(Self.tls11, try Origin(name: "tls11", directory: directory, tls: leaf, tlsVersion: "1.1"))]
        }
        let url = stack.url(Self.tls11)
        let result = try stack.curl(url)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.httpCode == 502)
        #expect(result.headers["x-ats-error"] == "-1200")
        #expect(result.headers["x-ats-stream-error"] == "3:-9836")
        #expect(result.headers["x-ats-rule"]?.isEmpty == false)
        #expect(result.bodyText.contains("NSURLErrorDomain -1200 [3:-9836]"), "\(result.bodyText)")
        // The fix: the proxy saw only a refused handshake, so it says what is known and names diagnose.
        let fix = try #require(result.headers["x-ats-fix"])
        #expect(fix.contains("set NSExceptionMinimumTLSVersion in NSExceptionDomains > \(Self.tls11)"), "\(fix)")
        #expect(fix.contains("'ats-proxy diagnose \(url)'"), "\(fix)")
        #expect(result.bodyText.contains("Fix: the server refused TLS 1.2 and later"), "\(result.bodyText)")

        let log = normalizedLog(stack.proxy.waitForLog("ats-proxy: GET \(url)"))
        let uuid = try #require(firstTaskUUID(log), "\(log)")
        let pid = stack.proxy.child.pid
        let prefix = "<T> E2EApp[\(pid):\(pid + 1)]"
        let description = "A TLS error caused the secure connection to fail."
        let expected = [
            "\(prefix) Connection 1: encountered error(3:-9836)",
            "\(prefix) Connection 1: unable to determine interface type without an established connection",
            "\(prefix) Task <\(uuid)>.<1> HTTP load failed, 0/0 bytes (error code: -1200 [3:-9836])",
            "\(prefix) Task <\(uuid)>.<1> finished with error [-1200] Error Domain=NSURLErrorDomain Code=-1200 \"\(description)\" UserInfo={NSLocalizedDescription=\(description), NSLocalizedRecoverySuggestion=Would you like to connect to the server anyway?, _kCFStreamErrorDomainKey=3, _kCFStreamErrorCodeKey=-9836, NSErrorFailingURLStringKey=\(url), NSErrorFailingURLKey=\(url), _NSURLErrorRelatedURLSessionTaskErrorKey=(",
            "    \"LocalDataTask <\(uuid)>.<1>\"",
            "), _NSURLErrorFailingURLSessionTaskErrorKey=LocalDataTask <\(uuid)>.<1>, NSUnderlyingError=<PTR> {Error Domain=kCFErrorDomainCFNetwork Code=-1200 \"(null)\" UserInfo={_kCFNetworkCFStreamSSLErrorOriginalValue=-9836, _kCFStreamErrorDomainKey=3, _kCFStreamErrorCodeKey=-9836}}}",
            "[Summary] Task <\(uuid)>.<1> summary for task failure {transaction_duration_ms=<MS>, response_status=502, protocol=\"http/1.1\", request_bytes=0, response_bytes=\(result.body.count), client=127.0.0.1:<PORT>}",
            "ats-proxy: GET \(url) → failed -1200 [3:-9836]: ",
        ].joined(separator: "\n")
        #expect(log.contains(expected), "log was:\n\(log)")
    }

    @Test func trustFailureIs1200With9802AndATSFailedSystemTrust() throws {
        let stack = try ProxyStack { directory, _ in
            let stranger = try TestPKI(name: "stranger-ca", directory: directory)
            let leaf = try stranger.leaf([Self.untrusted], file: "untrusted")
            return [(Self.untrusted, try Origin(name: "untrusted", directory: directory, tls: leaf))]
        }
        let url = stack.url(Self.untrusted)
        let result = try stack.curl(url)
        #expect(result.httpCode == 502)
        #expect(result.headers["x-ats-error"] == "-1200")
        #expect(result.headers["x-ats-stream-error"] == "3:-9802")
        #expect(result.bodyText.contains("NSURLErrorDomain -1200 [3:-9802]"), "\(result.bodyText)")
        #expect(stack.extras[Self.untrusted]?.requests.contains { $0.hasPrefix("GET ") } == false)
        // A trust failure: the delegate route, and what the server must change.
        let fix = try #require(result.headers["x-ats-fix"])
        #expect(fix.hasPrefix("no Info.plist change alone can allow this"), "\(fix)")
        #expect(fix.contains("otherwise the server must chain to a root the device trusts"), "\(fix)")

        let log = normalizedLog(stack.proxy.waitForLog("ats-proxy: GET \(url)"))
        let uuid = try #require(firstTaskUUID(log), "\(log)")
        let pid = stack.proxy.child.pid
        let prefix = "<T> E2EApp[\(pid):\(pid + 1)]"
        let description = "A TLS error caused the secure connection to fail."
        let expected = [
            "\(prefix) ATS failed system trust",
            "\(prefix) Connection 1: system TLS Trust evaluation failed(-9802)",
            "\(prefix) Connection 1: TLS Trust encountered error 3:-9802",
            "\(prefix) Connection 1: encountered error(3:-9802)",
            "\(prefix) Connection 1: unable to determine interface type without an established connection",
            "\(prefix) Task <\(uuid)>.<1> HTTP load failed, 0/0 bytes (error code: -1200 [3:-9802])",
            "\(prefix) Task <\(uuid)>.<1> finished with error [-1200] Error Domain=NSURLErrorDomain Code=-1200 \"\(description)\" UserInfo={NSLocalizedDescription=\(description), NSLocalizedRecoverySuggestion=Would you like to connect to the server anyway?, _kCFStreamErrorDomainKey=3, _kCFStreamErrorCodeKey=-9802, NSErrorFailingURLStringKey=\(url), NSErrorFailingURLKey=\(url), _NSURLErrorRelatedURLSessionTaskErrorKey=(",
            "    \"LocalDataTask <\(uuid)>.<1>\"",
            "), _NSURLErrorFailingURLSessionTaskErrorKey=LocalDataTask <\(uuid)>.<1>, NSUnderlyingError=<PTR> {Error Domain=kCFErrorDomainCFNetwork Code=-1200 \"(null)\" UserInfo={_kCFNetworkCFStreamSSLErrorOriginalValue=-9802, _kCFStreamErrorDomainKey=3, _kCFStreamErrorCodeKey=-9802}}}",
            "[Summary] Task <\(uuid)>.<1> summary for task failure {transaction_duration_ms=<MS>, response_status=502, protocol=\"http/1.1\", request_bytes=0, response_bytes=\(result.body.count), client=127.0.0.1:<PORT>}",
            "ats-proxy: GET \(url) → failed -1200 [3:-9802]: ",
        ].joined(separator: "\n")
        #expect(log.contains(expected), "log was:\n\(log)")
        #expect(log.contains("; fix: no Info.plist change alone can allow this"), "log was:\n\(log)")
    }

    /// Origin leaves with varied properties: an RSA-2048 leaf passes; ATS trust failures are all
    /// -1200 [3:-9802] with the reason in X-ATS-Rule.
    @Test func originCertificatesOfVariedProperties() throws {
        let day = 86400.0
        let variants: [(host: String, key: PrivateKey.Kind, customize: (inout CertificateSpec) -> Void)] = [
            ("rsa.example.test", .rsa(bits: 2048), { _ in }),
            (
                "expired.example.test", .p256,
                {
                    $0.notBefore = Date() - 400 * day; $0.notAfter = Date() - 10 * day
                }
            ),
            (
                "mismatch.example.test", .p256,
                {
                    $0.dnsNames = ["other.example.test"]; $0.commonName = "other.example.test"
                }
            ),
            ("noeku.example.test", .p256, { $0.extendedKeyUsage = nil }),
        ]
        let stack = try ProxyStack { directory, pki in
            try variants.map { variant in
                let leaf = try pki.leaf(
                    [variant.host], file: variant.host, key: variant.key, customize: variant.customize)
                return (variant.host, try Origin(name: variant.host, directory: directory, tls: leaf))
            }
        }
        let rsa = try stack.curl(stack.url("rsa.example.test"))
        #expect(rsa.httpCode == 200, "\(rsa.bodyText)")
        #expect(rsa.bodyText == "hello from rsa.example.test\n")
        let expectedRule = [
            "expired.example.test": "expired on",
            "mismatch.example.test": "the certificate is for other.example.test, not mismatch.example.test",
            "noeku.example.test": "extended key usage",
        ]
        for (host, words) in expectedRule.sorted(by: { $0.key < $1.key }) {
            let result = try stack.curl(stack.url(host))
            #expect(result.httpCode == 502, "\(host): \(result.bodyText)")
            #expect(result.headers["x-ats-error"] == "-1200", "\(host)")
            #expect(result.headers["x-ats-stream-error"] == "3:-9802", "\(host)")
            #expect(result.headers["x-ats-rule"]?.contains(words) == true, "\(host): \(result.headers)")
            #expect(stack.extras[host]?.requests.contains { $0.hasPrefix("GET") } == false, "\(host)")
        }
    }

    @Test func successLogsTheSummaryAndNoFailureLines() throws {
        let stack = try ProxyStack()
        let url = "\(stack.api)/hello"
        let first = try stack.curl(url)
        #expect(first.httpCode == 200)
        let log = normalizedLog(stack.proxy.waitForLog("ats-proxy: GET \(url)"))
        let uuid = try #require(firstTaskUUID(log), "\(log)")
        let lines = log.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("ats-proxy ") }
            .filter { !$0.hasPrefix("  ") }
        #expect(
            lines.first
                == "[Summary] Task <\(uuid)>.<1> summary for task success {transaction_duration_ms=<MS>, response_status=200, protocol=\"http/1.1\", request_bytes=0, response_bytes=22, client=127.0.0.1:<PORT>}",
            "\(log)")
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.last?.hasPrefix("ats-proxy: GET \(url) → allowed 200 (") == true, "\(lines)")
        #expect(!log.contains("error"), "\(log)")
    }

    @Test func diagnosticsLevel3AddsBlocksWithRedactedHeadersAndJSONLines() throws {
        let stack = try ProxyStack(arguments: ["--diagnostics", "3"])
        let url = "\(stack.api)/hello"
        _ = try stack.curl(url, ["-H", "Authorization: Bearer secret-token", "-H", "Cookie: a=b"])
        let log = stack.proxy.waitForLog("ats-proxy: GET \(url)")
        #expect(log.contains("CFNetwork Diagnostics [3:1] "), "\(log)")
        #expect(log.contains("Protocol Enqueue: request GET \(url)"), "\(log)")
        #expect(log.contains("Response Headers: dict ["), "\(log)")
        #expect(log.contains("Authorization: <redacted 19 bytes>"), "\(log)")
        #expect(log.contains("Cookie: <redacted 3 bytes>"), "\(log)")
        #expect(!log.contains("secret-token"))

        let json = try ProxyStack(arguments: ["--log-format", "json"])
        _ = try json.curl("\(json.api)/hello", ["-H", "Authorization: Bearer secret-token"])
        _ = try json.curl("\(json.plain)/hello")
        let text = json.proxy.waitForLog("plain.example.test")
        let objects = text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["url"] != nil }
        #expect(objects.count == 2, "\(text)")
        #expect(objects.first?["status"] as? Int == 200)
        #expect(objects.first?["method"] as? String == "GET")
        #expect(objects.last?["errorCode"] as? Int == -1022)
        #expect(objects.last?["result"] as? String == "blocked-cleartext")
        #expect(!text.contains("secret-token"))
    }

    // MARK: - Modes

    @Test func reportModeLetsViolationsThroughAndLogsThem() throws {
        // iOS 18.0: the TLS 1.1 exception the fix names has no effect on the default platform (26+ floor).
        let stack = try ProxyStack(arguments: ["--mode", "report", "--platform", "ios:18.0"]) { directory, pki in
            let leaf = try pki.leaf([Self.tls11], file: "tls11")
            return [(Self.tls11, try Origin(name: "tls11", directory: directory, tls: leaf, tlsVersion: "1.1"))]
        }
        let url = "\(stack.plain)/hello"
        let result = try stack.curl(url)
        #expect(result.httpCode == 200)
        #expect(result.bodyText == "hello from plain-origin\n")
        // The answer says it would have failed on a device.
        #expect(result.headers["x-ats-would-fail"] == "-1022")
        #expect(result.headers["x-ats-error"] == "-1022")
        #expect(result.headers["x-ats-fix"]?.contains("NSExceptionAllowsInsecureHTTPLoads") == true)
        #expect(stack.plainOrigin.requests.count == 1)
        let log = stack.proxy.waitForLog("ats-proxy: GET \(url)")
        #expect(log.contains("ats-proxy: GET \(url) → reported -1022 (ATS violation, let through): "), "\(log)")
        #expect(log.contains("App Transport Security has blocked a cleartext HTTP connection to plain.example.test"))

        // A TLS 1.1 server violates ATS, but report mode connects without the ATS constraints.
        let old = stack.url(Self.tls11)
        let legacy = try stack.curl(old)
        #expect(legacy.httpCode == 200, "\(legacy.bodyText)")
        #expect(legacy.bodyText == "hello from tls11\n")
        #expect(legacy.headers["x-ats-would-fail"] == "-1200 [3:-9836]")
        #expect(
            legacy.headers["x-ats-fix"]?.hasPrefix(
                "add NSExceptionDomains > \(Self.tls11) with NSExceptionMinimumTLSVersion = TLSv1.1") == true,
            "\(legacy.headers)")
        let after = stack.proxy.waitForLog("ats-proxy: GET \(old)")
        #expect(
            after.contains("ats-proxy: GET \(old) → reported -1200 [3:-9836] (ATS violation, let through)"), "\(after)")
    }

    @Test func cleartextUpgradeFetchesTheHTTPSTwin() throws {
        // The stack's origins, with a second proxy whose --upgrade-port is the TLS origin's port.
        let stack = try ProxyStack()
        let upgraded = try ProxyProcess(
            plist: infoPlist(""),
            resolve: [("plain.example.test", stack.tlsOrigin.port), ("plain.example.test", stack.plainOrigin.port)],
            upstreamCAs: [stack.pki.caPath],
            arguments: ["--cleartext", "upgrade", "--upgrade-port", "\(stack.tlsOrigin.port)"])
        defer { upgraded.stop() }
        let url = "http://plain.example.test:\(stack.plainOrigin.port)/hello"
        let result = try Curl.fetch(url, proxy: upgraded, directory: stack.directory)
        #expect(result.httpCode == 200, "\(result.bodyText)")
        #expect(result.bodyText == "hello from tls-origin\n")
        #expect(stack.plainOrigin.requests.isEmpty, "the cleartext origin was contacted")
        #expect(stack.tlsOrigin.requests == ["GET /hello Host=plain.example.test:\(stack.tlsOrigin.port)"])
        let log = upgraded.waitForLog("ats-proxy: GET ")
        #expect(log.contains("upgraded to https://"), "\(log)")
    }

    @Test func cleartextUpgradeThatFailsIsBlockedWithTheTLSCodes() throws {
        let stack = try ProxyStack { directory, pki in
            let leaf = try pki.leaf([Self.tls11], file: "tls11")
            return [(Self.tls11, try Origin(name: "tls11", directory: directory, tls: leaf, tlsVersion: "1.1"))]
        }
        let tls11 = try #require(stack.extras[Self.tls11])
        let plain = try Origin(name: "plain11", directory: stack.directory)
        let upgraded = try ProxyProcess(
            plist: infoPlist(""), resolve: [(Self.tls11, tls11.port), (Self.tls11, plain.port)],
            upstreamCAs: [stack.pki.caPath], arguments: ["--cleartext", "upgrade", "--upgrade-port", "\(tls11.port)"])
        defer { upgraded.stop() }
        let result = try Curl.fetch(
            "http://\(Self.tls11):\(plain.port)/hello", proxy: upgraded, directory: stack.directory)
        #expect([403, 502].contains(result.httpCode), "\(result.statusLine)")
        #expect(result.headers["x-ats-error"] == "-1200")
        #expect(result.headers["x-ats-stream-error"] == "3:-9836")
        #expect(plain.requests.isEmpty)
    }

    // MARK: - Passthrough

    static func pinnedDomains(_ host: String, _ spki: String) -> String {
        """
        <key>NSPinnedDomains</key><dict><key>\(host)</key><dict><key>NSPinnedLeafIdentities</key>\
        <array><dict><key>SPKI-SHA256-BASE64</key><string>\(spki)</string></dict></array></dict></dict>
        """
    }

    @Test func pinnedHostIsTunnelledWithTheOriginsCertificate() throws {
        let directory = try TemporaryDirectory("pinned")
        let pki = try TestPKI(name: "pinned-ca", directory: directory)
        let leaf = try pki.leaf(["pinned.example.test"], file: "pinned")
        let origin = try Origin(name: "pinned", directory: directory, tls: leaf)
        let proxy = try ProxyProcess(
            plist: infoPlist(Self.pinnedDomains("pinned.example.test", leaf.spkiBase64)),
            resolve: [("pinned.example.test", origin.port)], upstreamCAs: [pki.caPath])
        let url = "https://pinned.example.test:\(origin.port)/hello"
        // Trusting only the ORIGIN's CA works: the client sees the origin's own certificate.
        let direct = try Curl.fetch(url, proxy: proxy, cacert: pki.caPath, directory: directory)
        #expect(direct.exitCode == 0, "\(direct.stderr)")
        #expect(direct.httpCode == 200)
        #expect(direct.bodyText == "hello from pinned\n")
        // Trusting only the proxy's CA fails: nothing was minted for this host.
        let minted = try Curl.fetch(url, proxy: proxy, cacert: proxy.caPath, directory: directory)
        #expect(minted.exitCode == 60, "curl exit \(minted.exitCode): \(minted.stderr)")
        // The probe handshake plus the tunnelled one.
        #expect(origin.requests.filter { $0.hasPrefix("GET /hello") }.count == 1, "\(origin.requests)")

        // --passthrough for a host without pins behaves the same way.
        let other = try pki.leaf(["raw.example.test"], file: "raw")
        let rawOrigin = try Origin(name: "raw", directory: directory, tls: other)
        let passthrough = try ProxyProcess(
            plist: infoPlist(""), resolve: [("raw.example.test", rawOrigin.port)], upstreamCAs: [pki.caPath],
            arguments: ["--passthrough", ".example.test"])
        let raw = try Curl.fetch(
            "https://raw.example.test:\(rawOrigin.port)/hello", proxy: passthrough, cacert: pki.caPath,
            directory: directory)
        #expect(raw.httpCode == 200, "\(raw.stderr)")
        #expect(raw.bodyText == "hello from raw\n")
    }

    @Test func pinMismatchRefusesTheConnectWith502() throws {
        let directory = try TemporaryDirectory("pin-mismatch")
        let pki = try TestPKI(name: "pinned-ca", directory: directory)
        let leaf = try pki.leaf(["pinned.example.test"], file: "pinned")
        let origin = try Origin(name: "pinned", directory: directory, tls: leaf)
        let wrongPin = Data(repeating: 7, count: 32).base64EncodedString()
        let proxy = try ProxyProcess(
            plist: infoPlist(Self.pinnedDomains("pinned.example.test", wrongPin)),
            resolve: [("pinned.example.test", origin.port)], upstreamCAs: [pki.caPath])
        let client = try RawClient(port: proxy.port)
        client.send(
            "CONNECT pinned.example.test:\(origin.port) HTTP/1.1\r\nHost: pinned.example.test:\(origin.port)\r\n\r\n")
        let response = try #require(client.readResponse())
        #expect(response.head.hasPrefix("HTTP/1.1 502 "), "\(response.head)")
        #expect(response.head.headerValue("X-ATS-Error") == "-1200")
        #expect(response.head.headerValue("X-ATS-Stream-Error") == "3:-9802")
        #expect(response.head.headerValue("X-ATS-Rule")?.contains("NSPinnedLeafIdentities") == true, "\(response.head)")
        #expect(client.readToEnd().closed, "the connection is closed after the refusal")
        #expect(origin.requests.allSatisfy { !$0.hasPrefix("GET") })

        let curl = try Curl.fetch(
            "https://pinned.example.test:\(origin.port)/hello", proxy: proxy, cacert: pki.caPath, directory: directory)
        #expect(curl.exitCode == 56, "curl: \(curl.stderr)")
        #expect(curl.stderr.contains("502"), "\(curl.stderr)")
    }

    // MARK: - WebSockets

    @Test func webSocketEchoThroughWSAndWSS() throws {
        let stack = try ProxyStack()
        let ws = try E2E.run(
            "/usr/bin/python3",
            [E2E.fixture("wsclient.py"), "--proxy", stack.proxy.address, "--url", "\(stack.legacy)/ws"], timeout: 20)
        #expect(ws.stdoutText == "ECHO OK\n", "ws://: \(ws.stdoutText) \(ws.stderrText)")

        let wss = try E2E.run(
            "/usr/bin/python3",
            [
                E2E.fixture("wsclient.py"), "--proxy", stack.proxy.address, "--url",
                "wss://api.example.test:\(stack.tlsOrigin.port)/ws", "--cacert", stack.proxy.caPath,
            ], timeout: 20)
        #expect(wss.stdoutText == "ECHO OK\n", "wss://: \(wss.stdoutText) \(wss.stderrText)")

        // ws:// is a cleartext load: blocked for a host without an exception.
        let blocked = try E2E.run(
            "/usr/bin/python3",
            [E2E.fixture("wsclient.py"), "--proxy", stack.proxy.address, "--url", "\(stack.plain)/ws"], timeout: 20)
        #expect(blocked.stdoutText.hasPrefix("FAIL upgrade answered HTTP/1.1 403"), "\(blocked.stdoutText)")
        #expect(stack.plainOrigin.requests.allSatisfy { $0.contains("legacy.example.test") })
    }
}
