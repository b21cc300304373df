import Foundation

/// What kind of input `--config` pointed at.
public enum ConfigSourceKind: String, Sendable, Codable {
    /// No `--config`: the empty ATS dictionary.
    case none
    /// A complete Info.plist (with or without an NSAppTransportSecurity key).
    case infoPlist = "Info.plist"
    /// A bare NSAppTransportSecurity dictionary.
    case atsDictionary = "ATS dictionary"
    /// An `.app` bundle directory.
    case appBundle = "app bundle"
    /// An `.ipa` archive.
    case ipa
}

/// A loaded configuration source: the raw ATS value plus facts about the app it came from.
public struct LoadedInfoPlist: Sendable {
    /// The path the user gave (empty for `.none`).
    public let path: String
    public let kind: ConfigSourceKind
    /// Where inside the source the Info.plist was found (e.g. `Payload/Demo.app/Info.plist`).
    public let innerPath: String?
    /// The whole Info.plist root, or nil for a bare ATS dictionary.
    public let infoPlist: [String: PlistValue]?
    /// The value of NSAppTransportSecurity (for a bare dictionary: the root itself).
    public let atsValue: PlistValue?
    /// Plist format that was read.
    public let format: String?

    /// The empty configuration: full ATS.
    public static let none = LoadedInfoPlist(
        path: "", kind: .none, innerPath: nil, infoPlist: nil, atsValue: nil, format: nil)

    /// `CFBundleExecutable` or `CFBundleName`, used as the process name in console lines.
    public var processName: String? {
        for key in ["CFBundleExecutable", "CFBundleName"] {
            if case .string(let name)? = infoPlist?[key], !name.isEmpty { return name }
        }
        return nil
    }

    /// `MinimumOSVersion` (iOS) or `LSMinimumSystemVersion` (macOS), when the Info.plist has one.
    public var minimumOSVersion: OSVersion? {
        for key in ["MinimumOSVersion", "LSMinimumSystemVersion"] {
            if case .string(let text)? = infoPlist?[key], let version = OSVersion(parsing: text) { return version }
        }
        return nil
    }

    /// ATS keys written at the Info.plist root instead of inside NSAppTransportSecurity: a common
    /// mistake that makes them do nothing.
    public var misplacedATSKeys: [String] {
        guard kind != .atsDictionary, let infoPlist else { return [] }
        let known = Set(ATSKey.topLevel)
        return infoPlist.keys.filter { known.contains($0) }.sorted()
    }

    /// One line describing the source, e.g. `Config/App.plist (Info.plist, XML)`.
    public var summary: String {
        switch kind {
        case .none: return "no --config (empty ATS dictionary: full ATS)"
        case .infoPlist, .atsDictionary, .appBundle, .ipa:
            let inner = innerPath.map { ", \($0)" } ?? ""
            let formatText = format.map { ", \($0)" } ?? ""
            return "\(path) (\(kind.rawValue)\(inner)\(formatText))"
        }
    }
}

/// Why a configuration source could not be loaded. Each case renders as one line naming the file.
public struct ConfigLoadError: Error, Sendable, CustomStringConvertible, Equatable {
    public let path: String
    public let reason: String

    /// An error about `path` (the file the user named), for `reason` (one line, no trailing period).
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}

/// Turns the bytes of a `--config` property list into a `LoadedInfoPlist`: an Info.plist or a bare ATS
/// dictionary, XML or binary (Foundation's parser). Pure: it reads no files; `ConfigSourceReader`
/// (ATSConfigFiles) finds the bytes in a file, an `.app` bundle or an `.ipa` and hands them here.
public enum InfoPlistLoader {
    /// Parses plist bytes; `kind` nil means "decide between Info.plist and bare ATS dictionary".
    public static func loadPlist(
        path: String, data: Data, kind: ConfigSourceKind?, innerPath: String?
    ) throws(ConfigLoadError) -> LoadedInfoPlist {
        guard !data.isEmpty else { throw ConfigLoadError(path: path, reason: "the file is empty, not a property list") }
        if BinaryPlistSetScan.containsSet(data) {
            throw ConfigLoadError(
                path: path, reason: "the binary property list contains a set, which an Info.plist never holds")
        }
        var format = PropertyListSerialization.PropertyListFormat.xml
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(from: data, options: [], format: &format)
        } catch {
            let reason: String
            if data.starts(with: Array("bplist".utf8)) {
                reason = "truncated or corrupt binary property list"
            } else if data.starts(with: Array("<?xml".utf8)) || data.starts(with: Array("<plist".utf8)) {
                reason = "malformed XML property list"
            } else {
                reason = "not a property list (expected an XML or binary plist, a .app bundle or an .ipa)"
            }
            throw ConfigLoadError(path: path, reason: reason)
        }
        let value = PlistValue(foundation: object)
        guard case .dictionary(let root) = value else {
            throw ConfigLoadError(
                path: path, reason: "the root of the property list is \(article(value.typeName)), not a dictionary")
        }
        let formatName: String
        switch format {
        case .binary: formatName = "binary"
        case .xml: formatName = "XML"
        case .openStep: formatName = "OpenStep"
        @unknown default: formatName = "plist"
        }
        let resolvedKind = kind ?? classify(root)
        switch resolvedKind {
        case .atsDictionary:
            return LoadedInfoPlist(
                path: path, kind: .atsDictionary, innerPath: innerPath, infoPlist: nil, atsValue: value,
                format: formatName)
        case .infoPlist, .appBundle, .ipa, .none:
            return LoadedInfoPlist(
                path: path, kind: resolvedKind == .none ? .infoPlist : resolvedKind, innerPath: innerPath,
                infoPlist: root, atsValue: root[ATSKey.root], format: formatName)
        }
    }

    /// A root with NSAppTransportSecurity, or with bundle keys, is an Info.plist; a root made only
    /// of ATS keys (or empty) is a bare ATS dictionary.
    static func classify(_ root: [String: PlistValue]) -> ConfigSourceKind {
        if root[ATSKey.root] != nil { return .infoPlist }
        if root.keys.contains(where: { $0.hasPrefix("CFBundle") || $0.hasPrefix("UI") || $0.hasPrefix("LS") }) {
            return .infoPlist
        }
        let atsKeys = Set(ATSKey.topLevel).union(ATSKey.legacyTopLevelAliases.keys)
        if root.isEmpty || root.keys.contains(where: { atsKeys.contains($0) }) { return .atsDictionary }
        return .infoPlist
    }
}
