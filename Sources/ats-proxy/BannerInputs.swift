import Foundation

/// The banner's account of what the run was told: every setting that is not at its default, with where it came
/// from (the command line, an `ATS_PROXY_*` variable, the settings file by path). Resolved again from the process's
/// own arguments, environment and working directory (the same pure resolution `main` made before parsing).
enum BannerInputs {
    /// `  settings file: PATH` (when there is one) and one line per setting that is not at its default: its value
    /// (the number of values of a repeatable option) and its source.
    static func lines(
        arguments: [String] = Array(CommandLine.arguments.dropFirst()),
        environment: [String: String] = ProcessInfo.processInfo.environment,
        workingDirectory: String = FileManager.default.currentDirectoryPath
    ) -> [String] {
        guard
            let applied = try? SettingsInjection.resolve(
                arguments, environment: environment, workingDirectory: workingDirectory)
        else { return [] }
        var lines: [String] = []
        if let file = applied.file { lines.append("  settings file: \(file)") }
        let given = applied.settings.filter { $0.origin != .builtIn }
        guard !given.isEmpty else { return lines }
        lines.append("  set for this run (not defaults):")
        for setting in given {
            let values =
                setting.arguments.isEmpty ? flagValues(setting.key.name, in: arguments) : injectedValues(setting)
            // A repeatable option shows how many values it got (its values are host names, patterns and paths the
            // banner has no room for, and which would read as traffic to anyone searching the log for a host).
            let shown =
                setting.key.shape == .list
                ? "(\(values.count) value\(values.count == 1 ? "" : "s"))"
                : values.map { redacted(setting.key.name, $0) }.joined(separator: ", ")
            lines.append("    \(setting.key.name)\(shown.isEmpty ? "" : " \(shown)")  (\(source(setting.origin)))")
        }
        return lines
    }

    /// Where a value came from, in the banner's words.
    static func source(_ origin: SettingOrigin) -> String {
        switch origin {
        case .flag: "command line"
        case .environment(let name): "environment \(name)"
        case .file(let path): "settings file \(path)"
        case .builtIn: "default"
        }
    }

    /// The values a settings file or variable contributed (`--name=value` arguments).
    static func injectedValues(_ setting: ResolvedSetting) -> [String] {
        setting.arguments.compactMap { argument in
            argument.firstIndex(of: "=").map { String(argument[argument.index(after: $0)...]) }
        }
    }

    /// The values of `--name` on the command line (`--name value` or `--name=value`; nothing for a flag).
    static func flagValues(_ name: String, in arguments: [String]) -> [String] {
        var values: [String] = []
        var index = arguments.startIndex
        let own = arguments.prefix { $0 != "--" }
        while index < own.endIndex {
            let argument = own[index]
            if argument.hasPrefix("--\(name)=") {
                values.append(String(argument.dropFirst(name.count + 3)))
            } else if argument == "--\(name)", index + 1 < own.endIndex, !own[index + 1].hasPrefix("--"),
                SettingsKey.named(name)?.shape != .flag
            {
                values.append(own[index + 1])
                index += 1
            }
            index += 1
        }
        return values
    }

    /// `value` with a URL's user information hidden (an upstream proxy's credentials never reach the log), and the
    /// password of `--proxy-auth` left out.
    static func redacted(_ name: String, _ value: String) -> String {
        if SettingsKey.secretKeys.contains(name) { return SettingsKey.hidingPassword(value) }
        guard let scheme = value.range(of: "://"), let at = value[scheme.upperBound...].firstIndex(of: "@") else {
            return value
        }
        return String(value[..<scheme.upperBound]) + "<redacted>" + String(value[at...])
    }
}
