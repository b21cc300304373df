import Configuration
import Foundation

/// Where the effective value of a setting came from, highest precedence first.
enum SettingOrigin: Equatable, Sendable, CustomStringConvertible {
    /// Given on the command line.
    case flag
    /// An `ATS_PROXY_*` environment variable (its name).
    case environment(String)
    /// The settings file (its path).
    case file(String)
    /// Nothing set it: the option's default.
    case builtIn

    var description: String {
        switch self {
        case .flag: "flag"
        case .environment(let name): "environment \(name)"
        case .file: "file"
        case .builtIn: "default"
        }
    }
}

/// One key after layering: where its value came from and the arguments that carry it.
struct ResolvedSetting: Sendable {
    let key: SettingsKey
    let origin: SettingOrigin
    /// `--name=value` arguments added in front of the user's own (empty for flags and defaults).
    let arguments: [String]
}

/// A bad settings file or environment variable; printed as one line, exit status 2.
struct SettingsError: Error, CustomStringConvertible {
    let description: String
}

/// Layers the options of one command: command-line flags over `ATS_PROXY_*` environment variables
/// over the settings file over the defaults. The environment and the file are read with
/// swift-configuration's providers (`EnvironmentVariablesProvider`, `JSONSnapshot`, `YAMLSnapshot`);
/// what they yield becomes `--name=value` arguments the argument parser then checks as usual.
struct SettingsResolver {
    /// File names looked for in the working directory when no settings file is named.
    static let discoveredNames = ["ats-proxy.json", "ats-proxy.yaml", "ats-proxy.yml"]
    /// The environment variable that names a settings file.
    static let fileVariable = "ATS_PROXY_SETTINGS"

    /// The user's arguments after the subcommand name (up to `--` for exec).
    let arguments: [String]
    let environment: [String: String]
    let workingDirectory: String

    /// The layered settings of the keys in `scopes`, and the settings file used (if any).
    func resolve(scopes: Set<SettingsKey.Scope>) throws -> (file: String?, settings: [ResolvedSetting]) {
        try checkEnvironmentNames()
        let file = try locateFile()
        let fileValues = try file.map { try SettingsFile(path: $0) }
        let env = EnvironmentVariablesProvider(environmentVariables: environment)
        let given = explicitOptionNames()
        var settings: [ResolvedSetting] = []
        for key in SettingsKey.all where scopes.contains(key.scope) {
            if given.contains(key.name) {
                settings.append(ResolvedSetting(key: key, origin: .flag, arguments: []))
            } else if let values = try environmentValues(key, provider: env) {
                settings.append(
                    ResolvedSetting(
                        key: key, origin: .environment(key.environmentName), arguments: Self.arguments(key, values)))
            } else if let fileValues, let values = try fileValues.values(for: key) {
                settings.append(
                    ResolvedSetting(key: key, origin: .file(fileValues.path), arguments: Self.arguments(key, values)))
            } else {
                settings.append(ResolvedSetting(key: key, origin: .builtIn, arguments: []))
            }
        }
        return (file, settings)
    }

    /// Every `ATS_PROXY_*` variable must name a setting (or be one ats-proxy reads or exports itself): a misspelt
    /// one is an error with the closest name, not a setting silently left at its default.
    func checkEnvironmentNames() throws {
        let settings = SettingsKey.all.map(\.environmentName)
        let known = Set(settings).union(SettingsKey.otherEnvironmentNames)
        for name in environment.keys.sorted() where name.hasPrefix("ATS_PROXY_") && !known.contains(name) {
            let hint = Suggestion.closest(to: name, in: settings).map { "; did you mean \($0)?" } ?? ""
            throw SettingsError(
                description:
                    "environment variable \(name) is not an ats-proxy setting\(hint) (see 'ats-proxy settings show')")
        }
    }

