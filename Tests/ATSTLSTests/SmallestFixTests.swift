import ATSDiagnose
import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSTLS

/// The fix text of each TLS failure class, as the proxy computes it (no second handshake) and as
/// `diagnose` does (with retries), from the one `SmallestFix` both use.
@Suite("SmallestFix: the Info.plist change for each TLS failure class")
struct SmallestFixTests {
    /// The enforcement handshake's verdict (no fix yet) and the fix with and without retries.
    static func fixes(_ server: TestServer, _ policy: PolicyContext = Policies.standard) -> (
        verdict: UpstreamVerdict, proxy: String, diagnose: String
    ) {
        let checker = UpstreamChecker(client: TestPKI.client())
        let target = RequestTarget(scheme: .https, host: TestPKI.host, port: Int(server.port), url: "https://ats.test/")
        let decision = policy.decide(target)
        let verdict = checker.attempt(
            requirements: decision.requirements, host: target.host, url: target.url, transport: server.transport)
        let proxy = SmallestFix(policy: policy).text(for: verdict, target: target, retry: nil)
        let diagnose = checker.check(target, policy: policy, transport: server.transport).fix ?? ""
        return (verdict, proxy, diagnose)
    }

    @Test func negotiatedTLS10IsFixedExactlyWithoutAnotherHandshake() throws {
        // The handshake completes at TLS 1.0 (as in report mode); the judge under the default policy
        // blocks it, and the fix comes from the summary alone.
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls10, maximum: .tls10)))
        defer { server.stop() }
        let checker = UpstreamChecker(client: TestPKI.client())
        let target = RequestTarget(scheme: .https, host: TestPKI.host, port: Int(server.port), url: "https://ats.test/")
        let permissive = Policies.exception(minimumTLS: .tls10).decide(target).requirements
        let summary = try #require(
            checker.attempt(requirements: permissive, host: target.host, url: target.url, transport: server.transport)
                .summary)
        let verdict = UpstreamVerdict.judging(
            summary, requirements: Policies.standard.decide(target).requirements, url: target.url, host: target.host)
        #expect(verdict.isBlocked)
        let fix = SmallestFix(policy: Policies.standard).text(for: verdict, target: target, retry: { _ in false })
        #expect(fix.hasPrefix("add NSExceptionDomains → ats.test with NSExceptionMinimumTLSVersion = TLSv1.0"))
        #expect(SmallestFix(policy: Policies.standard).text(for: verdict, target: target, retry: nil) == fix)
    }

    @Test func refusedVersionGetsAHintInTheProxyAndTheExactChangeInDiagnose() throws {
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls10, maximum: .tls10)))
        defer { server.stop() }
        let (verdict, proxy, diagnose) = Self.fixes(server)
        #expect(verdict.streamCode == -9836)
        #expect(
            proxy
                == "the server refused TLS 1.2 and later; if it supports an older version, set NSExceptionMinimumTLSVersion in NSExceptionDomains → ats.test to that version ('ats-proxy diagnose https://ats.test/' with the app's --config finds out and checks the change)"
        )
        #expect(diagnose.hasPrefix("add NSExceptionDomains → ats.test with NSExceptionMinimumTLSVersion = TLSv1.0"))
    }

    @Test func refusedForwardSecrecyPointsAtTheWaiver() throws {
        let server = try TestServer(.tls(Fixture.staticRSAOnly.makeContext()))
        defer { server.stop() }
        let (verdict, proxy, diagnose) = Self.fixes(server)
        #expect(verdict.streamCode == -9824)
        #expect(proxy.contains("set NSExceptionRequiresForwardSecrecy to NO in NSExceptionDomains → ats.test"))
        #expect(diagnose == "add NSExceptionDomains → ats.test with NSExceptionRequiresForwardSecrecy = NO")
    }

    @Test func expiredCertificateNamesTheServerSideFixAndTheDelegateRoute() throws {
        var spec = TestPKI.leafSpec()
        spec.notBefore = TestPKI.now.addingTimeInterval(-30 * 86400)
        spec.notAfter = TestPKI.now.addingTimeInterval(-86400)
        let server = try TestServer(.tls(TestPKI.serverContext(leaf: TestPKI.leaf(spec))))
        defer { server.stop() }
        let (verdict, proxy, diagnose) = Self.fixes(server)
        #expect(verdict.error == .secureConnectionFailed && verdict.streamCode == -9802)
        #expect(proxy == diagnose)
        #expect(proxy.hasPrefix("no Info.plist change alone can allow this: only an app whose URLSession delegate"))
        #expect(proxy.contains("; otherwise the server must present a certificate chain that has not expired"))
    }

    @Test func hostnameMismatchUnderArbitraryLoadsSaysWhatTheCertificateMustName() throws {
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec("other.test")))))
        defer { server.stop() }
        let (verdict, proxy, _) = Self.fixes(server, Policies.arbitraryLoads)
        #expect(verdict.isBlocked)
        #expect(
            proxy.contains(
                "the server must present a certificate whose subjectAltName names this host (it names other.test)"))
    }

    @Test func everyTrustProblemHasAServerSideSentence() {
        let problems: [TrustProblem] = [
            .noCertificate, .expired(depth: 0, notAfter: Date(timeIntervalSince1970: 0)),
            .notYetValid(depth: 0, notBefore: Date(timeIntervalSince1970: 0)), .selfSignedLeaf,
            .untrustedRoot(subject: "CN=Root"), .issuerNotFound(depth: 1, issuer: "CN=Int"),
            .hostnameMismatch(names: ["a.test"], commonNameOnly: true),
            .weakKey(depth: 0, key: .rsa(bits: 1024), minimumBits: 2048),
            .missingServerAuthEKU(present: false), .certificateTransparency(validSCTs: 0, required: 2),
            .badSignature(depth: 0), .other("x"),
        ]
        for problem in problems {
            let sentence = SmallestFix.trustRequirement(problem)
            #expect(!sentence.isEmpty && !sentence.hasSuffix("."), "\(problem)")
        }
        #expect(
            SmallestFix.trustRequirement(.expired(depth: 0, notAfter: Date(timeIntervalSince1970: 0))).contains(
                "1970-01-01"))
    }
}
