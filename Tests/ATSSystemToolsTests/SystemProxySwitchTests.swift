import ATSSystemTools
import Foundation
import Testing

/// `--system-proxy` against a fake `networksetup` that keeps its services and proxies in a file: set and
/// restore, crash recovery from the saved state, refusal to clobber another instance's state, failures
/// of the tool (no network service, permission denied) and settings changed by someone else meanwhile.
@Suite struct SystemProxySwitchTests {
    static func makeSwitch(_ fakes: FakeTools) -> SystemProxySwitch {
        SystemProxySwitch(
            networkSetup: NetworkSetup(environment: fakes.environment),
            stateFile: .standard(environment: fakes.environment))
    }

    @Test func engageSetsEveryEnabledServiceAndRestorePutsEachBack() throws {
        let fakes = try FakeTools(state: FakeTools.macState())
        let proxySwitch = Self.makeSwitch(fakes)
        let lines = try proxySwitch.engage(host: "127.0.0.1", port: 8080, services: nil)
        #expect(proxySwitch.isEngaged)
        for service in ["Wi-Fi", "Thunderbolt Bridge"] {
            for kind in ["web", "secureWeb"] {
                let setting = try #require(try fakes.proxy(service, kind))
                #expect(setting == (true, "127.0.0.1", 8080), "\(service) \(kind)")
            }
        }
        #expect(try fakes.proxy("Bluetooth PAN", "web") == nil, "a disabled service is left alone")
        #expect(FileManager.default.fileExists(atPath: fakes.stateFilePath), "the previous settings are saved")
        #expect(
            lines.contains {
                $0.contains("Thunderbolt Bridge HTTPS proxy → 127.0.0.1:8080 (was off (corp.example:3128 kept))")
            })
        #expect(lines.last?.contains("ats-proxy system-proxy restore") == true)
        // The state was saved before the first change.
        let calls = fakes.calls()
        let firstSet = try #require(calls.firstIndex { $0.count > 1 && $0[1].hasPrefix("-set") })
        #expect(calls[..<firstSet].filter { $0.count > 1 && $0[1].hasPrefix("-get") }.count == 4)

