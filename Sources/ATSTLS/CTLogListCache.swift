import Foundation

/// Apple's CT log list as `ats-proxy ct update` keeps it: the list exactly as downloaded
/// (`apple-ct-log-list.json`) and a small record of when and where from (`apple-ct-log-list-info.json`),
/// in the per-user directory the CA uses. A new list is validated before anything is written and
/// replaces the old one by rename, so a refused or interrupted update keeps the previous cache.
public struct CTLogListCache: Sendable {
    /// The list's file name inside the directory.
    public static let listFileName = "apple-ct-log-list.json"
    /// The record's file name inside the directory.
    public static let infoFileName = "apple-ct-log-list-info.json"
    /// The list Apple's `ct/ct-policy.md` links to (apple/apple-root-program).
    public static let appleListURL = "https://valid.apple.com/ct/log-list/current_log_list.json"
    /// Days after which a cached list counts as none: Apple's trust daemon stops enforcing CT when the
    /// device's list has gone that long without an update (`--ct-max-age` changes it).
    public static let defaultMaximumAgeDays = 60

    /// When and where the cached list came from.
    public struct Info: Codable, Sendable, Hashable {
        /// When it was downloaded or installed.
        public let fetched: Date
        /// The URL or file it came from.
        public let source: String
    }

    /// What the cache holds.
    public enum State: Sendable {
        /// No list was ever installed.
        case missing
        /// A list older than the maximum age (it counts as none).
        case stale(CTLogList, Info, ageDays: Int)
        /// A list within the maximum age.
        case fresh(CTLogList, Info, ageDays: Int)
        /// The files exist but cannot be used (what is wrong).
        case unusable(String)
    }

    /// The directory (absolute).
    public let directory: String

    public init(directory: String) { self.directory = directory }

    public var listPath: String { (directory as NSString).appendingPathComponent(Self.listFileName) }
    public var infoPath: String { (directory as NSString).appendingPathComponent(Self.infoFileName) }

    /// Validates `data` as Apple's log list and, only when it is one, stores it with `source` and `now`.
    /// Throws `CTLogListError` for a bad list (nothing is changed), `CertificateAuthorityError` for I/O.
    @discardableResult
    public func install(_ data: Data, source: String, now: Date = Date()) throws -> CTLogList {
        let list = try CTLogList.parse(data)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let info = try encoder.encode(Info(fetched: now, source: source))
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Self.replace(listPath, with: data)
        try Self.replace(infoPath, with: info)
        return list
    }

    /// The cache's state at `now` with lists older than `maximumAgeDays` stale.
    public func state(now: Date = Date(), maximumAgeDays: Int = CTLogListCache.defaultMaximumAgeDays) -> State {
        let fileManager = FileManager.default
        guard fileManager.fileExists(atPath: listPath) else { return .missing }
        guard let data = fileManager.contents(atPath: listPath) else { return .unusable("\(listPath): cannot read") }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let infoData = fileManager.contents(atPath: infoPath),
            let info = try? decoder.decode(Info.self, from: infoData)
        else { return .unusable("\(infoPath): missing or malformed (run `ats-proxy ct update` again)") }
        let list: CTLogList
        do {
            list = try CTLogList.parse(data)
        } catch {
            return .unusable("\(listPath): \(error)")
        }
        let age = Int((now.timeIntervalSince(info.fetched) / 86400).rounded(.down))
        return age > maximumAgeDays ? .stale(list, info, ageDays: age) : .fresh(list, info, ageDays: age)
    }

    /// Writes `data` to a temporary file beside `path` and renames it over `path`.
    static func replace(_ path: String, with data: Data) throws {
        let temporary = path + ".partial-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o644])
        else { throw CertificateAuthorityError(path: temporary, problem: "cannot write: \(errnoText())") }
        guard rename(temporary, path) == 0 else {
            let problem = errnoText()
            unlink(temporary)
            throw CertificateAuthorityError(path: path, problem: "cannot replace: \(problem)")
        }
    }
}
