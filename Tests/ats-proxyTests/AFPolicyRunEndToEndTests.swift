import ATSTLS
import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `ats-proxy run --af-policy` and `exec --af-policy` with curl through the real binary, in front of a TLS origin
/// whose chain comes from a CA of the test (trusted by the proxy through `--upstream-ca`, as the system roots trust
/// a production server's CA): the verdicts on the real chain and on the proxy's interception chain appear in the
/// JSON record (`appTrust.pinning`) and in one console line of the text log.
@Suite("run/exec --af-policy end to end", .serialized)
struct AFPolicyRunEndToEndTests {
    static let host = "api.aftrust.test"
    /// A second name on the origin's leaf that no `--af-policy` of these tests names.
    static let otherHost = "other.aftrust.test"

    /// The origin, its CA and a pins directory holding the origin's leaf (DER), as an app bundles it.
    struct Fixture {
        let directory: TemporaryDirectory
        let pki: TestPKI
        let origin: Origin
        let pins: String

        init() throws {
            directory = try TemporaryDirectory("af-run")
            pki = try TestPKI(name: "af-run-origin", directory: directory)
            let leaf = try pki.leaf([AFPolicyRunEndToEndTests.host, AFPolicyRunEndToEndTests.otherHost], file: "leaf")
            origin = try Origin(name: "af-origin", directory: directory, tls: leaf, tlsVersion: "1.2")
            pins = directory.file("pins")
            try FileManager.default.createDirectory(atPath: pins, withIntermediateDirectories: true)
            try Data(leaf.certificate.derBytes).write(to: URL(fileURLWithPath: pins + "/server.cer"))
        }

        /// The proxy with `policies` and `extra` arguments, the origin resolved for both host names.
        func proxy(_ policies: [String], _ extra: [String] = []) throws -> ProxyProcess {
            try ProxyProcess(
                plist: infoPlist(""),
                resolve: [
                    (AFPolicyRunEndToEndTests.host, origin.port), (AFPolicyRunEndToEndTests.otherHost, origin.port),
                ],
                upstreamCAs: [pki.caPath], arguments: policies.flatMap { ["--af-policy", $0] } + extra)
        }

        func url(_ host: String = AFPolicyRunEndToEndTests.host, _ path: String = "/hello") -> String {
            "https://\(host):\(origin.port)\(path)"
        }
    }

    static let publicKeyPolicy = #"api\.aftrust\.test=public-key,pins="#
    static let realAccepted = "the chain is trusted and carries a pinned public key (depth 0)"
    static let interceptionRefused =
        "the app's pinned public keys match no certificate of the interception chain: interception breaks this app; run with --passthrough \(host) or test with the real chain"
    static let defaultAccepted =
        "the chain leads to a trusted root, is within its validity dates and names the host"

    /// Stops the proxy with SIGINT (the log is flushed) and returns its exit status.
    static func stop(_ proxy: ProxyProcess) throws -> Int32 {
        proxy.child.signal(SIGINT)
        guard proxy.child.wait(timeout: 20) else { throw E2E.Failure("the proxy did not stop: \(proxy.log)") }
        return proxy.child.process.terminationStatus
    }

    /// The app pins the origin's public key: the JSON record of the request that opened the upstream connection
    /// says the real chain is accepted and the interception chain refused (scenario 4); the request itself goes
    /// through (the verdicts describe the app, they do not block). A host no policy names has no `appTrust`.
    @Test func publicKeyPinInTheJSONRecord() throws {
        let fixture = try Fixture()
        let policy = Self.publicKeyPolicy + fixture.pins
        let proxy = try fixture.proxy([policy], ["--log-format", "json", "--fail-on-violations"])
        let pinned = try Curl.fetch(fixture.url(), proxy: proxy, cacert: proxy.caPath)
        #expect(pinned.exitCode == 0 && pinned.httpCode == 200, "\(pinned.stderr)")
        #expect(pinned.bodyText == "hello from af-origin\n")
        let other = try Curl.fetch(fixture.url(Self.otherHost), proxy: proxy, cacert: proxy.caPath)
        #expect(other.httpCode == 200, "\(other.stderr)")
        #expect(try Self.stop(proxy) == 0, "pinning verdicts are not violations: \(proxy.log)")

        let records = ChallengeRunEndToEndTests.jsonRecords(fileLines(proxy.logPath))
        #expect(records.count == 2, "\(records)")
        let record = try #require(records.first { $0["host"] as? String == Self.host })
        #expect(record["result"] as? String == "completed")
        let appTrust = try #require(record["appTrust"] as? [String: Any], "\(record)")
        #expect(appTrust["challenge"] == nil)
        let pinning = try #require(appTrust["pinning"] as? [String: Any])
        #expect(pinning["policy"] as? String == policy)
        #expect(pinning["scenario"] as? Int == 4)
        #expect(pinning["scenarioMeaning"] as? String == AFScenarioText.publicKeyStrict)
        let real = try #require(pinning["realChain"] as? [String: Any])
        #expect(real["accepted"] as? Bool == true)
        #expect(real["meaning"] as? String == Self.realAccepted)
        let interception = try #require(pinning["interceptionChain"] as? [String: Any])
        #expect(interception["accepted"] as? Bool == false)
        #expect(interception["meaning"] as? String == Self.interceptionRefused)
        let unnamed = try #require(records.first { $0["host"] as? String == Self.otherHost })
        #expect(unnamed["appTrust"] == nil, "no --af-policy names \(Self.otherHost): \(unnamed)")
    }

