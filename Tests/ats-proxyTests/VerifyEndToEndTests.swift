import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `ats-proxy verify`: a session recorded through the proxy (a cleartext origin, a TLS 1.1-only origin, an
/// allowed https load, a refused port) re-decided under the session's minimal dictionary (everything passes,
/// the TLS origin checked again) and under the app's own Info.plist (the two failures still fail).
@Suite(.serialized) struct VerifyEndToEndTests {
    @Test(.timeLimit(.minutes(4))) func theMinimalDictionaryPassesAndTheOldPlistStillFails() throws {
        let refusedPort = try E2E.freePort()
        let directory = try TemporaryDirectory("verify")
        let reportDirectory = directory.file("out")
        let stack = try ProxyStack(
            // iOS 18: a TLS 1.1 server can still be reached with an exception there (not from iOS 26 on).
            arguments: [
                "--report", reportDirectory, "--resolve", "refused.example.test:\(refusedPort):127.0.0.1",
                "--platform", "ios:18.0",
            ]
        ) { directory, pki in
            [
                (
                    "old.example.test",
                    try Origin(
                        name: "old", directory: directory, tls: pki.leaf(["old.example.test"], file: "old"),
                        tlsVersion: "1.1")
                )
            ]
        }
        let old = stack.url("old.example.test", "/hello")
        #expect(try stack.curl("\(stack.api)/hello").httpCode == 200)
        #expect(try stack.curl("\(stack.plain)/hello").httpCode == 403)
        #expect(try stack.curl(old).httpCode == 502)
        _ = try stack.curl("https://refused.example.test:\(refusedPort)/")
        _ = stack.proxy.waitForLog("refused.example.test")
        stack.proxy.child.signal(SIGUSR1)
        stack.proxy.waitForLog("report written to", timeout: 10)
        let report = reportDirectory + "/report.json"
        let network = [
            "--resolve", "old.example.test:\(stack.extras["old.example.test"]?.port ?? 0):127.0.0.1",
            "--upstream-ca", stack.pki.caPath,
        ]

        let minimal = try Invocation.run(
            ["verify", "--report", report, "--format", "json"] + network, in: directory.path,
            environment: Invocation.environment(home: directory.path), timeout: 60)
        #expect(minimal.status == 0, "\(minimal.stdout)\n\(minimal.stderr)")
        let verification = try #require(
            try JSONSerialization.jsonObject(with: Data(minimal.stdout.utf8)) as? [String: Any], "\(minimal.stdout)")
        let loads = try #require(verification["loads"] as? [[String: Any]])
        func load(_ text: String, in loads: [[String: Any]]) -> [String: Any]? {
            loads.first { ($0["url"] as? String)?.contains(text) == true }
        }
        #expect(load("plain.example.test", in: loads)?["result"] as? String == "pass", "\(loads)")
        let tls = load("old.example.test", in: loads)
        #expect(tls?["result"] as? String == "pass" && tls?["checkedServer"] as? Bool == true, "\(loads)")
        #expect(tls?["recordedCode"] as? String == "-1200 [3:-9836]")
        #expect(load("api.example.test", in: loads)?["result"] as? String == "pass", "\(loads)")
        let refused = load("refused.example.test", in: loads)
        #expect(refused?["result"] as? String == "skip" && refused?["recorded"] as? String == "network error")
        #expect(verification["failed"] as? Int == 0 && verification["passed"] as? Int == 3, "\(verification)")

        let original = try Invocation.run(
            ["verify", "--report", report, stack.proxy.configPath] + network, in: directory.path,
            environment: Invocation.environment(home: directory.path), timeout: 60)
        #expect(original.status == 1, "\(original.stdout)\n\(original.stderr)")
        let lines = original.stdout.split(separator: "\n").map(String.init)
        #expect(
            lines.contains { $0.hasPrefix("FAIL  \(stack.plain)/hello  (was blocked -1022 → -1022): ") }, "\(lines)")
        #expect(
            lines.contains { $0.hasPrefix("FAIL  \(old)  (was failed -1200 [3:-9836] → -1200 [3:-9836]): ") },
            "\(lines)")
        #expect(lines.last == "1 pass, 2 still fail, 1 not decided by the Info.plist", "\(lines)")

        // diagnose --from-report: every https host whose TLS failed, at once, as JSON.
        let diagnosed = try Invocation.run(
            ["diagnose", "--from-report", report, "--format", "json", "--platform", "ios:18.0"] + network,
            in: directory.path,
            environment: Invocation.environment(home: directory.path), timeout: 120)
        #expect(diagnosed.status == 1, "\(diagnosed.stdout)\n\(diagnosed.stderr)")
        let hosts = try #require(
            try JSONSerialization.jsonObject(with: Data(diagnosed.stdout.utf8)) as? [[String: Any]],
            "\(diagnosed.stdout)")
        let origin = "https://old.example.test:\(stack.extras["old.example.test"]?.port ?? 0)/"
        #expect(hosts.map { $0["url"] as? String } == [origin], "\(hosts)")
        let tests = hosts.first?["tests"] as? [[String: Any]] ?? []
        let byName = Dictionary(
            tests.map { ($0["name"] as? String ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        #expect(byName["ATS Default Connection"]?["result"] as? String == "FAIL", "\(tests)")
        #expect(byName["ATS Default Connection"]?["code"] as? String == "-1200 [3:-9836]", "\(tests)")
        #expect(byName["TLSv1.1"]?["result"] as? String == "PASS", "\(tests)")
        #expect(hosts.first?["defaultPassed"] as? Bool == false)

        try Self.fixThenVerify(report: report, original: stack.proxy.configPath, network: network, in: directory)
    }

    /// On the default platform (iOS 27) no Info.plist key lets an app reach a TLS 1.1 server: `fix` leaves the host
    /// out of the plist and says why, and `verify` keeps failing the load under the minimal dictionary.
    @Test(.timeLimit(.minutes(3))) func aTLS11ServerHasNoFixOnTheDefaultPlatform() throws {
        let directory = try TemporaryDirectory("verify-27")
        let reportDirectory = directory.file("out")
        let stack = try ProxyStack(arguments: ["--report", reportDirectory]) { directory, pki in
            [
                (
                    "old.example.test",
                    try Origin(
                        name: "old", directory: directory, tls: pki.leaf(["old.example.test"], file: "old"),
                        tlsVersion: "1.1")
                )
            ]
        }
        let old = stack.url("old.example.test", "/hello")
        #expect(try stack.curl(old).httpCode == 502)
        _ = stack.proxy.waitForLog("old.example.test")
        stack.proxy.child.signal(SIGUSR1)
        stack.proxy.waitForLog("report written to", timeout: 10)
        let report = reportDirectory + "/report.json"
        let environment = Invocation.environment(home: directory.path)
        let xml = directory.file("Info.plist")
        try FileManager.default.copyItem(atPath: stack.proxy.configPath, toPath: xml)
        let shown = try Invocation.run(["fix", "--report", report, xml], in: directory.path, environment: environment)
        #expect(!shown.stdout.contains("old.example.test"), "no key for the host: \(shown.stdout)")
        #expect(
            shown.stderr.contains("ats-proxy: old.example.test: no Info.plist change can allow this"), "\(shown.stderr)"
        )
        let verified = try Invocation.run(
            [
                "verify", "--report", report, "--resolve",
                "old.example.test:\(stack.extras["old.example.test"]?.port ?? 0):127.0.0.1", "--upstream-ca",
                stack.pki.caPath,
            ], in: directory.path, environment: environment, timeout: 60)
        #expect(verified.status == 1, "\(verified.stdout)\n\(verified.stderr)")
        #expect(verified.stdout.contains("FAIL  \(old)"), "\(verified.stdout)")
    }

    /// `fix`: the diff, nothing written without --write; with it an XML plist stays XML (with the App Review
    /// notes) and a binary one binary, every other key kept; `verify` then passes with the written plist.
    static func fixThenVerify(report: String, original: String, network: [String], in directory: TemporaryDirectory)
        throws
    {
        let environment = Invocation.environment(home: directory.path)
        let xml = directory.file("Info.plist")
        try FileManager.default.copyItem(atPath: original, toPath: xml)
        let before = try Data(contentsOf: URL(fileURLWithPath: xml))
        let shown = try Invocation.run(["fix", "--report", report, xml], in: directory.path, environment: environment)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.hasPrefix("--- \(xml)\n+++ \(xml) (fixed)\n"), "\(shown.stdout)")
        #expect(shown.stdout.contains("+\t\t\t<key>old.example.test</key>"), "\(shown.stdout)")
        // The session learnt only that the server refuses TLS 1.2: the minimal dictionary assumes TLS 1.0.
        #expect(shown.stdout.contains("+\t\t\t\t<string>TLSv1.0</string>"), "\(shown.stdout)")
        #expect(shown.stdout.contains("+\t\t\t<key>plain.example.test</key>"), "\(shown.stdout)")
        #expect(!shown.stdout.contains("\n-"), "nothing removed: \(shown.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: xml)) == before, "written without --write")

        let written = try Invocation.run(
            ["fix", "--report", report, xml, "--write"], in: directory.path, environment: environment)
        #expect(written.status == 0, "\(written.stderr)")
        let text = try String(contentsOfFile: xml, encoding: .utf8)
        #expect(text.hasPrefix("<?xml"), "XML stays XML")
        #expect(text.contains("<!-- NSExceptionMinimumTLSVersion"), "\(text)")
        #expect(text.contains("<key>CFBundleExecutable</key>") && text.contains("<key>legacy.example.test</key>"))
        let passes = try Invocation.run(
            ["verify", "--report", report, xml] + network, in: directory.path, environment: environment, timeout: 60)
        #expect(passes.status == 0, "\(passes.stdout)\n\(passes.stderr)")

        // A binary plist with an ATS dictionary of its own: unrelated keys stay, the file stays binary.
        let binary = directory.file("Binary-Info.plist")
        let root: [String: Any] = [
            "CFBundleIdentifier": "com.example.app",
            "NSAppTransportSecurity": [
                "NSAllowsArbitraryLoadsInWebContent": true,
                "NSExceptionDomains": ["cdn.example.test": ["NSIncludesSubdomains": true]],
            ],
        ]
        try PropertyListSerialization.data(fromPropertyList: root, format: .binary, options: 0)
            .write(to: URL(fileURLWithPath: binary))
        let binaryWritten = try Invocation.run(
            ["fix", "--report", report, binary, "--write"], in: directory.path, environment: environment)
        #expect(binaryWritten.status == 0, "\(binaryWritten.stderr)")
        let data = try Data(contentsOf: URL(fileURLWithPath: binary))
        #expect(data.prefix(8) == Data("bplist00".utf8), "binary stays binary")
        var format = PropertyListSerialization.PropertyListFormat.xml
        let merged = try #require(
            try PropertyListSerialization.propertyList(from: data, options: [], format: &format) as? [String: Any])
        #expect(merged["CFBundleIdentifier"] as? String == "com.example.app")
        let ats = try #require(merged["NSAppTransportSecurity"] as? [String: Any])
        #expect(ats["NSAllowsArbitraryLoadsInWebContent"] as? Bool == true)
        let domains = try #require(ats["NSExceptionDomains"] as? [String: Any])
        #expect((domains["cdn.example.test"] as? [String: Any])?["NSIncludesSubdomains"] as? Bool == true)
        #expect(
            (domains["old.example.test"] as? [String: Any])?["NSExceptionMinimumTLSVersion"] as? String == "TLSv1.0")
        let binaryPasses = try Invocation.run(
            ["verify", "--report", report, binary] + network, in: directory.path, environment: environment,
            timeout: 60)
        #expect(binaryPasses.status == 0, "\(binaryPasses.stdout)\n\(binaryPasses.stderr)")
    }
}
