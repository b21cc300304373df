import Foundation

/// A directory of fake `networksetup`, `security`, `xcrun` and `update-ca-certificates` (all links to
/// `Tests/ats-proxyTests/Fixtures/fake-tools/fake_tool.py`), with their state file and call log, and the
/// environment that puts them first on PATH. Removed when released.
final class FakeTools: @unchecked Sendable {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("ats-proxyTests/Fixtures/fake-tools/fake_tool.py").path

    let directory: URL
    let bin: URL

    init(state: [String: Any]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ats-fake-tools-\(UUID().uuidString.prefix(8))")
        bin = directory.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        for name in ["networksetup", "security", "xcrun", "update-ca-certificates"] {
            try FileManager.default.createSymbolicLink(
                atPath: bin.appendingPathComponent(name).path, withDestinationPath: Self.script)
        }
        try setState(state)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// PATH with the fakes first; HOME and the state directory inside this directory.
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["FAKE_TOOLS_DIR"] = directory.path
        environment["HOME"] = directory.appendingPathComponent("home").path
        environment["ATS_PROXY_STATE_DIR"] = directory.appendingPathComponent("state").path
        return environment
    }

    var stateFilePath: String { directory.appendingPathComponent("state/system-proxy.json").path }

    func setState(_ state: [String: Any]) throws {
        let data = try JSONSerialization.data(withJSONObject: state, options: [.sortedKeys])
        try data.write(to: directory.appendingPathComponent("state.json"))
    }

    func state() throws -> [String: Any] {
        let data = try Data(contentsOf: directory.appendingPathComponent("state.json"))
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    /// `proxies[service][kind]` as (enabled, server, port).
    func proxy(_ service: String, _ kind: String) throws -> (enabled: Bool, server: String, port: Int)? {
        guard let proxies = try state()["proxies"] as? [String: Any], let entry = proxies[service] as? [String: Any],
            let setting = entry[kind] as? [String: Any]
        else { return nil }
        return (setting["enabled"] as? Bool ?? false, setting["server"] as? String ?? "", setting["port"] as? Int ?? 0)
    }

    /// Every call so far: the tool's name, then its arguments.
    func calls() -> [[String]] {
        guard let text = try? String(contentsOf: directory.appendingPathComponent("calls.log"), encoding: .utf8)
        else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String]
        }
    }

    /// Calls that change something (`-set…` of networksetup).
    func changingCalls() -> [[String]] {
        calls().filter { $0.count > 1 && $0[1].hasPrefix("-set") }
    }

    /// A Mac with Wi-Fi (no proxy), a disabled Bluetooth PAN, and a Thunderbolt Bridge whose HTTPS proxy is
    /// a corporate one that is switched off.
    static func macState() -> [String: Any] {
        [
            "services": ["Wi-Fi", "*Bluetooth PAN", "Thunderbolt Bridge"],
            "proxies": [
                "Wi-Fi": [
                    "web": ["enabled": false, "server": "", "port": 0],
                    "secureWeb": ["enabled": false, "server": "", "port": 0],
                ],
                "Thunderbolt Bridge": [
                    "web": ["enabled": false, "server": "", "port": 0],
                    "secureWeb": ["enabled": false, "server": "corp.example", "port": 3128],
                ],
            ],
        ]
    }
}
