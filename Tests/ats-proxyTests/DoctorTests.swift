import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// `ats-proxy doctor` as a user runs it, with the macOS and Linux tools replaced by stand-ins on PATH and a
/// private HOME (FakeToolsHarness): each set-up problem is staged for real (a CA key anyone can read, a CA about
/// to expire, a port in use, a bad settings file, a system proxy left by a killed run, a Simulator and a keychain
/// without the CA) and the finding, its fix and the exit status are checked.
@Suite(.serialized) struct DoctorTests {
    /// A Mac-like machine: one booted simulator, the network services of `macState`.
    static var macWithSimulator: [String: Any] {
        var state = FakeToolsHarness.macState
        state["simulators"] = [["udid": "A1", "name": "iPhone 16", "state": "Booted"]]
        return state
    }

    /// The findings of `doctor --format json`, keyed by check name (several findings of one check joined).
    struct Findings {
        let healthy: Bool
        let all: [[String: Any]]

        init(_ run: EnvironmentRun) throws {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stdout)")
            healthy = try #require(object["healthy"] as? Bool)
            all = try #require(object["findings"] as? [[String: Any]])
        }

        func of(_ check: String) -> [[String: Any]] { all.filter { $0["check"] as? String == check } }
        func statuses(_ check: String) -> [String] { of(check).compactMap { $0["status"] as? String } }
        func text(_ check: String) -> String {
            of(check).map { "\($0["explanation"] as? String ?? "") | fix: \($0["fix"] as? String ?? "-")" }
                .joined(separator: "\n")
        }
    }

    /// Runs `doctor --format json` with a free listen port and a private anchor directory, plus `arguments`.
    static func doctor(
        _ fakes: FakeToolsHarness, _ arguments: [String], extra: [String: String] = [:]
    ) throws -> (EnvironmentRun, Findings) {
        let anchors = fakes.directory.file("anchors")
        try FileManager.default.createDirectory(atPath: anchors, withIntermediateDirectories: true)
        var all = ["doctor", "--format", "json", "--anchor-dir", anchors]
        if !arguments.contains("--listen") { all += ["--listen", "127.0.0.1:\(try E2E.freePort())"] }
        let run = try fakes.run(all + arguments, extra: extra)
        return (run, try Findings(run))
    }

    @Test func aSetUpWithTheCATrustedEverywhereIsHealthy() throws {
        let fakes = try FakeToolsHarness(state: Self.macWithSimulator)
        let (ca, _) = try SystemToolsCLITests.caDirectory(fakes)
        let anchors = fakes.directory.file("anchors")
        for store in [["--simulator", "all"], ["--keychain"], ["--system", "--anchor-dir", anchors]] {
            let installed = try fakes.run(["ca", "install", "--ca-dir", ca.path] + store)
            #expect(installed.status == 0, "\(installed.stderr)")
        }
        let (run, findings) = try Self.doctor(fakes, ["--ca-dir", ca.path])
        #expect(run.status == 0, "\(run.stdout)")
        #expect(findings.healthy)
        for check in [
            "CA key", "CA validity", "system trust", "keychain trust", "Simulator trust", "system proxy", "listen",
            "settings", "OpenSSL",
        ] {
            #expect(findings.statuses(check) == ["ok"], "\(check): \(findings.text(check))")
        }
        #expect(findings.text("Simulator trust").contains("iPhone 16 (A1) trusts the CA"))
        // Optional things are warnings at most: no CT list cached here.
        #expect(findings.statuses("CT log list") == ["warning"])
        #expect(findings.text("CT log list").contains("no CT log list cached"))
        // The text form says the same, one finding per line, and ends with the count.
        let text = try fakes.run([
            "doctor", "--ca-dir", ca.path, "--anchor-dir", anchors, "--listen", "127.0.0.1:\(try E2E.freePort())",
        ])
        #expect(text.status == 0)
        #expect(text.stdout.contains("ok       Simulator trust: iPhone 16 (A1) trusts the CA"), "\(text.stdout)")
        #expect(text.stdout.contains("0 problems,"))
    }

    @Test func aCAKeyOthersCanReadIsAProblemWithTheChmodFix() throws {
        let fakes = try FakeToolsHarness(state: [:])
        let (ca, _) = try SystemToolsCLITests.caDirectory(fakes)
        let key = ca.file("ats-proxy-ca-key.pem")
        #expect(chmod(key, 0o644) == 0)
        let (run, findings) = try Self.doctor(fakes, ["--ca-dir", ca.path])
        #expect(run.status == 1)
        #expect(!findings.healthy)
        #expect(findings.statuses("CA key") == ["problem"])
        #expect(findings.text("CA key").contains("(mode 0644)"), "\(findings.text("CA key"))")
        #expect(findings.text("CA key").contains("fix: chmod 600 \(key)"))
        // The dates are still read, and nothing else is blamed on the key.
        #expect(findings.statuses("CA validity") == ["ok"])
        #expect(findings.statuses("CA").isEmpty, "\(findings.text("CA"))")
        #expect(chmod(key, 0o600) == 0)
        let (fixed, _) = try Self.doctor(fakes, ["--ca-dir", ca.path])
        #expect(fixed.status == 0, "\(fixed.stdout)")
    }

    @Test func aCAAboutToExpireAndAMissingCAAreReported() throws {
        let fakes = try FakeToolsHarness(state: [:])
        let ca = try TemporaryDirectory("doctor-ca")
        // Minted 3640 days ago with the proxy's own 3650-day validity: 10 days left.
        try CertificateAuthority.generate(now: Date().addingTimeInterval(-3640 * 86400)).write(to: ca.path)
        let (run, findings) = try Self.doctor(fakes, ["--ca-dir", ca.path])
        #expect(run.status == 1)
        #expect(findings.statuses("CA validity") == ["problem"])
        #expect(
            findings.text("CA validity").contains("in 9 days") || findings.text("CA validity").contains("in 10 days"))
        #expect(findings.text("CA validity").contains("ats-proxy ca init"))

        let empty = try TemporaryDirectory("doctor-no-ca")
        let (none, noneFindings) = try Self.doctor(fakes, ["--ca-dir", empty.path])
        #expect(none.status == 0, "a CA not created yet is a warning: the first run creates it")
        #expect(noneFindings.statuses("CA") == ["warning"])
        #expect(noneFindings.text("CA").contains("fix: ats-proxy ca init"))
    }

    @Test func aListenPortInUseIsAProblem() throws {
        let fakes = try FakeToolsHarness(state: [:])
        let (ca, _) = try SystemToolsCLITests.caDirectory(fakes)
        let listener = try TestServer(.silent)  // listens on 127.0.0.1, a port of its own
        defer { listener.stop() }
        let port = Int(listener.port)
        let (run, findings) = try Self.doctor(fakes, ["--ca-dir", ca.path, "--listen", "127.0.0.1:\(port)"])
        #expect(run.status == 1)
        #expect(findings.statuses("listen") == ["problem"])
        #expect(findings.text("listen").contains("127.0.0.1:\(port) is in use"), "\(findings.text("listen"))")
        #expect(findings.text("listen").contains("--listen 127.0.0.1:\(port + 1)"))
    }

    @Test func aSettingsFileWithAWrongKeyIsAProblemInTheLoadersWords() throws {
        let fakes = try FakeToolsHarness(state: [:])
        let (ca, _) = try SystemToolsCLITests.caDirectory(fakes)
        let settings = try fakes.directory.write("ats-proxy.yaml", "lisen: 127.0.0.1:9000\n")
        let (run, findings) = try Self.doctor(fakes, ["--ca-dir", ca.path], extra: ["ATS_PROXY_SETTINGS": settings])
        #expect(run.status == 1)
        #expect(findings.statuses("settings") == ["problem"])
        #expect(findings.text("settings").contains("\(settings): unknown key 'lisen'"), "\(findings.text("settings"))")
        #expect(findings.text("settings").contains("ats-proxy settings show"))

        let good = try fakes.directory.write("good.json", "{\"listen\": [\"127.0.0.1:\(try E2E.freePort())\"]}")
        let (fine, fineFindings) = try Self.doctor(fakes, ["--ca-dir", ca.path, "--settings", good])
        #expect(fine.status == 0, "\(fine.stdout)")
        #expect(fineFindings.text("settings").contains("\(good): 1 setting"))
    }

    @Test func aSystemProxyLeftByAKilledRunIsAProblemUntilRestored() throws {
        let fakes = try FakeToolsHarness(state: FakeToolsHarness.macState)
        let (ca, _) = try SystemToolsCLITests.caDirectory(fakes)
        let crashed = try fakes.start([
            "run", "--system-proxy", "--listen", "127.0.0.1:0", "--ca-dir", ca.path, "--quiet",
        ])
        #expect(crashed.waitForStderr("system proxy: restored at exit"), "\(crashed.stderrText)")
        crashed.stop()  // SIGKILL: the saved state stays behind
        let (run, findings) = try Self.doctor(fakes, ["--ca-dir", ca.path])
        #expect(run.status == 1)
        #expect(findings.statuses("system proxy") == ["problem"])
        #expect(findings.text("system proxy").contains("pid \(crashed.pid), gone"), "\(findings.text("system proxy"))")
        #expect(findings.text("system proxy").contains("fix: ats-proxy system-proxy restore"))

        #expect(try fakes.run(["system-proxy", "restore"]).status == 0)
        let (after, afterFindings) = try Self.doctor(fakes, ["--ca-dir", ca.path])
        #expect(afterFindings.statuses("system proxy") == ["ok"])
        #expect(after.status == 0, "\(after.stdout)")
    }

    @Test func aSimulatorAndAKeychainWithoutTheCAAreFoundThroughTheirTools() throws {
        var state = Self.macWithSimulator
        state["simulators"] = [
            ["udid": "A1", "name": "iPhone 16", "state": "Booted"],
            ["udid": "B2", "name": "iPad Air", "state": "Booted"],
            ["udid": "C3", "name": "iPhone SE", "state": "Shutdown"],
        ]
        let fakes = try FakeToolsHarness(state: state)
        let (ca, _) = try SystemToolsCLITests.caDirectory(fakes)
        #expect(try fakes.run(["ca", "install", "--ca-dir", ca.path, "--simulator", "A1"]).status == 0)
        let (run, findings) = try Self.doctor(fakes, ["--ca-dir", ca.path])
        #expect(run.status == 1)
        #expect(
            findings.statuses("Simulator trust").sorted() == ["ok", "problem"], "\(findings.text("Simulator trust"))")
        let simulators = findings.text("Simulator trust")
        #expect(simulators.contains("iPhone 16 (A1) trusts the CA"))
        #expect(simulators.contains("iPad Air (B2) has no added root certificate"))
        #expect(simulators.contains("fix: ats-proxy ca install --simulator B2"))
        #expect(!simulators.contains("C3"), "a shut-down simulator is not checked")
        #expect(findings.statuses("keychain trust") == ["warning"])
        #expect(findings.text("keychain trust").contains("fix: ats-proxy ca install --keychain"))
        #expect(fakes.calls().contains(["security", "verify-cert", "-c", ca.file("ats-proxy-ca.pem"), "-L"]))

        // Without the macOS tools on PATH (Linux), those checks do not apply.
        let (_, linuxFindings) = try Self.doctor(
            fakes, ["--ca-dir", ca.path], extra: ["PATH": "/usr/local/bin:/usr/bin:/bin"])
        #expect(linuxFindings.of("Simulator trust").isEmpty && linuxFindings.of("keychain trust").isEmpty)
    }

    @Test func theReportNamesOpenSSLAndItsPostQuantumCapability() throws {
        let fakes = try FakeToolsHarness(state: [:])
        let (ca, _) = try SystemToolsCLITests.caDirectory(fakes)
        let (_, findings) = try Self.doctor(fakes, ["--ca-dir", ca.path])
        #expect(findings.text("OpenSSL").hasPrefix(OpenSSLLibrary.version))
        let expected = OpenSSLLibrary.supportsKeyExchangeGroup("X25519MLKEM768") ? "ok" : "warning"
        #expect(findings.statuses("post-quantum TLS") == [expected])
        #expect(findings.text("post-quantum TLS").contains("X25519MLKEM768"))
    }
}