        let restored = proxySwitch.restore()
        #expect(!proxySwitch.isEngaged)
        #expect(try fakes.proxy("Wi-Fi", "web")?.enabled == false)
        #expect(try fakes.proxy("Wi-Fi", "secureWeb")?.enabled == false)
        let corporate = try #require(try fakes.proxy("Thunderbolt Bridge", "secureWeb"))
        #expect(corporate == (false, "corp.example", 3128), "the corporate proxy's server comes back, switched off")
        #expect(restored.count == 4)
        #expect(!FileManager.default.fileExists(atPath: fakes.stateFilePath), "a complete restore deletes the state")
        #expect(proxySwitch.restore().isEmpty, "a second restore does nothing")
        #expect(
            fakes.changingCalls().suffix(2) == [
                ["networksetup", "-setsecurewebproxy", "Thunderbolt Bridge", "corp.example", "3128"],
                ["networksetup", "-setsecurewebproxystate", "Thunderbolt Bridge", "off"],
            ])
    }

    @Test func onlyTheNamedServicesChange() throws {
        let fakes = try FakeTools(state: FakeTools.macState())
        _ = try Self.makeSwitch(fakes).engage(host: "127.0.0.1", port: 9000, services: ["Wi-Fi"])
        #expect(try fakes.proxy("Wi-Fi", "web")?.port == 9000)
        #expect(try fakes.proxy("Thunderbolt Bridge", "web")?.enabled == false)
    }

    @Test func aSavedStateOfARunningInstanceIsNeverOverwritten() throws {
        let fakes = try FakeTools(state: FakeTools.macState())
        let first = Self.makeSwitch(fakes)
        _ = try first.engage(host: "127.0.0.1", port: 8080, services: nil)
        let saved = try Data(contentsOf: URL(fileURLWithPath: fakes.stateFilePath))
        // Another instance, pretending to be another live process (pid 1 is alive).
        var foreign = try #require(try SystemProxyStateFile.standard(environment: fakes.environment).load())
        foreign.ownerPID = 1
        try FileManager.default.removeItem(atPath: fakes.stateFilePath)
        try SystemProxyStateFile.standard(environment: fakes.environment).create(foreign)
        let changesBefore = fakes.changingCalls().count
        let second = Self.makeSwitch(fakes)
        let error = #expect(throws: ToolError.self) {
            _ = try second.engage(host: "127.0.0.1", port: 9999, services: nil)
        }
        #expect(error?.problem.contains("another ats-proxy (pid 1)") == true, "\(String(describing: error))")
        #expect(fakes.changingCalls().count == changesBefore, "nothing was changed")
        #expect(try SystemProxyStateFile.standard(environment: fakes.environment).load() == foreign)
        #expect(!saved.isEmpty)
    }

    @Test func aCrashLeavesTheStateAndRestoreFromItPutsTheSettingsBack() throws {
        let fakes = try FakeTools(state: FakeTools.macState())
        _ = try Self.makeSwitch(fakes).engage(host: "127.0.0.1", port: 8080, services: nil)
        // The process that saved it is gone (a finished child's pid).
        let stateFile = SystemProxyStateFile.standard(environment: fakes.environment)
        var saved = try #require(try stateFile.load())
        saved.ownerPID = try Self.deadPID()
        stateFile.remove()
        try stateFile.create(saved)

        let next = Self.makeSwitch(fakes)
        let refusal = #expect(throws: ToolError.self) {
            _ = try next.engage(host: "127.0.0.1", port: 8081, services: nil)
        }
        #expect(
            refusal?.problem.contains("ended without restoring it; run 'ats-proxy system-proxy restore' first") == true)

        let outcome = SystemProxySwitch.restore(
            saved, networkSetup: NetworkSetup(environment: fakes.environment), stateFile: stateFile)
        #expect(outcome.complete)
        #expect(try fakes.proxy("Wi-Fi", "web")?.enabled == false)
        #expect(try fakes.proxy("Thunderbolt Bridge", "secureWeb")! == (false, "corp.example", 3128))
        #expect(try stateFile.load() == nil)
        // Now a new instance may set it.
        _ = try Self.makeSwitch(fakes).engage(host: "127.0.0.1", port: 8081, services: nil)
        #expect(try fakes.proxy("Wi-Fi", "web")?.port == 8081)
    }

    @Test func aSettingChangedSinceIsLeftAlone() throws {
        let fakes = try FakeTools(state: FakeTools.macState())
        let proxySwitch = Self.makeSwitch(fakes)
        _ = try proxySwitch.engage(host: "127.0.0.1", port: 8080, services: ["Wi-Fi"])
        // The user points Wi-Fi's HTTP proxy elsewhere while ats-proxy runs.
        var state = try fakes.state()
        var proxies = state["proxies"] as! [String: Any]
        var wifi = proxies["Wi-Fi"] as! [String: Any]
        wifi["web"] = ["enabled": true, "server": "10.0.0.9", "port": 3128]
        proxies["Wi-Fi"] = wifi
        state["proxies"] = proxies
        try fakes.setState(state)
        let lines = proxySwitch.restore()
        #expect(lines.contains { $0.contains("Wi-Fi HTTP proxy left as it is (on 10.0.0.9:3128)") })
        #expect(try fakes.proxy("Wi-Fi", "web")! == (true, "10.0.0.9", 3128))
        #expect(try fakes.proxy("Wi-Fi", "secureWeb")?.enabled == false)
    }

    @Test func permissionDeniedPartWayPutsBackWhatChangedAndThrows() throws {
        var state = FakeTools.macState()
        state["fail"] = ["set:Thunderbolt Bridge:web": ["** Error: Command requires admin privileges.", 14, "stdout"]]
        let fakes = try FakeTools(state: state)
        let proxySwitch = Self.makeSwitch(fakes)
        let error = #expect(throws: ToolError.self) {
            _ = try proxySwitch.engage(host: "127.0.0.1", port: 8080, services: nil)
        }
        #expect(
            error?.description.contains("Command requires admin privileges") == true, "\(String(describing: error))")
        #expect(error?.description.contains("the previous settings were put back") == true)
        #expect(try fakes.proxy("Wi-Fi", "web")?.enabled == false)
        #expect(try fakes.proxy("Wi-Fi", "secureWeb")?.enabled == false)
        #expect(!FileManager.default.fileExists(atPath: fakes.stateFilePath))
        #expect(!proxySwitch.isEngaged)
    }

    @Test func noEnabledNetworkServiceIsAnError() throws {
        let fakes = try FakeTools(state: ["services": ["*Wi-Fi"]])
        let error = #expect(throws: ToolError.self) {
            _ = try Self.makeSwitch(fakes).engage(host: "127.0.0.1", port: 8080, services: nil)
        }
        #expect(error?.description == "networksetup -listallnetworkservices: no enabled network service")
        #expect(!FileManager.default.fileExists(atPath: fakes.stateFilePath))
    }

    @Test func anUnknownServiceIsReportedInTheToolsWords() throws {
        let fakes = try FakeTools(state: FakeTools.macState())
        let error = #expect(throws: ToolError.self) {
            _ = try Self.makeSwitch(fakes).engage(host: "127.0.0.1", port: 8080, services: ["Ethernet"])
        }
        #expect(
            error?.description == "networksetup -getwebproxy Ethernet: Ethernet is not a recognized network service.")
    }

    @Test func aFailedRestoreKeepsTheStateForALaterRun() throws {
        let fakes = try FakeTools(state: FakeTools.macState())
        let proxySwitch = Self.makeSwitch(fakes)
        _ = try proxySwitch.engage(host: "127.0.0.1", port: 8080, services: ["Wi-Fi"])
        var state = try fakes.state()
        state["fail"] = ["state": ["** Error: Command requires admin privileges.", 14, "stdout"]]
        try fakes.setState(state)
        let lines = proxySwitch.restore()
        #expect(lines.contains { $0.contains("error: Wi-Fi HTTP proxy not restored") })
        #expect(lines.last?.contains("run 'ats-proxy system-proxy restore'") == true)
        #expect(FileManager.default.fileExists(atPath: fakes.stateFilePath))
    }

    @Test func networkSetupParsesItsAnswers() throws {
        let fakes = try FakeTools(state: FakeTools.macState())
        let networkSetup = NetworkSetup(environment: fakes.environment)
        #expect(try networkSetup.enabledServices() == ["Wi-Fi", "Thunderbolt Bridge"])
        #expect(
            try networkSetup.proxy(.secureWeb, of: "Thunderbolt Bridge")
                == NetworkSetup.ProxySetting(enabled: false, server: "corp.example", port: 3128))
    }

    @Test func aMissingToolSaysItIsNotOnPath() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = "/nonexistent"
        let error = #expect(throws: ToolError.self) { _ = try NetworkSetup(environment: environment).enabledServices() }
        #expect(error?.problem == "'networksetup' is not on PATH")
    }

    /// The pid of a process that has exited (and been reaped).
    static func deadPID() throws -> Int32 {
        let process = try ChildProcess(executable: "/bin/true", arguments: [], environment: [:])
        process.waitUntilExit()
        return process.processIdentifier
    }
}
