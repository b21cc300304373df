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
        let keys = try Self.topLevelKeys(data, path: path, isJSON: isJSON)
        for key in keys where SettingsKey.named(key) == nil {
            throw SettingsError(
                description:
                    "\(path): unknown key '\(key)' (keys are the long option names of 'ats-proxy run'; see 'ats-proxy settings show')"
            )
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

    /// The top-level keys, parsed with Foundation (JSON) or Yams (YAML); the file must be a mapping.
    private static func topLevelKeys(_ data: Data, path: String, isJSON: Bool) throws -> [String] {
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
        if parsed == nil, !isJSON { return [] }
        guard let mapping = parsed as? [String: Any] else {
            throw SettingsError(description: "\(path): the settings file must map option names to values")
        }
        return mapping.keys.sorted()
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
                throw SettingsError(description: problem)
            }
            content = single.value?.content
        }
        guard let content else { return nil }
        var values = SettingsResolver.strings(content)
        if let bad = values.first(where: { !key.accepts($0) }) {
            throw SettingsError(description: "\(problem) (got '\(bad)')")
        }
        if key.isPath { values = values.map { Self.resolve($0, against: directory) } }
        if key.name == "af-policy" { values = values.map { Self.resolvingPins($0, against: directory) } }
        return values
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
