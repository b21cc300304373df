import ArgumentParser
import Foundation

/// `ats-proxy settings show [options]`: every option a run would use, its value and where it came
/// from (flag, environment, settings file or default).
struct SettingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings",
        abstract: "Show the settings a run would use and where each one comes from.",
        discussion: """
            Options come from, in this order: flags, ATS_PROXY_* environment variables (ATS_PROXY_ plus the \
            option name in upper case, '-' as '_', lists comma-separated), the settings file, the defaults. \
            The settings file is --settings PATH, else $ATS_PROXY_SETTINGS, else ats-proxy.json, \
            ats-proxy.yaml or ats-proxy.yml in the working directory. Its keys are the long option names.
            """,
        subcommands: [SettingsShowCommand.self],
        defaultSubcommand: SettingsShowCommand.self)
}

/// Prints the layered settings as a table (or JSON).
struct SettingsShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Print every setting with its value and origin.")

    @OptionGroup var options: ProxyOptions

    @Option(name: .long, help: "Output format: text or json.")
    var format: ExplainCommand.OutputFormat = .text

    func run() throws {
        let injection: SettingsInjection.Applied
        do {
            injection = try SettingsInjection.resolve(
                Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment,
                workingDirectory: FileManager.default.currentDirectoryPath)
        } catch {
            exitWithError(error)
        }
        let rows = injection.settings.map { setting in
            (name: setting.key.name, value: setting.key.describe(options), origin: setting.origin)
        }
        switch format {
        case .json:
            var entries: [[String: String]] = []
            for row in rows {
                entries.append(["key": row.name, "value": row.value, "from": row.origin.kindName])
            }
            let platform = try? options.policy.resolvedPlatform()
            let object: [String: Any] = [
                "settingsFile": injection.file ?? NSNull(), "settings": entries,
                "emulatedPlatform": platform.map { ["name": $0.description, "isDefault": $0.isDefault] } ?? NSNull(),
            ]
            let data = try JSONSerialization.data(
                withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        case .text:
            print(
                "Settings file: \(injection.file ?? "none (no --settings, $ATS_PROXY_SETTINGS or ats-proxy.json/.yaml here)")"
            )
            print("Order: flags > environment (ATS_PROXY_*) > settings file > defaults")
            if let platform = try? options.policy.resolvedPlatform() {
                print("Emulated platform: \(ProxyOptions.platformLabel(platform))")
            }
            print("")
            let nameWidth = max(4, rows.map(\.name.count).max() ?? 0) + 2
            let valueWidth = min(40, max(5, rows.map(\.value.count).max() ?? 0)) + 2
            print(Self.pad("KEY", nameWidth) + Self.pad("VALUE", valueWidth) + "FROM")
            for row in rows {
                print(Self.pad(row.name, nameWidth) + Self.pad(row.value, valueWidth) + row.origin.description)
            }
        }
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}

extension SettingOrigin {
    /// The origin's kind alone, for JSON: flag, environment, file or default.
    var kindName: String {
        switch self {
        case .flag: "flag"
        case .environment: "environment"
        case .file: "file"
        case .builtIn: "default"
        }
    }
}
