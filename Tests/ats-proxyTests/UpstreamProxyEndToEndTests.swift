import ATSTestSupport
import Foundation
import Testing

/// `Fixtures/connect_proxy.py` started by a test: a CONNECT proxy on 127.0.0.1 that tunnels every
/// host name to 127.0.0.1 and logs what it was asked (`CONNECT host:port auth=… host=…`).
final class ChainProxy: @unchecked Sendable {
    let port: Int
    let logPath: String
    let child: Child

    init(directory: TemporaryDirectory, user: String? = nil, password: String? = nil) throws {
        logPath = directory.file("chain-\(UUID().uuidString.prefix(6)).log")
        var arguments = [E2E.fixture("connect_proxy.py"), "--log", logPath, "--lifetime", "120"]
        if let user { arguments += ["--user", user, "--password", password ?? ""] }
        child = try Child(executable: "/usr/bin/python3", arguments: arguments, directory: directory, label: "chain")
        let ready = E2E.poll(timeout: 10) { [child] () -> Int? in
            guard let line = child.stdoutText.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) else {
                return nil
            }
            return Int(line.dropFirst(6))
        }
        guard let ready else {
            child.stop()
            throw E2E.Failure("connect_proxy.py did not start: \(child.stderrText)")
        }
        port = ready
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// The CONNECT lines received so far.
    var requests: [String] {
        String(decoding: FileManager.default.contents(atPath: logPath) ?? Data(), as: UTF8.self)
            .split(separator: "\n").map(String.init)
    }

    deinit { child.stop() }
}

/// `--upstream-proxy` through a real second proxy: https is tunnelled with CONNECT and judged on the
/// origin's own TLS; cleartext http goes through CONNECT too; the upstream proxy's refusals (407,
/// 502) and its absence become 502 answers with X-ATS-Error -1004 and a detail that names it.
@Suite(.serialized) struct UpstreamProxyEndToEndTests {
    static let tls11 = "old.example.test"

    @Test(arguments: ["epoll", "dispatch"])
    func httpsAndHTTPGoThroughTheChainAndTLSIsJudgedOnTheOrigin(eventLoop: String) throws {
        let chainDirectory = try TemporaryDirectory("chain")
        let chain = try ChainProxy(directory: chainDirectory)
        let stack = try ProxyStack(arguments: [
            "--upstream-proxy", chain.url, "--event-loop", eventLoop, "--ignore-hosts", #"^plain\.example\.test:"#,
        ]) { directory, pki in
            let leaf = try pki.leaf([Self.tls11], file: "tls11")
            return [(Self.tls11, try Origin(name: "tls11", directory: directory, tls: leaf, tlsVersion: "1.1"))]
        }
        let hello = try stack.curl("\(stack.api)/hello")
        #expect(hello.httpCode == 200, "\(hello.stderr) \(stack.proxy.log)")
        #expect(hello.bodyText == "hello from tls-origin\n")
        #expect(hello.headers["x-ats-error"] == nil)
        // The origin's name reached the chained proxy unresolved, with a matching Host.
        let authority = "api.example.test:\(stack.tlsOrigin.port)"
        #expect(chain.requests.contains("CONNECT \(authority) auth=none host=\(authority)"), "\(chain.requests)")

        // An origin that fails ATS still fails, judged on its own TLS inside the tunnel.
        let old = try stack.curl(stack.url(Self.tls11))
        #expect(old.httpCode == 502)
        #expect(old.headers["x-ats-error"] == "-1200")
        #expect(old.bodyText.contains("NSURLErrorDomain -1200 [3:-9836]"), "\(old.bodyText)")
        #expect(chain.requests.contains { $0.hasPrefix("CONNECT \(Self.tls11):") }, "\(chain.requests)")

        // An ignored host's passthrough tunnel goes through the chain: the client sees the origin's own
        // certificate (it trusts only the origin's CA).
        let blind = try Curl.fetch(
            "https://plain.example.test:\(stack.tlsOrigin.port)/hello", proxy: stack.proxy, cacert: stack.pki.caPath)
        #expect(blind.httpCode == 200, "\(blind.stderr)")
        #expect(blind.bodyText == "hello from tls-origin\n")
        #expect(chain.requests.contains { $0.hasPrefix("CONNECT plain.example.test:") }, "\(chain.requests)")

        // Cleartext http (allowed by the legacy exception) is a CONNECT tunnel too.
        let legacy = try stack.curl("\(stack.legacy)/hello")
        #expect(legacy.httpCode == 200, "\(legacy.bodyText)")
        #expect(legacy.bodyText == "hello from plain-origin\n")
        #expect(chain.requests.contains { $0.hasPrefix("CONNECT legacy.example.test:") }, "\(chain.requests)")
    }

