import ATSSystemTools
import ATSTestSupport
import Foundation
import Testing

/// Fake `networksetup`, `security`, `xcrun`, `sqlite3` and `update-ca-certificates` (`Fixtures/fake-tools`) first on
/// PATH, their state and call log, and `ats-proxy` runs in that environment; HOME and the saved-state
/// directory are private to the instance, so nothing on the machine is read or changed.
final class FakeToolsHarness: @unchecked Sendable {
    let directory: TemporaryDirectory
    let bin: String

    init(state: [String: Any]) throws {
        directory = try TemporaryDirectory("fake-tools")
        bin = directory.file("bin")
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        for name in ["networksetup", "security", "xcrun", "sqlite3", "update-ca-certificates"] {
            try FileManager.default.createSymbolicLink(
                atPath: "\(bin)/\(name)", withDestinationPath: E2E.fixture("fake-tools/fake_tool.py"))
        }
        try setState(state)
    }

    var environment: [String: String] {
        var environment = E2E.environment
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["FAKE_TOOLS_DIR"] = directory.path
        environment["HOME"] = directory.file("home")
        environment["ATS_PROXY_STATE_DIR"] = directory.file("state")
        return environment
    }

    var stateFilePath: String { directory.file("state/system-proxy.json") }

    func setState(_ state: [String: Any]) throws {
        try JSONSerialization.data(withJSONObject: state, options: [.sortedKeys]).write(
            to: URL(fileURLWithPath: directory.file("state.json")))
    }

    func state() throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: directory.file("state.json")))
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    /// `proxies[service][kind]` as `on HOST:PORT` or `off` (server kept or not), for comparisons.
    func proxy(_ service: String, _ kind: String) throws -> String {
        let proxies = try state()["proxies"] as? [String: Any]
        guard let setting = (proxies?[service] as? [String: Any])?[kind] as? [String: Any] else { return "none" }
        let enabled = setting["enabled"] as? Bool ?? false
        return "\(enabled ? "on" : "off") \(setting["server"] as? String ?? ""):\(setting["port"] as? Int ?? 0)"
    }

    func calls() -> [[String]] {
        let text = (try? String(contentsOfFile: directory.file("calls.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String]
        }
    }

    /// A Mac with Wi-Fi (no proxy), a disabled service, and Ethernet with a switched-off corporate HTTPS proxy.
    static var macState: [String: Any] {
        [
            "services": ["Wi-Fi", "*Bluetooth PAN", "Ethernet"],
            "proxies": [
                "Ethernet": ["secureWeb": ["enabled": false, "server": "corp.example", "port": 3128]]
            ],
        ]
    }

    /// Runs `ats-proxy` with `arguments` in this environment (plus `extra`), bounded by `timeout`.
    func run(_ arguments: [String], extra: [String: String] = [:], timeout: Double = 60) throws -> EnvironmentRun {
        let child = try start(arguments, extra: extra)
        let finished = child.wait(timeout: timeout)
        if !finished { child.stop() }
        #expect(finished, "ats-proxy \(arguments) did not finish")
        return EnvironmentRun(status: finished ? child.status : -1, stdout: child.stdoutText, stderr: child.stderrText)
    }

    /// Starts `ats-proxy` with `arguments` in this environment; the caller stops it.
    func start(_ arguments: [String], extra: [String: String] = [:]) throws -> EnvironmentChild {
        try EnvironmentChild(
            executable: CLITests.binary.path, arguments: arguments,
            environment: environment.merging(extra) { $1 }, directory: directory)
    }
}

/// What a finished run printed and returned.
struct EnvironmentRun {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// A child process with its own environment and its output in files; killed by PID when released.
final class EnvironmentChild: @unchecked Sendable {
    let process: ChildProcess
    let stdoutPath: String
    let stderrPath: String

    init(executable: String, arguments: [String], environment: [String: String], directory: TemporaryDirectory)
        throws
    {
        let tag = UUID().uuidString.prefix(6)
        stdoutPath = directory.file("child-\(tag).out")
        stderrPath = directory.file("child-\(tag).err")
        process = try ChildProcess(
            executable: executable, arguments: arguments, environment: environment,
            standardOutput: .file(stdoutPath), standardError: .file(stderrPath))
    }

    var pid: Int32 { process.processIdentifier }
    var stdoutText: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    var stderrText: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
    var status: Int32 { process.terminationStatus }

    func wait(timeout: Double) -> Bool { E2E.poll(timeout: timeout) { process.isRunning ? nil : true } ?? false }

    func signal(_ number: Int32) { process.send(number) }

    /// Waits until stderr contains `text`; false after `timeout`.
    func waitForStderr(_ text: String, timeout: Double = 30) -> Bool {
        E2E.poll(timeout: timeout) { stderrText.contains(text) ? true : nil } ?? false
    }

    func stop() {
        if process.isRunning {
            process.send(SIGKILL)
            _ = wait(timeout: 5)
        }
    }

    deinit { stop() }
}