    /// The settings file: `--settings`, else `$ATS_PROXY_SETTINGS`, else one of ``discoveredNames``
    /// in the working directory; nil when there is none.
    func locateFile() throws -> String? {
        if let named = namedSettingsFile() ?? environment[Self.fileVariable], !named.isEmpty {
            let path = absolute(named)
            guard FileManager.default.fileExists(atPath: path) else {
                throw SettingsError(description: "\(named): no such settings file")
            }
            return path
        }
        let found = Self.discoveredNames.map(absolute).filter { FileManager.default.fileExists(atPath: $0) }
        guard found.count <= 1 else {
            throw SettingsError(
                description:
                    "\(found.joined(separator: " and ")): more than one settings file; keep one or name it with --settings"
            )
        }
        return found.first
    }

    /// The value of `--settings PATH` or `--settings=PATH` among the arguments.
    private func namedSettingsFile() -> String? {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if argument == "--settings" { return iterator.next() }
            if argument.hasPrefix("--settings=") { return String(argument.dropFirst("--settings=".count)) }
        }
        return nil
    }

    /// Long option names the user gave on the command line.
    private func explicitOptionNames() -> Set<String> {
        var names = Set<String>()
        for argument in arguments where argument.hasPrefix("--") && argument.count > 2 {
            let name = argument.dropFirst(2).split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            names.insert(name)
        }
        return names
    }

    private func absolute(_ path: String) -> String {
        let url =
            path.hasPrefix("/")
            ? URL(fileURLWithPath: path) : URL(fileURLWithPath: workingDirectory).appendingPathComponent(path)
        return url.standardizedFileURL.path
    }

    /// The textual values of `key` from its environment variable, checked; nil when unset.
    private func environmentValues(_ key: SettingsKey, provider: EnvironmentVariablesProvider) throws -> [String]? {
        guard environment[key.environmentName] != nil else { return nil }
        // `ats-proxy exec` exports ATS_PROXY_CA_CERT (the running proxy's CA certificate, for ATSProxyTesting) to
        // its command. Read alone it would mean `--ca-cert` without `--ca-key` for an ats-proxy that command starts,
        // so it counts as a setting only beside ATS_PROXY_CA_KEY.
        if key.name == "ca-cert" && environment["ATS_PROXY_CA_KEY"] == nil { return nil }
        let problem = "environment variable \(key.environmentName) must be \(key.expected)"
        if SettingsKey.semicolonSeparatedInEnvironment.contains(key.name), let raw = environment[key.environmentName] {
            let values = raw.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            if let bad = values.first(where: { !key.accepts($0) }) {
                throw SettingsError(description: "\(problem), values separated by ';', found '\(bad)'")
            }
            return values
        }
        let content: ConfigContent?
        do {
            content = try provider.value(forKey: AbsoluteConfigKey(["ats-proxy", key.name]), type: key.configType)
                .value?.content
        } catch {
            throw SettingsError(description: "\(problem), found '\(environment[key.environmentName] ?? "")'")
        }
        guard let content else { return nil }
        let values = Self.strings(content)
        if let bad = values.first(where: { !key.accepts($0) }) {
            throw SettingsError(description: "\(problem), found '\(bad)'")
        }
        // Paths from the environment are relative to the working directory, as on the command line.
        return values
    }

    /// The arguments that carry `values` for `key`.
    static func arguments(_ key: SettingsKey, _ values: [String]) -> [String] {
        switch key.shape {
        case .flag: values == ["true"] ? ["--\(key.name)"] : []
        case .single, .list: values.map { "--\(key.name)=\($0)" }
        }
    }

    /// A provider's value as the strings the command line would carry.
    static func strings(_ content: ConfigContent) -> [String] {
        switch content {
        case .string(let value): [value]
        case .int(let value): [String(value)]
        case .double(let value): [SettingsKey.text(value)]
        case .bool(let value): [String(value)]
        case .stringArray(let values): values
        case .intArray(let values): values.map(String.init)
        case .doubleArray(let values): values.map(SettingsKey.text)
        case .boolArray(let values): values.map(String.init)
        case .bytes, .byteChunkArray: []
        }
    }
}
