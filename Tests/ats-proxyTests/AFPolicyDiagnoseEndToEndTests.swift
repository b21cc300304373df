import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// `ats-proxy diagnose --af-policy` and `explain --af-policy` run as a user runs them, against a TLS server
/// started here on 127.0.0.1 with a chain from a CA of the test; the proxy's CA is another CA of the test, in
/// the directory given with --ca-dir.
@Suite("diagnose --af-policy end to end", .serialized)
struct AFPolicyDiagnoseEndToEndTests {
    static let host = "api.aftrust.test"

    /// The origin (its CA, leaf and key), a pins directory holding the origin's leaf as DER, and a CA directory
    /// holding the proxy's CA.
    struct Fixture {
        let directory: TemporaryDirectory
        let origin: TestPKI
        let leaf: TestPKI.Leaf
        let server: TestServer
        let pins: String
        let proxyCA: String

        init() throws {
            directory = try TemporaryDirectory("af-diagnose")
            origin = try TestPKI(name: "af-origin", directory: directory)
            leaf = try origin.leaf([AFPolicyDiagnoseEndToEndTests.host], file: "af-leaf")
            let key = try PrivateKey(pem: [UInt8](try Data(contentsOf: URL(fileURLWithPath: leaf.keyPath))))
            server = try TestServer(
                .tls(
                    TestPKI.serverContext(
                        leaf: leaf.certificate, key: key, chain: [origin.authority.certificate], minimum: .tls12)),
                idleLimit: 60)
            pins = directory.file("pins")
            try FileManager.default.createDirectory(atPath: pins, withIntermediateDirectories: true)
            try Data(leaf.certificate.derBytes).write(to: URL(fileURLWithPath: pins + "/server.cer"))
            proxyCA = directory.file("proxy-ca")
            try CertificateAuthority.generate(hostName: "af-proxy").write(to: proxyCA)
        }

        func diagnose(_ policies: [String], caDirectory: String? = nil) throws -> CLITests.Result {
            var arguments = [
                "diagnose", "--resolve", "\(AFPolicyDiagnoseEndToEndTests.host):\(server.port):127.0.0.1",
                "--upstream-ca", origin.caPath, "--ca-dir", caDirectory ?? proxyCA,
            ]
            for policy in policies { arguments += ["--af-policy", policy] }
            arguments.append("https://\(AFPolicyDiagnoseEndToEndTests.host):\(server.port)/")
            return try CLITests.run(arguments)
        }
    }

    /// The app pins the server's key: the real chain passes, the proxy's chain (its own leaf key) does not.
    @Test func publicKeyPinAcceptsTheRealChainAndBreaksUnderInterception() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let result = try fixture.diagnose([#"api\.aftrust\.test=public-key,pins=\#(fixture.pins)"#, ".*=none"])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let expected = """
            App pinning (AFSecurityPolicy) for \(Self.host) [--af-policy 'api\\.aftrust\\.test=public-key,pins=\(fixture.pins)']:
            Policy : AFSSLPinningModePublicKey, allowInvalidCertificates = NO, validatesDomainName = YES, 1 pinned certificate
            Scenario : 4 (PublicKey/NO/YES): \(AFScenarioText.publicKeyStrict)
            Real chain : ACCEPT: the chain is trusted and carries a pinned public key (depth 0)
            Interception chain : REFUSE: the app's pinned public keys match no certificate of the interception chain: interception breaks this app; run with --passthrough \(Self.host) or test with the real chain

            """
        #expect(result.stdout.hasSuffix(expected), "\(result.stdout)")
    }

    /// Certificate mode pinning the origin's CA with allowInvalidCertificates: the real chain evaluates against
    /// the pinned CA; the interception chain does not. With no proxy CA yet, a throwaway one stands in, and the
    /// output says so.
    @Test func certificatePinOnTheOriginCAAndAThrowawayProxyCA() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let caFile = fixture.origin.caPath
        let empty = fixture.directory.file("no-ca-yet")
        let result = try fixture.diagnose(
            [#"api\.aftrust\.test=certificate,pins=\#(caFile),allow-invalid"#], caDirectory: empty)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("Scenario : 9 (Certificate/YES/YES): "), "\(result.stdout)")
        #expect(
            result.stdout.contains(
                "Real chain : ACCEPT: the chain evaluates with the pinned certificates as anchors and holds a pinned certificate at depth 1"
            ), "\(result.stdout)")
        #expect(
            result.stdout.contains(
                "Interception chain : REFUSE: the interception chain does not evaluate against the app's pinned certificates (no trusted anchor"
            ), "\(result.stdout)")
        #expect(result.stdout.contains("(no proxy CA at \(empty)/"), "\(result.stdout)")
    }

    /// The default policy: both chains pass (the device trusts the proxy's CA while it is intercepted); a policy
    /// that matches no host says so; a bad --af-policy is a usage error naming the flag.
    @Test func defaultPolicyPassesBothChainsAndBadSpecsAreUsageErrors() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let result = try fixture.diagnose([#"api\.aftrust\.test=none"#])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(
            result.stdout.contains(
                "Real chain : ACCEPT: the chain leads to a trusted root, is within its validity dates and names the host"
            ),
            "\(result.stdout)")
        #expect(
            result.stdout.contains(
                "Interception chain : ACCEPT: the chain leads to a trusted root, is within its validity dates and names the host"
            ), "\(result.stdout)")
        let unmatched = try fixture.diagnose(["other\\.test=none"])
        #expect(
            unmatched.stdout.hasSuffix(
                "App pinning (AFSecurityPolicy) for \(Self.host): no --af-policy matches this host\n"),
            "\(unmatched.stdout)")
        let bad = try CLITests.run(["diagnose", "--af-policy", "h=pinned", "https://\(Self.host)/"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--af-policy 'h=pinned': unknown mode 'pinned'"), "\(bad.stderr)")
    }

    @Test func explainPrintsTheScenario() throws {
        let result = try CLITests.run([
            "explain", "--af-policy", #"api\.example\.com=none,allow-invalid,no-domain-check"#,
            "https://api.example.com/",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("Scenario : 3 (None/YES/*): "), "\(result.stdout)")
        #expect(
            result.stdout.contains(
                "Any chain : ACCEPT: accepted without any validation: the app would accept a forged server just as well"
            ),
            "\(result.stdout)")
    }
}

/// The scenario meanings the expected texts above quote (kept beside the tests so a change shows in one place).
enum AFScenarioText {
    static let publicKeyStrict =
        "trusted root, validity dates and host name, and a public key of the chain must equal a pinned certificate's key"
}
