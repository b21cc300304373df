import ATSSystemTools
import Foundation
import Testing

/// `ca install`/`uninstall`'s tools against fakes: `xcrun simctl keychain`, `security`, and the Linux anchor
/// directory with `update-ca-certificates`, including their failures.
@Suite struct TrustStoreToolTests {
    static func simulators(_ states: [(String, String)]) -> [String: Any] {
        ["simulators": states.map { ["udid": $0.0, "name": "iPhone \($0.0)", "state": $0.1] }]
    }

    @Test func bootedSimulatorGetsTheRootCertificate() throws {
        let fakes = try FakeTools(state: Self.simulators([("AAAA", "Booted"), ("BBBB", "Shutdown")]))
        let lines = try SimulatorKeychain(environment: fakes.environment).addRootCertificate(
            "/tmp/ca.pem", to: .init(argument: "booted"))
        #expect(lines == ["simulator booted: the proxy CA is now a trusted root"])
        #expect(fakes.calls() == [["xcrun", "simctl", "keychain", "booted", "add-root-cert", "/tmp/ca.pem"]])
    }

    @Test func allMeansEveryBootedSimulator() throws {
        let fakes = try FakeTools(
            state: Self.simulators([("AAAA", "Booted"), ("BBBB", "Shutdown"), ("CCCC", "Booted")]))
        let keychain = SimulatorKeychain(environment: fakes.environment)
        let lines = try keychain.addRootCertificate("/tmp/ca.pem", to: .allBooted)
        #expect(lines.count == 2)
        #expect(
            fakes.calls().filter { $0.contains("keychain") } == [
                ["xcrun", "simctl", "keychain", "AAAA", "add-root-cert", "/tmp/ca.pem"],
                ["xcrun", "simctl", "keychain", "CCCC", "add-root-cert", "/tmp/ca.pem"],
            ])
        _ = try keychain.reset(.device("AAAA"))
        #expect(fakes.calls().last == ["xcrun", "simctl", "keychain", "AAAA", "reset"])
    }

    @Test func noBootedSimulatorIsAClearError() throws {
        let fakes = try FakeTools(state: Self.simulators([("BBBB", "Shutdown")]))
        let keychain = SimulatorKeychain(environment: fakes.environment)
        let all = #expect(throws: ToolError.self) { _ = try keychain.addRootCertificate("/tmp/ca.pem", to: .allBooted) }
        #expect(all?.problem.hasPrefix("no booted simulator") == true)
        let booted = #expect(throws: ToolError.self) {
            _ = try keychain.addRootCertificate("/tmp/ca.pem", to: .booted)
        }
        #expect(
            booted?.description
                == "xcrun simctl keychain booted add-root-cert /tmp/ca.pem: exit status 149: No devices are booted.")
        let shutdown = #expect(throws: ToolError.self) {
            _ = try keychain.addRootCertificate("/tmp/ca.pem", to: .device("BBBB"))
        }
        #expect(shutdown?.problem.contains("Unable to lookup in current state: Shutdown") == true)
    }

    @Test func keychainTrustAndUntrustRunSecurity() throws {
        let fakes = try FakeTools(state: [:])
        let keychain = MacKeychain(environment: fakes.environment)
        let login = fakes.environment["HOME"]! + "/Library/Keychains/login.keychain-db"
        #expect(keychain.keychainPath == login)
        _ = try keychain.trust("/tmp/ca.pem")
        _ = try keychain.untrust("/tmp/ca.pem", sha256Hex: "AB12")
        #expect(
            fakes.calls() == [
                ["security", "add-trusted-cert", "-r", "trustRoot", "-k", login, "/tmp/ca.pem"],
                ["security", "remove-trusted-cert", "/tmp/ca.pem"],
                ["security", "delete-certificate", "-Z", "AB12", login],
            ])
    }

    @Test func keychainPermissionDeniedIsReportedInSecuritysWords() throws {
        let message =
            "SecTrustSettingsSetTrustSettings: The authorization was denied since no user interaction was possible."
        let fakes = try FakeTools(state: ["fail": ["add-trusted-cert": [message, 1, "stderr"]]])
        let error = #expect(throws: ToolError.self) {
            _ = try MacKeychain(environment: fakes.environment).trust("/tmp/ca.pem")
        }
        #expect(error?.problem == "exit status 1: \(message)")
    }

    @Test func linuxAnchorIsWrittenAndTheBundleRebuilt() throws {
        let fakes = try FakeTools(state: [:])
        let anchors = fakes.directory.appendingPathComponent("anchors").path
        let ca = fakes.directory.appendingPathComponent("ca.pem").path
        try Data("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".utf8).write(
            to: URL(fileURLWithPath: ca))
        let store = try LinuxTrustAnchors.detect(directory: anchors, environment: fakes.environment)
        #expect(store.layout.tool == "update-ca-certificates")
        let lines = try store.install(ca)
        #expect(
            FileManager.default.contents(atPath: anchors + "/ats-proxy-ca.crt")
                == FileManager.default.contents(atPath: ca))
        #expect(lines.last == "system trust store: update-ca-certificates ran (1 added, 0 removed; done.)")
        _ = try store.uninstall()
        #expect(!FileManager.default.fileExists(atPath: anchors + "/ats-proxy-ca.crt"))
        #expect(fakes.calls() == [["update-ca-certificates"], ["update-ca-certificates"]])
        #expect(LinuxTrustAnchors.Layout.debian.directory == "/usr/local/share/ca-certificates")
    }

    @Test func linuxUpdateFailureIsReported() throws {
        let fakes = try FakeTools(state: [
            "fail": [
                "update-ca-certificates": [
                    "ln: failed to create symbolic link '/etc/ssl/certs/ats-proxy-ca.pem': Permission denied", 1,
                    "stderr",
                ]
            ]
        ])
        let anchors = fakes.directory.appendingPathComponent("anchors").path
        let ca = fakes.directory.appendingPathComponent("ca.pem").path
        try Data("pem".utf8).write(to: URL(fileURLWithPath: ca))
        let error = #expect(throws: ToolError.self) {
            _ = try LinuxTrustAnchors.detect(directory: anchors, environment: fakes.environment).install(ca)
        }
        #expect(error?.problem.contains("Permission denied") == true)
    }

    @Test func linuxWithoutAnyUpdateToolSaysWhatToInstall() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = "/nonexistent"
        let error = #expect(throws: ToolError.self) {
            _ = try LinuxTrustAnchors.detect(directory: nil, environment: environment)
        }
        #expect(error?.problem.contains("apt-get install ca-certificates") == true)
    }

    @Test func systemBundlePathsListsExistingFilesOnce() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ats-bundles-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let real = directory.appendingPathComponent("tls-ca-bundle.pem").path
        try Data("x".utf8).write(to: URL(fileURLWithPath: real))
        let link = directory.appendingPathComponent("ca-bundle.crt").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        let paths = TrustOverlay.systemBundlePaths(candidates: [
            link, real, directory.appendingPathComponent("none").path,
        ])
        #expect(paths == [(real as NSString).resolvingSymlinksInPath])
    }
}
