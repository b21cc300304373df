import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// The current platform by default, key-exchange groups and the system-services profile, end to end through
/// the built binary with origins the tests start.
@Suite(.serialized) struct PlatformEndToEndTests {
    static let tls10 = "tls10.example.test"
    static let x25519 = "x25519.example.test"
    static let p256 = "p256.example.test"
    static let noEMS = "noems.example.test"
    static let withEMS = "ems.example.test"

    /// The JSON-log objects of requests (lines with a `url`).
    static func records(_ log: String) -> [[String: Any]] {
        log.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["url"] != nil }
    }

    /// The JSON record of the request to `url`.
    static func record(_ log: String, url: String) -> [String: Any]? {
        records(log).first { $0["url"] as? String == url }
    }

    /// Whether the OpenSSL the binary runs with provides ML-KEM (3.5+), as the banner must tell.
    static var hybridAvailable: Bool { TLSContext.supportsGroup("X25519MLKEM768") }

    @Test func theBannerNamesTheDefaultPlatformAndTheGroupsOffered() throws {
        let stack = try ProxyStack()
        let banner = stack.proxy.child.stderrText
        #expect(
            banner.contains("platform iOS 27.0 (the default: the newest iOS modelled; --platform for older)"),
            "\(banner)")
        let groups = Self.hybridAvailable ? "X25519MLKEM768, x25519" : "x25519, secp256r1, secp384r1, secp521r1"
        #expect(banner.contains("key exchange: offering \(groups)"), "\(banner)")
        #expect(Self.hybridAvailable || banner.contains("X25519MLKEM768 not offered"), "\(banner)")
        #expect(banner.contains("never an ATS failure"), "\(banner)")

        let pinned = try ProxyStack(arguments: ["--platform", "ios:18.0"])
        let older = pinned.proxy.child.stderrText
        #expect(older.contains("platform iOS 18.0, mode enforce"), "\(older)")
        #expect(older.contains("key exchange: offering x25519, secp256r1, secp384r1, secp521r1 upstream\n"), "\(older)")
    }

    /// A TLS 1.0 server under `NSExceptionMinimumTLSVersion = TLSv1.0`: allowed on iOS 18, refused on the
    /// default platform (the iOS/macOS 26 floor) with -1200 [3:-9836].
    @Test func aTLS10ExceptionWorksOnIOS18AndFailsOnTheDefaultPlatform() throws {
        let exception =
            "<key>\(Self.tls10)</key><dict><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string></dict>"
        func stack(_ arguments: [String]) throws -> ProxyStack {
            try ProxyStack(extraATS: exception, arguments: arguments) { directory, pki in
                let leaf = try pki.leaf([Self.tls10], file: "tls10")
                return [(Self.tls10, try Origin(name: "tls10", directory: directory, tls: leaf, tlsVersion: "1.0"))]
            }
        }
        let old = try stack(["--platform", "ios:18.0"])
        let allowed = try old.curl(old.url(Self.tls10))
        #expect(allowed.httpCode == 200, "\(allowed.bodyText)")
        #expect(allowed.bodyText == "hello from tls10\n")

        let current = try stack([])
        let url = current.url(Self.tls10)
        let refused = try current.curl(url)
        #expect(refused.httpCode == 502, "\(refused.bodyText)")
        let log = current.proxy.waitForLog("ats-proxy: GET \(url)")
        #expect(log.contains("ats-proxy: GET \(url) → failed -1200 [3:-9836]: "), "\(log)")
        #expect(log.contains("(error code: -1200 [3:-9836])"), "\(log)")
        #expect(current.extras[Self.tls10]?.requests.filter { $0.hasPrefix("GET ") }.isEmpty == true)
    }

    /// The group each server chose (an X25519-preferring server, a P-256-only one), in the JSON log and on the
    /// console line.
    @Test func theNegotiatedGroupIsLoggedForAnX25519AndAP256Server() throws {
        let stack = try ProxyStack(arguments: ["--log-format", "json"]) { directory, pki in
            let leaf = try pki.leaf([Self.x25519, Self.p256], file: "groups")
            return [
                // OpenSSL's default server list prefers X25519 (Python's ssl cannot limit a server to it).
                (Self.x25519, try Origin(name: "x25519", directory: directory, tls: leaf)),
                (
                    Self.p256,
                    try Origin(name: "p256", directory: directory, tls: leaf, tlsOptions: ["--group", "prime256v1"])
                ),
            ]
        }
        let first = stack.url(Self.x25519)
        let second = stack.url(Self.p256)
        #expect(try stack.curl(first).httpCode == 200)
        #expect(try stack.curl(second).httpCode == 200)
        let log = stack.proxy.waitForLog(Self.p256)
        let x25519 = try #require(Self.record(log, url: first), "\(log)")
        let p256 = try #require(Self.record(log, url: second), "\(log)")
        #expect((x25519["tls"] as? [String: String])?["group"] == "x25519", "\(x25519)")
        #expect((p256["tls"] as? [String: String])?["group"] == "secp256r1", "\(p256)")
        #expect((p256["tls"] as? [String: String])?["version"] == "TLSv1.3", "\(p256)")

        let text = try ProxyStack { directory, pki in
            let leaf = try pki.leaf([Self.p256], file: "p256")
            return [
                (
                    Self.p256,
                    try Origin(name: "p256", directory: directory, tls: leaf, tlsOptions: ["--group", "prime256v1"])
                )
            ]
        }
        let url = text.url(Self.p256)
        #expect(try text.curl(url).httpCode == 200)
        let console = text.proxy.waitForLog("ats-proxy: GET \(url)")
        #expect(console.contains("→ allowed 200 (") && console.contains(", group secp256r1]"), "\(console)")
    }

    /// A ClientHello over 1,300 bytes, in two TCP segments, through CONNECT: the proxy completes the handshake.
    @Test func aLargeClientHelloInTwoSegmentsIsAccepted() throws {
        let stack = try ProxyStack()
        let result = try E2E.run(
            "/usr/bin/python3",
            [
                E2E.fixture("large_client_hello.py"), "--proxy", stack.proxy.address, "--host", "api.example.test",
                "--port", "\(stack.tlsOrigin.port)", "--cafile", stack.proxy.caPath,
            ], timeout: 30)
        #expect(result.status == 0, "\(result.stderrText)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        let size = lines.first { $0.hasPrefix("CLIENTHELLO ") }.flatMap { Int($0.split(separator: " ")[1]) }
        #expect((size ?? 0) > 1300, "\(lines)")
        #expect(lines.contains("STATUS HTTP/1.1 200 OK"), "\(lines)")
        #expect(lines.contains("BODY hello from tls-origin"), "\(lines)")
    }

    /// `--system-services-hosts`: a TLS 1.2 server without the extended master secret would fail device
    /// enrolment, one with it passes; the app's own verdict (allowed) is unchanged for both.
    @Test func systemServicesHostsAreJudgedApartFromTheAppsVerdict() throws {
        let stack = try ProxyStack(
            arguments: ["--log-format", "json", "--system-services-hosts", #"(^|\.)(noems|ems)\.example\.test:"#]
        ) { directory, pki in
            let leaf = try pki.leaf([Self.noEMS, Self.withEMS], file: "ems")
            return [
                (
                    Self.noEMS,
                    try Origin(
                        name: "noems", directory: directory, tls: leaf, tlsVersion: "1.2", tlsOptions: ["--no-ems"])
                ),
                (Self.withEMS, try Origin(name: "ems", directory: directory, tls: leaf, tlsVersion: "1.2")),
            ]
        }
        let failing = stack.url(Self.noEMS)
        let passing = stack.url(Self.withEMS)
        #expect(try stack.curl(failing).httpCode == 200)
        #expect(try stack.curl(passing).httpCode == 200)
        #expect(try stack.curl("\(stack.api)/hello").httpCode == 200)
        let log = stack.proxy.waitForLog(Self.withEMS)
        let noEMS = try #require(Self.record(log, url: failing), "\(log)")
        #expect(noEMS["result"] as? String == "completed")
        let verdict = try #require(noEMS["systemServices"] as? [String: Any], "\(noEMS)")
        #expect(verdict["outcome"] as? String == "fail")
        #expect(verdict["platform"] as? String == "iOS 27.0")
        #expect((verdict["reasons"] as? [String])?.first?.contains("extended master secret") == true, "\(verdict)")
        #expect((noEMS["tls"] as? [String: String])?["_systemServices"] == nil, "\(noEMS)")
        let ems = try #require(Self.record(log, url: passing), "\(log)")
        #expect((ems["systemServices"] as? [String: Any])?["outcome"] as? String == "pass", "\(ems)")
        #expect(Self.record(log, url: "\(stack.api)/hello")?["systemServices"] == nil)
        #expect(stack.proxy.child.stderrText.contains("system services: "), "\(stack.proxy.child.stderrText)")
    }
}
