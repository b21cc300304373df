import ATSDiagnose
import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSTLS

/// The iOS/macOS 27 system-services profile against loopback servers: TLS floor, ATS suites, ATS certificate
/// rules and the extended master secret on TLS 1.2.
@Suite("System-services profile: what iOS/macOS 27 system processes require of a server")
struct SystemServicesProfileTests {
    /// A fixture server at exactly `version`, with or without the extended master secret.
    static func server(
        _ version: TLSProtocolVersion, extendedMasterSecret: Bool = true, ciphers: String? = nil,
        key: PrivateKey = TestPKI.ecKey
    ) throws -> TestServer {
        let leaf = TestPKI.leaf(TestPKI.leafSpec(), key: key)
        let context = TestPKI.serverContext(
            leaf: leaf, key: key, minimum: version, maximum: version, ciphers: ciphers)
        if !extendedMasterSecret { context.disableExtendedMasterSecret() }
        return try TestServer(.tls(context))
    }

    /// The summary of a handshake as permissive as `--mode report` makes it (so that every server completes one),
    /// judged by `profile`.
    static func judge(
        _ server: TestServer, profile: SystemServicesProfile = SystemServicesProfile(options: EvaluationOptions())
    ) throws -> (SystemServicesVerdict, HandshakeSummary) {
        let checker = UpstreamChecker(client: TestPKI.client())
        let target = RequestTarget(scheme: .https, host: TestPKI.host, port: Int(server.port), url: "https://ats.test/")
        let permissive = Policies.make(
            { $0.allowsArbitraryLoads = .value(true) },
            options: { $0.tls12FloorOn26 = false }
        ).decide(target).requirements.updating {
            $0.minimumVersion = .tls10
            $0.cipherSuites = CipherSuite.catalogue
        }
        let verdict = checker.attempt(
            requirements: permissive, host: target.host, url: target.url, transport: server.transport)
        let summary = try #require(verdict.summary, "\(verdict.rule)")
        return (profile.judge(summary), summary)
    }

    @Test func tls12WithoutExtendedMasterSecretFails() throws {
        let server = try Self.server(.tls12, extendedMasterSecret: false)
        defer { server.stop() }
        let (verdict, summary) = try Self.judge(server)
        #expect(summary.extendedMasterSecret == false)
        #expect(verdict.outcome == .fail)
        #expect(verdict.platform == "iOS 27.0")
        #expect(verdict.reasons.count == 1)
        #expect(verdict.reasons.first?.contains("extended master secret") == true)
        #expect(verdict.line.hasPrefix("would fail for device enrolment and the other system services on iOS 27.0: "))
    }

    @Test func tls12WithExtendedMasterSecretPasses() throws {
        let server = try Self.server(.tls12)
        defer { server.stop() }
        let (verdict, summary) = try Self.judge(server)
        #expect(summary.extendedMasterSecret == true)
        #expect(verdict.outcome == .pass, "\(verdict.reasons)")
        #expect(verdict.reasons.isEmpty)
    }

    @Test func theExtendedMasterSecretCheckCanBeSwitchedOff() throws {
        let server = try Self.server(.tls12, extendedMasterSecret: false)
        defer { server.stop() }
        let profile = SystemServicesProfile(options: EvaluationOptions(), ems: .off)
        #expect(try Self.judge(server, profile: profile).0.outcome == .pass)
    }

    @Test func tls13HasNoExtendedMasterSecretAndPasses() throws {
        let server = try Self.server(.tls13)
        defer { server.stop() }
        let (verdict, summary) = try Self.judge(server)
        #expect(summary.extendedMasterSecret == nil)
        #expect(verdict.outcome == .pass, "\(verdict.reasons)")
    }

    @Test func tls11FailsWhateverTheAppsExceptionsSay() throws {
        let server = try Self.server(.tls11)
        defer { server.stop() }
        let (verdict, _) = try Self.judge(server)
        #expect(verdict.outcome == .fail)
        #expect(verdict.reasons.contains { $0.contains("TLS 1.1") && $0.contains("TLS 1.2 or later") })
    }

    @Test func staticRSAFailsAsANonATSSuite() throws {
        let server = try Self.server(.tls12, ciphers: "AES128-GCM-SHA256", key: TestPKI.rsa2048)
        defer { server.stop() }
        let (verdict, summary) = try Self.judge(server)
        #expect(!summary.forwardSecret)
        #expect(verdict.outcome == .fail)
        #expect(verdict.reasons.contains { $0.contains("TLS_RSA_WITH_AES_128_GCM_SHA256") })
    }

    @Test func anOlderEmulatedPlatformIsJudgedAsItsFirstRelease27() {
        let profile = SystemServicesProfile(options: EvaluationOptions(platform: Platform(parsing: "macos:15")!))
        #expect(profile.platform.description == "macOS 27.0")
        #expect(profile.requirements.minimumVersion == .tls12)
        #expect(profile.requirements.forwardSecrecyRequired)
        let current = SystemServicesProfile(options: EvaluationOptions(platform: Platform(parsing: "ios:27.1")!))
        #expect(current.platform.description == "iOS 27.1")
    }

    @Test func explainBlocksCleartextAndListsTheRequirements() throws {
        let profile = SystemServicesProfile(options: EvaluationOptions())
        let cleartext = profile.explain(try RequestTarget(parsing: "http://mdm.example.com/"))
        #expect(cleartext.blocked)
        #expect(cleartext.text.contains("system processes require HTTPS"))
        let https = profile.explain(try RequestTarget(parsing: "https://mdm.example.com/"))
        #expect(!https.blocked)
        #expect(https.text.contains("system services of iOS 27.0"))
        #expect(https.text.contains("TLS 1.2 to TLS 1.3"))
        #expect(https.text.contains("Extended MS    required on TLS 1.2"))
    }
}
