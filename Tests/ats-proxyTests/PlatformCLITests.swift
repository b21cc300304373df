import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// The default platform, `diagnose --tls-diagnostics` and the system-services profile, through the built binary.
@Suite struct PlatformCLITests {
    static func run(_ arguments: [String]) throws -> CLITests.Result { try CLITests.run(arguments) }

    @Test func explainNamesTheDefaultPlatform() throws {
        let result = try Self.run(["explain", "http://example.com/"])
        #expect(result.status == 1)
        #expect(
            result.stdout.contains("  Request       example.com port 80, URLSession, iOS 27.0 (default)"),
            "\(result.stdout)")
        let pinned = try Self.run(["explain", "--platform", "ios:18.0", "http://example.com/"])
        #expect(
            pinned.stdout.contains("  Request       example.com port 80, URLSession, iOS 18.0\n"), "\(pinned.stdout)")
    }

    @Test func explainOfABelow12ExceptionNamesTheFloorAndTheVersion() throws {
        let directory = try TemporaryDirectory("platform-cli")
        let plist = try directory.write(
            "Info.plist",
            infoPlist(
                "<key>NSExceptionDomains</key><dict><key>old.example.com</key><dict>"
                    + "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string></dict></dict>"))
        let current = try Self.run(["explain", "--config", plist, "https://old.example.com/"])
        #expect(
            current.stdout.contains(
                "NSExceptionMinimumTLSVersion = TLSv1.0 is not honoured on iOS 27.0 (iOS 26 and later); TLS 1.2 remains the minimum"
            ), "\(current.stdout)")
        #expect(current.stdout.contains("TLS versions     TLS 1.2 to TLS 1.3"), "\(current.stdout)")
        let old = try Self.run(["explain", "--config", plist, "--platform", "ios:18.0", "https://old.example.com/"])
        #expect(old.stdout.contains("TLS versions     TLS 1.0 to TLS 1.3"), "\(old.stdout)")
        let off = try Self.run(["explain", "--config", plist, "--tls-floor-26", "off", "https://old.example.com/"])
        #expect(off.stdout.contains("TLS versions     TLS 1.0 to TLS 1.3"), "\(off.stdout)")

        let lint = try Self.run(["lint", "--config", plist])
        #expect(lint.stdout.contains("TLSv1.0 has no effect on iOS 27.0"), "\(lint.stdout)")
        #expect(lint.stdout.contains("App Review still asks for a justification"), "\(lint.stdout)")
    }

    @Test func settingsShowStatesTheEmulatedPlatformAndThatItIsTheDefault() throws {
        let result = try Self.run(["settings", "show"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout.contains(
                "Emulated platform: iOS 27.0 (the default: the newest iOS modelled; --platform for older)"),
            "\(result.stdout)")
        let pinned = try Self.run(["settings", "show", "--platform", "macos:15", "--format", "json"])
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(pinned.stdout.utf8)) as? [String: Any], "\(pinned.stdout)")
        let platform = try #require(json["emulatedPlatform"] as? [String: Any])
        #expect(platform["name"] as? String == "macOS 15.0")
        #expect(platform["isDefault"] as? Bool == false)
    }

    @Test func releasesThatNeverExistedAreRefusedWithTheNextOne() throws {
        let ios = try Self.run(["explain", "--platform", "ios:19.0", "https://example.com/"])
        #expect(ios.status == 2)
        #expect(ios.stderr.contains("iOS 19–25 never existed: after iOS 18 came iOS 26"), "\(ios.stderr)")
        let macos = try Self.run(["explain", "--platform", "macos:16", "https://example.com/"])
        #expect(macos.status == 2)
        #expect(macos.stderr.contains("after macOS 15 came macOS 26"), "\(macos.stderr)")
        #expect(try Self.run(["explain", "--platform", "macos:26", "https://example.com/"]).status == 0)
    }

    @Test func explainWithTheSystemServicesProfile() throws {
        let https = try Self.run(["explain", "--profile", "system-services", "https://mdm.example.com/"])
        #expect(https.status == 0, "\(https.stderr)")
        #expect(https.stdout.contains("system services of iOS 27.0"), "\(https.stdout)")
        #expect(https.stdout.contains("Extended MS    required on TLS 1.2"), "\(https.stdout)")
        let off = try Self.run([
            "explain", "--profile", "system-services", "--system-services-ems", "off", "https://mdm.example.com/",
        ])
        #expect(off.stdout.contains("Extended MS    not checked"), "\(off.stdout)")
        let cleartext = try Self.run(["explain", "--profile", "system-services", "http://mdm.example.com/"])
        #expect(cleartext.status == 1)
        #expect(cleartext.stdout.contains("system processes require HTTPS"))
    }

    /// A loopback TLS server with `context`, the URL `diagnose` reaches it at, and the resolve/CA arguments.
    static func diagnose(_ context: TLSContext, _ extra: [String]) throws -> CLITests.Result {
        let directory = try TemporaryDirectory("platform-diagnose")
        let rootPath = directory.file("root.pem")
        try Data(try TestPKI.root.pemBytes()).write(to: URL(fileURLWithPath: rootPath))
        let server = try TestServer(.tls(context))
        defer { server.stop() }
        return try Self.run(
            ["diagnose"] + extra + [
                "--resolve", "\(TestPKI.host):\(server.port):127.0.0.1", "--upstream-ca", rootPath,
                "https://\(TestPKI.host):\(server.port)/",
            ])
    }

    @Test func tlsDiagnosticsPrintsVersionGroupAndSuiteLikeNscurl() throws {
        let context = TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()))
        try context.setGroups("P-256")
        try context.setTLS13Suites("TLS_AES_256_GCM_SHA384")
        let result = try Self.diagnose(context, ["--tls-diagnostics"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("Negotiated TLS version (codepoint): 0x0304\n"), "\(result.stdout)")
        #expect(result.stdout.contains("Negotiated TLS key exchange group (name): secp256r1\n"), "\(result.stdout)")
        #expect(result.stdout.contains("Negotiated TLS ciphersuite (codepoint): 0x1302\n"), "\(result.stdout)")
        #expect(result.stdout.contains("Post-quantum key exchange: no (informational"), "\(result.stdout)")
    }

    @Test func diagnoseWithTheSystemServicesProfileChecksTheExtendedMasterSecret() throws {
        let without = TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls12, maximum: .tls12)
        without.disableExtendedMasterSecret()
        let failing = try Self.diagnose(without, ["--profile", "system-services"])
        #expect(failing.status == 1, "\(failing.stdout)\(failing.stderr)")
        #expect(failing.stdout.contains("Extended master secret (RFC 7627): no"), "\(failing.stdout)")
        #expect(
            failing.stdout.contains(
                "Result : FAIL: would fail for device enrolment and the other system services on iOS 27.0"),
            "\(failing.stdout)")

        let with = TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls12, maximum: .tls12)
        let passing = try Self.diagnose(with, ["--profile", "system-services"])
        #expect(passing.status == 0, "\(passing.stdout)\(passing.stderr)")
        #expect(passing.stdout.contains("Extended master secret (RFC 7627): yes"), "\(passing.stdout)")
        #expect(passing.stdout.contains("Result : PASS"), "\(passing.stdout)")

        let tls10 = TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls10, maximum: .tls10)
        let old = try Self.diagnose(tls10, ["--profile", "system-services"])
        #expect(old.status == 1)
        #expect(old.stdout.contains("no TLS handshake completed"), "\(old.stdout)")
    }
}
