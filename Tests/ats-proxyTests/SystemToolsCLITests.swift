import ATSTestSupport
import Foundation
import Testing

/// `--system-proxy`, `system-proxy restore|status` and `ca install|uninstall` as a user runs them, with fake
/// macOS and Linux tools on PATH (nothing on this machine is changed).
@Suite(.serialized) struct SystemToolsCLITests {
    @Test func execSetsTheSystemProxyForTheCommandAndRestoresItAfter() throws {
        let fakes = try FakeToolsHarness(state: FakeToolsHarness.macState)
        let caDirectory = try TemporaryDirectory("sysproxy-ca")
        let result = try fakes.run([
            "exec", "--system-proxy", "--ca-dir", caDirectory.path, "--diagnostics", "0", "--",
            "/bin/cat", fakes.directory.file("state.json"),
        ])
        #expect(result.status == 0, "\(result.stderr)")
        // What the command saw while it ran: both services pointed at the proxy.
        let during = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let proxies = during?["proxies"] as? [String: [String: [String: Any]]]
        let port = try #require(proxies?["Wi-Fi"]?["web"]?["port"] as? Int)
        #expect(port > 0)
        #expect(proxies?["Ethernet"]?["secureWeb"]?["server"] as? String == "127.0.0.1")
        #expect(result.stderr.contains("ats-proxy: system proxy: Wi-Fi HTTP proxy → 127.0.0.1:\(port) (was off)"))
        #expect(result.stderr.contains("after a crash run 'ats-proxy system-proxy restore'"))
        // After: as before, and the saved state is gone.
        #expect(try fakes.proxy("Wi-Fi", "web") == "off 127.0.0.1:\(port)")
        #expect(try fakes.proxy("Ethernet", "secureWeb") == "off corp.example:3128")
        #expect(result.stderr.contains("system proxy: Ethernet HTTPS proxy restored (off (corp.example:3128 kept))"))
        #expect(!FileManager.default.fileExists(atPath: fakes.stateFilePath))
    }

    @Test func runRestoresOnSIGTERMAndASecondInstanceRefusesToClobber() throws {
        let fakes = try FakeToolsHarness(state: FakeToolsHarness.macState)
        let caDirectory = try TemporaryDirectory("sysproxy-ca")
        let first = try fakes.start([
            "run", "--system-proxy", "--system-proxy-service", "Wi-Fi", "--listen", "127.0.0.1:0", "--ca-dir",
            caDirectory.path, "--quiet",
        ])
        defer { first.stop() }
        #expect(first.waitForStderr("system proxy: restored at exit"), "\(first.stderrText)")
        #expect(try fakes.proxy("Wi-Fi", "web").hasPrefix("on 127.0.0.1:"))
        #expect(try fakes.proxy("Ethernet", "secureWeb") == "off corp.example:3128", "not named: untouched")

        let second = try fakes.run([
            "exec", "--system-proxy", "--ca-dir", caDirectory.path, "--diagnostics", "0", "--", "/bin/true",
        ])
        #expect(second.status == 2)
        #expect(second.stderr.contains("another ats-proxy (pid \(first.pid)) set the system proxy"), "\(second.stderr)")
        let restoreWhileRunning = try fakes.run(["system-proxy", "restore"])
        #expect(restoreWhileRunning.status == 2)
        #expect(restoreWhileRunning.stderr.contains("is still running"))

        first.signal(SIGTERM)
        #expect(first.wait(timeout: 30))
        #expect(first.status == 0)
        #expect(try fakes.proxy("Wi-Fi", "web").hasPrefix("off "))
        #expect(first.stderrText.contains("system proxy: Wi-Fi HTTP proxy restored (off)"))
        #expect(!FileManager.default.fileExists(atPath: fakes.stateFilePath))
    }

