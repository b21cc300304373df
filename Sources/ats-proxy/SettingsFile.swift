import Configuration
import Foundation
import Yams

/// A settings file (JSON or YAML) read with swift-configuration's snapshot for its format. Keys are
/// the long option names; unknown keys and values of the wrong type are errors naming the file and
/// the key.
struct SettingsFile {
    let path: String
    private let snapshot: any ConfigSnapshot
    private let directory: String
    /// The file's top-level values as Foundation or Yams parsed them, for saying what a bad value was.
    private let raw: [String: Any]

    init(path: String) throws {
        self.path = path
        directory = (path as NSString).deletingLastPathComponent
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SettingsError(description: "\(path): cannot read the settings file")
        }
        let isJSON = path.hasSuffix(".json")
        guard isJSON || path.hasSuffix(".yaml") || path.hasSuffix(".yml") else {
            throw SettingsError(description: "\(path): a settings file must end in .json, .yaml or .yml")
        }
        let mapping = try Self.topLevelMapping(data, path: path, isJSON: isJSON)
        raw = mapping
        for name in mapping.keys.sorted() {
            guard let key = SettingsKey.named(name) else {
                let hint = SettingsKey.suggestion(for: name).map { "did you mean '\($0)'? " } ?? ""
                throw SettingsError(
                    description:
                        "\(path): unknown key '\(name)' (\(hint)keys are the long option names of 'ats-proxy run'; see 'ats-proxy settings show')"
                )
            }
            if let found = Self.wrongShape(mapping[name] as Any, for: key) {
                throw SettingsError(description: "\(path): key '\(name)' must be \(key.expected), found \(found)")
            }
        }
        do {
            snapshot =
                isJSON
                ? try JSONSnapshot(data: data.bytes, providerName: path, parsingOptions: .default)
                : try YAMLSnapshot(data: data.bytes, providerName: path, parsingOptions: .default)
        } catch {
            throw SettingsError(description: "\(path): \(error)")
        }
    }

    /// The top-level mapping, parsed with Foundation (JSON) or Yams (YAML); the file must be a mapping.
    private static func topLevelMapping(_ data: Data, path: String, isJSON: Bool) throws -> [String: Any] {
        let parsed: Any?
        do {
            if isJSON {
                parsed = try JSONSerialization.jsonObject(with: data)
            } else {
                parsed = try Yams.load(yaml: String(decoding: data, as: UTF8.self))
            }
        } catch {
            throw SettingsError(description: "\(path): not valid \(isJSON ? "JSON" : "YAML"): \(error)")
        }
        if parsed == nil, !isJSON { return [:] }
        guard let mapping = parsed as? [String: Any] else {
            throw SettingsError(description: "\(path): the settings file must map option names to values")
        }
        return mapping
    }

    /// What is wrong with the shape of `value` for `key` (`a mapping (host, port)`, `a list`), or nil when the
    /// shape fits: one scalar for a single option or a flag, a scalar or a list of scalars for a list. The
    /// configuration providers flatten a mapping into keys of their own, so without this check a mapping would
    /// leave the key unset and the default in force.
    static func wrongShape(_ value: Any, for key: SettingsKey) -> String? {
        if let mapping = value as? [String: Any] {
            return "a mapping (\(mapping.keys.sorted().joined(separator: ", ")))"
        }
        if let list = value as? [Any] {
            guard key.shape == .list else { return "a list of \(list.count)" }
            if list.contains(where: { $0 is [String: Any] || $0 is [Any] }) {
                return "a list holding a mapping or list"
            }
            return nil
        }
        if value is NSNull { return "nothing (null)" }
        return nil
    }

    /// The textual values of `key` in the file, checked and with relative paths made absolute;
    /// nil when the file does not set it.
    func values(for key: SettingsKey) throws -> [String]? {
        let problem = "\(path): key '\(key.name)' must be \(key.expected)"
        let configKey = AbsoluteConfigKey([key.name])
        var content: ConfigContent?
        do {
            content = try snapshot.value(forKey: configKey, type: key.configType).value?.content
        } catch {
            // A list option also takes a single value.
            guard key.shape == .list, let single = try? snapshot.value(forKey: configKey, type: .string) else {
                throw SettingsError(description: "\(problem), found \(Self.describe(raw[key.name] as Any))")
            }
            content = single.value?.content
        }
        guard let content else { return nil }
        var values = SettingsResolver.strings(content)
        if let bad = values.first(where: { !key.accepts($0) }) {
            throw SettingsError(description: "\(problem), found '\(bad)'")
        }
        if key.isPath { values = values.map { Self.resolve($0, against: directory) } }
        if key.name == "af-policy" { values = values.map { Self.resolvingPins($0, against: directory) } }
        return values
    }

    /// A parsed value as an error message names it: `'many'` for text, `the number 8080`, `yes` (a Boolean).
    static func describe(_ value: Any) -> String {
        switch value {
        case let text as String: return "'\(text)'"
        case let flag as Bool: return "the Boolean \(flag)"
        case let number as NSNumber: return "the number \(number)"
        case is [Any]: return "a list"
        default: return "'\(value)'"
        }
    }

    /// `path` as the file means it: relative to the file's directory (`~` expanded).
    static func resolve(_ path: String, against directory: String) -> String {
        let expanded = (path as NSString).expandingTildeInPath
        return expanded.hasPrefix("/")
            ? expanded : URL(fileURLWithPath: directory).appendingPathComponent(path).standardizedFileURL.path
    }

    /// An `--af-policy` value with its `pins=` path resolved against the file's directory, like every other
    /// path a settings file names (the rest of the value is left as it is).
    static func resolvingPins(_ value: String, against directory: String) -> String {
        guard let range = value.range(of: ",pins=") else { return value }
        let rest = value[range.upperBound...]
        let path = rest.prefix { $0 != "," }
        guard !path.isEmpty else { return value }
        return String(value[..<range.upperBound]) + resolve(String(path), against: directory)
            + String(rest.dropFirst(path.count))
    }
}
