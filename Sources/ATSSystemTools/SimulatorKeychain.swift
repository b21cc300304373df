import Foundation

/// The iOS Simulator's trust store, through `xcrun simctl keychain`: adds the proxy CA as a trusted root
/// of one simulator (`booted`, a UDID) or of every booted one, and resets it.
public struct SimulatorKeychain: Sendable {
    /// Which simulators a command acts on.
    public enum Target: Sendable, Equatable, CustomStringConvertible {
        /// simctl's own `booted` (the booted simulator).
        case booted
        /// One simulator by UDID (or name, as simctl accepts).
        case device(String)
        /// Every booted simulator, from `simctl list devices booted -j`.
        case allBooted

        /// `booted`, `all`, or a UDID.
        public init(argument: String) {
            switch argument {
            case "booted": self = .booted
            case "all": self = .allBooted
            default: self = .device(argument)
            }
        }

        public var description: String {
            switch self {
            case .booted: "booted"
            case .device(let udid): udid
            case .allBooted: "all"
            }
        }
    }

    /// One simulator as `simctl list -j` describes it.
    public struct Device: Sendable, Decodable, Equatable {
        public var udid: String
        public var name: String
        public var state: String
    }

    /// `simctl list devices -j`: devices grouped by runtime.
    struct DeviceList: Decodable {
        var devices: [String: [Device]]
    }

    let xcrun: ExternalTool

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        xcrun = ExternalTool("xcrun", environment: environment)
    }

    /// The booted simulators; throws when simctl cannot list them.
    public func bootedDevices() throws -> [Device] {
        let output = try xcrun.check(["simctl", "list", "devices", "booted", "-j"])
        do {
            let list = try JSONDecoder().decode(DeviceList.self, from: Data(output.stdout.utf8))
            return list.devices.keys.sorted().flatMap { list.devices[$0] ?? [] }.filter { $0.state == "Booted" }
        } catch {
            throw ToolError(
                commandLine: xcrun.commandLine(["simctl", "list", "devices", "booted", "-j"]),
                problem: "unexpected answer: \(error)")
        }
    }

    /// The simctl device arguments `target` stands for; throws when `all` finds no booted simulator.
    func deviceArguments(_ target: Target) throws -> [String] {
        switch target {
        case .booted: return ["booted"]
        case .device(let udid): return [udid]
        case .allBooted:
            let devices = try bootedDevices()
            guard !devices.isEmpty else {
                throw ToolError(
                    commandLine: "--simulator all",
                    problem:
                        "no booted simulator; boot one (open Simulator.app, or xcrun simctl boot UDID) and run again")
            }
            return devices.map(\.udid)
        }
    }

    /// Adds `certificatePath` as a trusted root on `target`; returns a line per simulator.
    public func addRootCertificate(_ certificatePath: String, to target: Target) throws -> [String] {
        try deviceArguments(target).map { device in
            try xcrun.check(["simctl", "keychain", device, "add-root-cert", certificatePath])
            return "simulator \(device): the proxy CA is now a trusted root"
        }
    }

    /// Resets the keychain of `target` (simctl cannot remove one certificate: this removes every
    /// certificate added to that simulator); returns a line per simulator.
    public func reset(_ target: Target) throws -> [String] {
        try deviceArguments(target).map { device in
            try xcrun.check(["simctl", "keychain", device, "reset"])
            return "simulator \(device): keychain reset (every added certificate, the proxy CA included, removed)"
        }
    }
}