    @Test func anH2OriginIsSpokenToOverH2InsideTheChainsTunnel() throws {
        let directory = try TemporaryDirectory("chain-h2")
        let chain = try ChainProxy(directory: directory)
        let pki = try TestPKI(name: "h2-chain-ca", directory: directory)
        let leaf = try pki.leaf(["a.test"], file: "h2-chain")
        let origin = try H2Origin(directory: directory, leaf: leaf, alpn: "h2")
        let port = origin.port
        let proxy = try ProxyProcess(
            plist: infoPlist(""), upstreamCAs: [pki.caPath], arguments: ["--upstream-proxy", chain.url])
        let result = try Curl.fetch("https://a.test:\(port)/tiny", proxy: proxy, cacert: proxy.caPath)
        #expect(result.httpCode == 200, "\(result.stderr) \(proxy.log)")
        #expect(result.bodyText == "ok")
        #expect(chain.requests.contains { $0.hasPrefix("CONNECT a.test:\(port) ") }, "\(chain.requests)")
        let originLines = origin.lines.joined(separator: "\n")
        #expect(originLines.contains("REQUEST") && originLines.contains("protocol=h2"), "\(originLines)")
    }

    @Test func credentialsAreCheckedAndNeverLogged() throws {
        let chainDirectory = try TemporaryDirectory("chain-auth")
        let chain = try ChainProxy(directory: chainDirectory, user: "team", password: "s3cret-pw")

        let without = try ProxyStack(arguments: ["--upstream-proxy", chain.url])
        let missing = try without.curl("\(without.api)/hello")
        #expect(missing.httpCode == 502)
        #expect(missing.headers["x-ats-error"] == "-1004")
        #expect(missing.bodyText.contains("answered 407 Proxy Authentication Required"), "\(missing.bodyText)")
        #expect(missing.bodyText.contains("the upstream proxy wants credentials (sent no credentials"))

        let wrongURL = "http://team:bad-pw-9@127.0.0.1:\(chain.port)"
        let wrong = try ProxyStack(arguments: ["--upstream-proxy", wrongURL])
        let refused = try wrong.curl("\(wrong.api)/hello")
        #expect(refused.httpCode == 502)
        #expect(refused.headers["x-ats-error"] == "-1004")
        #expect(refused.bodyText.contains("wants credentials (sent credentials for user 'team'"), "\(refused.bodyText)")
        #expect(!refused.bodyText.contains("bad-pw-9"))
        #expect(!wrong.proxy.log.contains("bad-pw-9"), "\(wrong.proxy.log)")

        let right = try ProxyStack(
            arguments: ["--upstream-proxy", chain.url], environment: ["ATS_PROXY_UPSTREAM_PROXY_AUTH": "team:s3cret-pw"]
        )
        let allowed = try right.curl("\(right.api)/hello")
        #expect(allowed.httpCode == 200, "\(allowed.bodyText)")
        #expect(allowed.bodyText == "hello from tls-origin\n")
        #expect(!right.proxy.log.contains("s3cret-pw"))
        let auths = chain.requests.compactMap { $0.split(separator: " ").dropFirst(2).first }
        #expect(auths == ["auth=none", "auth=wrong", "auth=ok"], "\(chain.requests)")
    }

    @Test func anUpstreamProxyThatIsDownOrCannotReachTheOriginIs1004() throws {
        let closedPort = try E2E.freePort()
        let down = try ProxyStack(arguments: ["--upstream-proxy", "http://127.0.0.1:\(closedPort)"])
        let refused = try down.curl("\(down.api)/hello")
        #expect(refused.httpCode == 502)
        #expect(refused.headers["x-ats-error"] == "-1004")
        #expect(
            refused.bodyText.contains("upstream proxy 127.0.0.1:\(closedPort): connection refused"),
            "\(refused.bodyText)")
        let plain = try down.curl("\(down.legacy)/hello")
        #expect(plain.httpCode == 502)
        #expect(plain.headers["x-ats-error"] == "-1004")

        // The chained proxy answers 502 when the origin does not answer: the status is in the detail.
        let chainDirectory = try TemporaryDirectory("chain-502")
        let chain = try ChainProxy(directory: chainDirectory)
        let stack = try ProxyStack(arguments: ["--upstream-proxy", chain.url])
        let nowhere = try stack.curl("https://api.example.test:\(closedPort)/hello")
        #expect(nowhere.httpCode == 502)
        #expect(nowhere.headers["x-ats-error"] == "-1004")
        #expect(
            nowhere.bodyText.contains("answered 502 Bad Gateway to CONNECT api.example.test:\(closedPort)"),
            "\(nowhere.bodyText)")
    }

    @Test func aBadUpstreamProxyURLIsAUsageError() throws {
        let directory = try TemporaryDirectory("upstream-proxy-usage")
        let environment = Invocation.environment(home: directory.path)
        for bad in ["https://proxy.test:3128", "http://proxy.test", "proxy.test:3128"] {
            let result = try Invocation.run(
                ["run", "--upstream-proxy", bad], in: directory.path, environment: environment, timeout: 10)
            #expect(result.status == 2, "\(bad): \(result.stderr)")
            #expect(result.stderr.contains("--upstream-proxy"), "\(bad): \(result.stderr)")
        }
    }
}