    @Test func afterACrashSystemProxyRestorePutsTheSettingsBack() throws {
        let fakes = try FakeToolsHarness(state: FakeToolsHarness.macState)
        let caDirectory = try TemporaryDirectory("sysproxy-ca")
        let crashed = try fakes.start([
            "run", "--system-proxy", "--listen", "127.0.0.1:0", "--ca-dir", caDirectory.path, "--quiet",
        ])
        #expect(crashed.waitForStderr("system proxy: restored at exit"), "\(crashed.stderrText)")
        crashed.stop()  // SIGKILL: no chance to restore
        #expect(try fakes.proxy("Wi-Fi", "secureWeb").hasPrefix("on 127.0.0.1:"))

        let status = try fakes.run(["system-proxy", "status"])
        #expect(status.stdout.contains("by pid \(crashed.pid) (no longer running"), "\(status.stdout)")
        #expect(status.stdout.contains("Ethernet: HTTP was off, HTTPS was off (corp.example:3128 kept)"))
        let refused = try fakes.run([
            "exec", "--system-proxy", "--ca-dir", caDirectory.path, "--diagnostics", "0", "--", "/bin/true",
        ])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("ended without restoring it; run 'ats-proxy system-proxy restore' first"))

        let restored = try fakes.run(["system-proxy", "restore"])
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(restored.stdout.contains("ats-proxy: system proxy: Wi-Fi HTTPS proxy restored (off)"))
        #expect(try fakes.proxy("Wi-Fi", "secureWeb").hasPrefix("off "))
        #expect(try fakes.proxy("Ethernet", "secureWeb") == "off corp.example:3128")
        let again = try fakes.run(["system-proxy", "restore"])
        #expect(again.status == 0)
        #expect(again.stdout.contains("nothing to restore"))
    }

    @Test func withoutNetworksetupSystemProxyIsABadSetUp() throws {
        let fakes = try FakeToolsHarness(state: [:])
        let caDirectory = try TemporaryDirectory("sysproxy-ca")
        let result = try fakes.run(
            ["exec", "--system-proxy", "--ca-dir", caDirectory.path, "--", "/bin/true"],
            extra: ["PATH": "/usr/bin:/bin"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--system-proxy needs macOS's networksetup"), "\(result.stderr)")
        let noService = try FakeToolsHarness(state: ["services": ["*Wi-Fi"]])
        let none = try noService.run(["exec", "--system-proxy", "--ca-dir", caDirectory.path, "--", "/bin/true"])
        #expect(none.status == 2)
        #expect(none.stderr.contains("no enabled network service"))
    }

    /// A CA directory with a CA in it, made by `ca init`.
    static func caDirectory(_ fakes: FakeToolsHarness) throws -> (directory: TemporaryDirectory, certificate: String) {
        let directory = try TemporaryDirectory("install-ca")
        let made = try fakes.run(["ca", "init", "--ca-dir", directory.path])
        #expect(made.status == 0)
        return (directory, directory.file("ats-proxy-ca.pem"))
    }

    /// `ca install` takes its CA directory from the settings file like `run` does: the simulator trusts the CA the
    /// proxy will use.
    @Test func caInstallReadsTheSettingsFile() throws {
        let fakes = try FakeToolsHarness(state: [
            "simulators": [["udid": "A1", "name": "iPhone 16", "state": "Booted"]]
        ])
        let (directory, certificate) = try Self.caDirectory(fakes)
        let settings = fakes.directory.file("team-settings.yaml")
        try Data("ca-dir: \(directory.path)\n".utf8).write(to: URL(fileURLWithPath: settings))
        let installed = try fakes.run(
            ["ca", "install", "--simulator", "booted"], extra: ["ATS_PROXY_SETTINGS": settings])
        #expect(installed.status == 0, "\(installed.stderr)")
        #expect(
            fakes.calls().filter { $0.contains("add-root-cert") } == [
                ["xcrun", "simctl", "keychain", "booted", "add-root-cert", certificate]
            ])
    }

    @Test func caInstallSimulatorRunsSimctlAndReportsNoBootedSimulator() throws {
        let fakes = try FakeToolsHarness(state: [
            "simulators": [
                ["udid": "A1", "name": "iPhone 16", "state": "Booted"],
                ["udid": "B2", "name": "iPad", "state": "Booted"],
            ]
        ])
        let (directory, certificate) = try Self.caDirectory(fakes)
        let all = try fakes.run(["ca", "install", "--simulator", "all", "--ca-dir", directory.path])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains("ats-proxy: simulator A1: the proxy CA is now a trusted root"))
        #expect(
            fakes.calls().filter { $0.contains("add-root-cert") } == [
                ["xcrun", "simctl", "keychain", "A1", "add-root-cert", certificate],
                ["xcrun", "simctl", "keychain", "B2", "add-root-cert", certificate],
            ])
        let reset = try fakes.run(["ca", "uninstall", "--simulator", "B2", "--ca-dir", directory.path])
        #expect(reset.status == 0)
        #expect(fakes.calls().last == ["xcrun", "simctl", "keychain", "B2", "reset"])

        try fakes.setState(["simulators": [["udid": "A1", "name": "iPhone 16", "state": "Shutdown"]]])
        let none = try fakes.run(["ca", "install", "--simulator", "booted", "--ca-dir", directory.path])
        #expect(none.status == 1)
        #expect(
            none.stderr.contains("ats-proxy: error: --simulator booted: xcrun simctl keychain booted add-root-cert"))
        #expect(none.stderr.contains("No devices are booted."))
        let noneAll = try fakes.run(["ca", "install", "--simulator", "all", "--ca-dir", directory.path])
        #expect(noneAll.status == 1)
        #expect(noneAll.stderr.contains("no booted simulator"))
    }

    @Test func caInstallKeychainAndSystemRunTheirTools() throws {
        let fakes = try FakeToolsHarness(state: [:])
        let (directory, certificate) = try Self.caDirectory(fakes)
        let login = fakes.environment["HOME"]! + "/Library/Keychains/login.keychain-db"
        let anchors = fakes.directory.file("anchors")
        let install = try fakes.run([
            "ca", "install", "--keychain", "--system", "--anchor-dir", anchors, "--ca-dir", directory.path,
        ])
        #expect(install.status == 0, "\(install.stderr)")
        #expect(
            fakes.calls().first == ["security", "add-trusted-cert", "-r", "trustRoot", "-k", login, certificate])
        #expect(
            FileManager.default.contents(atPath: anchors + "/ats-proxy-ca.crt")
                == FileManager.default.contents(atPath: certificate))
        #expect(fakes.calls().last == ["update-ca-certificates"])

        let uninstall = try fakes.run([
            "ca", "uninstall", "--keychain", "--system", "--anchor-dir", anchors, "--ca-dir", directory.path,
        ])
        #expect(uninstall.status == 0, "\(uninstall.stderr)")
        let delete = try #require(fakes.calls().first { $0.count > 1 && $0[1] == "delete-certificate" })
        #expect(delete.count == 5 && delete[2] == "-Z" && delete[4] == login)
        #expect(delete[3].count == 64 && delete[3].allSatisfy(\.isHexDigit), "SHA-256 of the CA: \(delete[3])")
        #expect(!FileManager.default.fileExists(atPath: anchors + "/ats-proxy-ca.crt"))

        try fakes.setState([
            "fail": [
                "add-trusted-cert": [
                    "SecTrustSettingsSetTrustSettings: The authorization was denied since no user interaction was possible.",
                    1, "stderr",
                ]
            ]
        ])
        let denied = try fakes.run(["ca", "install", "--keychain", "--ca-dir", directory.path])
        #expect(denied.status == 1)
        #expect(denied.stderr.contains("The authorization was denied"))
        let nowhere = try fakes.run(["ca", "install", "--ca-dir", directory.path])
        #expect(nowhere.status == 2)
        #expect(
            nowhere.stderr.contains("say where: --simulator booted|UDID|all, --keychain (macOS) or --system (Linux)"))
    }
}
