import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `serverIPAddress` in the HAR: the peer of the upstream TCP connection that carried each request,
/// for a fresh connection, one kept by the session, one handed over by the loop's pool, a channel of a
/// shared HTTP/2 link, and a tunnel through `--upstream-proxy` (then the upstream proxy's address, as
/// browsers report it); absent for requests that reached no upstream.
@Suite(.serialized) struct HARServerAddressEndToEndTests {
    /// The HAR entries of `path` as written, after SIGUSR1 asked `proxy` to write it.
    static func entries(_ proxy: ProxyProcess, harPath: String) throws -> [[String: Any]] {
        try? FileManager.default.removeItem(atPath: harPath)
        proxy.child.signal(SIGUSR1)
        let data = try #require(
            E2E.poll(timeout: 10) { FileManager.default.contents(atPath: harPath) }, "no HAR: \(proxy.log)")
        let json = try JSONSerialization.jsonObject(with: data)
        let log = try #require((json as? [String: Any])?["log"] as? [String: Any])
        return try #require(log["entries"] as? [[String: Any]])
    }

    /// The entries whose request URL contains `text`.
    static func matching(_ entries: [[String: Any]], _ text: String) -> [[String: Any]] {
        entries.filter { (($0["request"] as? [String: Any])?["url"] as? String)?.contains(text) == true }
    }

    static func connectTiming(_ entry: [String: Any]) -> Double? {
        (entry["timings"] as? [String: Any])?["connect"] as? Double
    }

    @Test func freshKeptAndPooledConnectionsCarryTheOriginsAddressAndUnsentRequestsNone() throws {
        let refusedPort = try E2E.freePort()
        let directory = try TemporaryDirectory("har-ip")
        let harPath = directory.file("session.har")
        // One loop: the second client's request finds the first one's connection in that loop's pool.
        let stack = try ProxyStack(arguments: [
            "--har", harPath, "--loops", "1", "--resolve", "refused.example.test:\(refusedPort):127.0.0.1",
        ])
        // Two requests in one curl run share its client connection (curl fetches the URLs in order): the
        // second rides the upstream connection the session keeps.
        let first = try stack.curl("\(stack.api)/hello?n=kept", ["\(stack.api)/hello?n=fresh"])
        #expect(first.httpCode == 200, "\(first.stderr)")
        stack.proxy.waitForLog("n=kept")
        // A new client connection: the pool hands over the parked upstream connection.
        let pooled = try stack.curl("\(stack.api)/hello?n=pooled")
        #expect(pooled.httpCode == 200, "\(pooled.stderr)")
        // Blocked (-1022) after a forwarded cleartext request on the same client connection, whose upstream
        // it must not claim; and a connection the origin's port refuses.
        let blocked = try stack.curl("\(stack.plain)/hello?n=blocked", ["\(stack.legacy)/hello?n=before-block"])
        // (curl writes the second body to stdout, before the second status.)
        #expect(blocked.writeOut.hasPrefix("200") && blocked.writeOut.hasSuffix("403"), "\(blocked.stderr)")
        #expect(blocked.writeOut.contains("Task <") && blocked.writeOut.contains(">.<2>"), "not the same connection")
        let refused = try stack.curl("https://refused.example.test:\(refusedPort)/nothing?n=refused")
        #expect(refused.httpCode == 502 || refused.httpCode == 504, "\(refused.statusLine)")
        stack.proxy.waitForLog("refused.example.test")

        let entries = try Self.entries(stack.proxy, harPath: harPath)
        for tag in ["fresh", "kept", "pooled", "before-block"] {
            let entry = try #require(Self.matching(entries, "n=\(tag)").first, "no entry for \(tag): \(entries)")
            #expect(entry["serverIPAddress"] as? String == "127.0.0.1", "\(tag): \(entry)")
        }
        // The three kinds of upstream really were exercised: only the first request timed a connect (a
        // request handed a kept or pooled connection has no connect phase).
        #expect((Self.connectTiming(Self.matching(entries, "n=fresh")[0]) ?? -1) >= 0)
        #expect(Self.connectTiming(Self.matching(entries, "n=kept")[0]) == -1)
        #expect(Self.connectTiming(Self.matching(entries, "n=pooled")[0]) == -1)
        for tag in ["blocked", "refused"] {
            let entry = try #require(Self.matching(entries, "n=\(tag)").first, "no entry for \(tag)")
            #expect(entry["serverIPAddress"] == nil, "\(tag) reached no upstream: \(entry)")
        }
    }

    @Test func requestsOnASharedHTTP2LinkCarryItsAddress() throws {
        let directory = try TemporaryDirectory("har-ip-h2")
        let harPath = directory.file("session.har")
        let pki = try TestPKI(name: "har-ip-h2-ca", directory: directory)
        let leaf = try pki.leaf(["a.test"], file: "har-ip-h2")
        let origin = try H2Origin(directory: directory, leaf: leaf, alpn: "h2")
        let port = origin.port
        let proxy = try ProxyProcess(
            plist: infoPlist(""), resolve: [("a.test", port)], upstreamCAs: [pki.caPath],
            arguments: ["--har", harPath, "--loops", "1"])
        // The first client's request promotes its new connection to a shared link; the second client's
        // request gets a channel on that link.
        for tag in ["link", "channel"] {
            let result = try Curl.fetch("https://a.test:\(port)/tiny?n=\(tag)", proxy: proxy, cacert: proxy.caPath)
            #expect(result.httpCode == 200, "\(result.stderr) \(proxy.log)")
            proxy.waitForLog("n=\(tag)")
        }
        let opened = origin.lines.filter { $0.contains("CONNECTION-OPENED") }
        #expect(opened.count == 1 && opened.first?.contains("protocol=h2") == true, "\(origin.lines)")
        let entries = try Self.entries(proxy, harPath: harPath)
        for tag in ["link", "channel"] {
            let entry = try #require(Self.matching(entries, "n=\(tag)").first, "no entry for \(tag): \(entries)")
            #expect(entry["serverIPAddress"] as? String == "127.0.0.1", "\(tag): \(entry)")
        }
    }

    @Test func throughAnUpstreamProxyTheAddressIsTheUpstreamProxys() throws {
        // The chained proxy listens on ::1 and tunnels to the origin on 127.0.0.1: the HAR must name ::1.
        let chainDirectory = try TemporaryDirectory("har-ip-chain")
        let chainLog = chainDirectory.file("chain.log")
        let chain = try Child(
            executable: "/usr/bin/python3",
            arguments: [
                E2E.fixture("connect_proxy.py"), "--bind", "::1", "--log", chainLog, "--lifetime", "120",
            ], directory: chainDirectory, label: "chain")
        defer { chain.stop() }
        let chainPort = try #require(
            E2E.poll(timeout: 10) { () -> Int? in
                chain.stdoutText.split(separator: "\n").first { $0.hasPrefix("READY ") }.flatMap {
                    Int($0.dropFirst(6))
                }
            }, "connect_proxy.py did not start on ::1: \(chain.stderrText)")
        let directory = try TemporaryDirectory("har-ip-upstream")
        let harPath = directory.file("session.har")
        let stack = try ProxyStack(arguments: ["--har", harPath, "--upstream-proxy", "http://[::1]:\(chainPort)"])
        let result = try stack.curl("\(stack.api)/hello?n=chained")
        #expect(result.httpCode == 200, "\(result.stderr) \(stack.proxy.log)")
        let chainLines = String(decoding: FileManager.default.contents(atPath: chainLog) ?? Data(), as: UTF8.self)
        #expect(chainLines.contains("CONNECT api.example.test:\(stack.tlsOrigin.port)"), "\(chainLines)")
        stack.proxy.waitForLog("n=chained")
        let entries = try Self.entries(stack.proxy, harPath: harPath)
        let entry = try #require(Self.matching(entries, "n=chained").first, "\(entries)")
        #expect(entry["serverIPAddress"] as? String == "::1", "\(entry)")
    }
}