    /// The same policy in the text log: one console line after the request's line; and a second request on the
    /// same upstream connection (curl keeps the tunnel, the proxy its upstream connection) is not judged again.
    @Test func publicKeyPinOnTheConsole() throws {
        let fixture = try Fixture()
        let proxy = try fixture.proxy([Self.publicKeyPolicy + fixture.pins])
        let result = try Curl.fetch(
            fixture.url(), proxy: proxy, cacert: proxy.caPath, arguments: [fixture.url(Self.host, "/headers")])
        #expect(result.exitCode == 0 && result.httpCode == 200, "\(result.stderr)")
        _ = try Self.stop(proxy)
        let lines = fileLines(proxy.logPath)
        let expected =
            "ats-proxy: app pinning for \(Self.host) (scenario 4): real chain ACCEPT, interception chain REFUSE; interception chain: \(Self.interceptionRefused)"
        #expect(lines.filter { $0.hasPrefix("ats-proxy: app pinning for ") } == [expected], "\(lines)")
        // The line follows the record of the request that opened the upstream connection (curl sends /headers first).
        let requests = lines.indices.filter { lines[$0].hasPrefix("ats-proxy: GET https://\(Self.host):") }
        #expect(requests.count == 2, "\(lines)")
        let first = try #require(requests.first)
        #expect(
            lines[first].hasPrefix("ats-proxy: GET \(fixture.url(Self.host, "/headers")) → allowed 200"), "\(lines)")
        #expect(lines.indices.contains(first + 1) && lines[first + 1] == expected, "\(lines)")
    }

    /// Mode none (AFNetworking's default policy, scenario 1): the real chain is trusted through the origin's CA, the
    /// interception chain through the proxy CA the device trusts as a user root: both accepted.
    @Test func defaultValidationAcceptsBothChains() throws {
        let fixture = try Fixture()
        let proxy = try fixture.proxy([#".*\.aftrust\.test=none"#])
        let result = try Curl.fetch(fixture.url(), proxy: proxy, cacert: proxy.caPath)
        #expect(result.httpCode == 200, "\(result.stderr)")
        _ = try Self.stop(proxy)
        let lines = fileLines(proxy.logPath)
        #expect(
            lines.contains(
                "ats-proxy: app pinning for \(Self.host) (scenario 1): real chain ACCEPT, interception chain ACCEPT"),
            "\(lines)")
    }

    /// exec takes the option too: Certificate mode pinning the origin's CA with allowInvalidCertificates (scenario
    /// 9) accepts the real chain and refuses the proxy's; the command's status is kept.
    @Test func execJudgesTheCommandsConnections() throws {
        let fixture = try Fixture()
        let caDirectory = try TemporaryDirectory("af-exec")
        let log = caDirectory.file("proxy.log")
        let result = try E2E.run(
            CLITests.binary.path,
            [
                "exec", "--ca-dir", caDirectory.file("ca"), "--log-file", log, "--upstream-ca", fixture.pki.caPath,
                "--resolve", "\(Self.host):\(fixture.origin.port):127.0.0.1", "--af-policy",
                #"api\.aftrust\.test=certificate,pins=\#(fixture.pki.caPath),allow-invalid"#, "--",
                "/usr/bin/curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", fixture.url(),
            ], timeout: 90)
        #expect(result.status == 0, "\(result.stdoutText)\n\(result.stderrText)")
        #expect(result.stdoutText == "200")
        let line = try #require(
            fileLines(log).first { $0.hasPrefix("ats-proxy: app pinning for ") }, "\(fileLines(log))")
        #expect(
            line.hasPrefix(
                "ats-proxy: app pinning for \(Self.host) (scenario 9): real chain ACCEPT, interception chain REFUSE; interception chain: the interception chain does not evaluate against the app's pinned certificates"
            ), "\(line)")
    }
}
