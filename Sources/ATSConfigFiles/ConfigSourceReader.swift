import ATSPolicy
import Foundation
import ZIPFoundation

/// Reads a `--config` source from disk: an Info.plist or a bare ATS dictionary (XML or binary), an `.app` bundle
/// directory or an `.ipa` archive (zip reading is ZIPFoundation's). It finds the property list's bytes and hands
/// them to `InfoPlistLoader` (ATSPolicy), which parses them without touching the file system. Every failure is a
/// `ConfigLoadError` naming the path the user gave.
public enum ConfigSourceReader {
    /// Loads the source at `path`. Never traps on any input.
    public static func load(path: String) throws(ConfigLoadError) -> LoadedInfoPlist {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ConfigLoadError(path: path, reason: "no such file or directory")
        }
        if isDirectory.boolValue {
            return try loadBundle(path: path)
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigLoadError(path: path, reason: "cannot be read (\(error.localizedDescription))")
        }
        if data.starts(with: [0x50, 0x4B, 0x03, 0x04]) || data.starts(with: [0x50, 0x4B, 0x05, 0x06])
            || path.lowercased().hasSuffix(".ipa")
        {
            return try loadIPA(path: path, data: data)
        }
        return try InfoPlistLoader.loadPlist(path: path, data: data, kind: nil, innerPath: nil)
    }

    /// An `.app` directory: its `Info.plist` (iOS layout) or `Contents/Info.plist` (macOS layout), first found wins.
    private static func loadBundle(path: String) throws(ConfigLoadError) -> LoadedInfoPlist {
        let candidates = ["Info.plist", "Contents/Info.plist"]
        for candidate in candidates {
            let full = (path as NSString).appendingPathComponent(candidate)
            guard FileManager.default.fileExists(atPath: full),
                let data = FileManager.default.contents(atPath: full)
            else { continue }
            return try InfoPlistLoader.loadPlist(path: path, data: data, kind: .appBundle, innerPath: candidate)
        }
        throw ConfigLoadError(
            path: path, reason: "is a directory without Info.plist or Contents/Info.plist (not an .app bundle)")
    }

    /// An `.ipa` (a zip archive): the first `Payload/*.app/Info.plist` by path, extracted with its CRC checked.
    private static func loadIPA(path: String, data: Data) throws(ConfigLoadError) -> LoadedInfoPlist {
        let archive: Archive
        do {
            archive = try Archive(data: data, accessMode: .read)
        } catch {
            throw ConfigLoadError(path: path, reason: "not a valid zip archive (an .ipa is a zip file)")
        }
        let matches = archive.filter { entry in
            let parts = entry.path.split(separator: "/", omittingEmptySubsequences: false)
            return parts.count == 3 && parts[0] == "Payload" && parts[1].hasSuffix(".app") && parts[2] == "Info.plist"
        }.sorted { $0.path < $1.path }
        guard let entry = matches.first else {
            throw ConfigLoadError(path: path, reason: "no Payload/*.app/Info.plist inside this .ipa")
        }
        var plistData = Data()
        do {
            _ = try archive.extract(entry, skipCRC32: false) { chunk in plistData.append(chunk) }
        } catch {
            throw ConfigLoadError(path: path, reason: "\(entry.path) cannot be extracted (corrupt archive)")
        }
        do {
            return try InfoPlistLoader.loadPlist(path: path, data: plistData, kind: .ipa, innerPath: entry.path)
        } catch {
            throw ConfigLoadError(path: path, reason: "\(entry.path): \(error.reason)")
        }
    }
}
