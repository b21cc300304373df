internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// One Certificate Transparency log: a name and its public key (DER SubjectPublicKeyInfo).
public struct CTLog: Sendable, Hashable {
    public let name: String
    public let publicKeyDER: [UInt8]

    public init(name: String, publicKeyDER: [UInt8]) {
        self.name = name
        self.publicKeyDER = publicKeyDER
    }

    /// The RFC 6962 log id: SHA-256 of the key.
    public var logID: [UInt8] { sha256(publicKeyDER) }
}

/// The CT logs SCTs are validated against. Debian ships no `ct_log_list.cnf`, so the list comes
/// from the project: Apple's log list (`CTLogList`, cached by `ats-proxy ct update` or given with
/// `--ct-log-list`), `CTLog` values, or a file in OpenSSL's format; each is written to a private temp
/// file in OpenSSL's format and loaded. Alongside the OpenSSL store it keeps each log's facts
/// (operator, kind, state) for Apple's policy, by log id. Immutable after creation; `deinit` frees the
/// OpenSSL store.
public final class CTLogStore: @unchecked Sendable {
    let store: OpaquePointer
    /// How many logs the store knows (0: SCTs cannot be validated, CT checks are skipped for
    /// system-rooted chains and reported as not evaluated).
    public let logCount: Int
    /// Each log's facts by log id (lower-case hex).
    public let factsByLogID: [String: CTLogFacts]

    /// The facts of the log with id `logID`, when the store knows it.
    public func facts(forLogID logID: [UInt8]) -> CTLogFacts? {
        factsByLogID.isEmpty ? nil : factsByLogID[hexString(logID)]
    }

    /// A store of every log of Apple's list (pending and rejected ones too: their SCTs validate, and
    /// the policy then refuses to count them).
    public convenience init(list: CTLogList) throws {
        try self.init(
            logs: list.entries.map { CTLog(name: $0.facts.description, publicKeyDER: $0.key) },
            facts: list.entries.map(\.facts))
    }

    /// A store of `logs` with their facts (`facts[i]` describes `logs[i]`).
    public convenience init(logs: [CTLog], facts: [CTLogFacts]) throws {
        precondition(logs.count == facts.count, "one CTLogFacts per CTLog")
        try self.init(
            logs: logs,
            factsByLogID: Dictionary(
                zip(logs.map { hexString($0.logID) }, facts).map { ($0, $1) }, uniquingKeysWith: { first, _ in first }))
    }

    /// `--ct-log-list FILE`: Apple's JSON log list, or a list in OpenSSL's format. Logs of an
    /// OpenSSL-format list have no operator or state: each is taken as a usable RFC 6962 log with an
    /// operator of its own (named after the log).
    public static func load(file: String) throws -> CTLogStore {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw CertificateAuthorityError(path: file, problem: "cannot read the CT log list")
        }
        if data.first(where: { ![0x20, 0x09, 0x0a, 0x0d].contains($0) }) == UInt8(ascii: "{") {
            do {
                return try CTLogStore(list: try CTLogList.parse(data))
            } catch let error as CTLogListError {
                throw CertificateAuthorityError(path: file, problem: error.description)
            }
        }
        return try CTLogStore(file: file)
    }

    /// Facts for the logs of an OpenSSL-format list: `description` names the operator, RFC 6962, usable.
    static func openSSLFormatFacts(_ text: String) -> [String: CTLogFacts] {
        var result: [String: CTLogFacts] = [:]
        var description = ""
        for rawLine in text.split(separator: "\n") {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            guard let equals = line.firstIndex(of: "=") else {
                if line.hasPrefix("[") { description = String(line.dropFirst().dropLast()) }
                continue
            }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if name == "description" { description = value }
            if name == "key", let key = Data(base64Encoded: value) {
                result[hexString(sha256(Array(key)))] = standaloneFacts(name: description)
            }
        }
        return result
    }

    /// The list embedded in ats-proxy. It is deliberately empty: no snapshot of Apple's log list
    /// is shipped (it changes monthly); pass `--ct-log-list` with a current list to enforce CT for
    /// system-rooted chains.
    public static let embeddedLogs: [CTLog] = []

    /// OpenSSL's log list file format for `logs`.
    public static func fileContents(_ logs: [CTLog]) -> String {
        var names: [String] = []
        var sections = ""
        for (index, log) in logs.enumerated() {
            let section = "log\(index)"
            names.append(section)
            sections +=
                "\n[\(section)]\ndescription = \(Self.configSafe(log.name))\nkey = \(Data(log.publicKeyDER).base64EncodedString())\n"
        }
        return "enabled_logs = \(names.joined(separator: ","))\n" + sections
    }

    /// `text` with everything but printable ASCII replaced (a name from a downloaded list must not
    /// add lines or sections to OpenSSL's configuration format).
    static func configSafe(_ text: String) -> String {
        String(
            text.unicodeScalars.map { (0x20..<0x7f).contains($0.value) && $0 != "[" && $0 != "]" ? Character($0) : "_" }
        )
    }

    /// A store of `logs`, loaded through a temporary file that is removed again.
    /// Each log is taken as a usable RFC 6962 log with an operator of its own (named after the log).
    public convenience init(logs: [CTLog]) throws {
        try self.init(logs: logs, facts: logs.map { Self.standaloneFacts(name: $0.name) })
    }

    /// Facts for a log known only by name and key: a usable RFC 6962 log, its own operator.
    static func standaloneFacts(name: String) -> CTLogFacts {
        CTLogFacts(description: name, operatorName: name, kind: .rfc6962, state: .usable(since: .distantPast))
    }

    private convenience init(logs: [CTLog], factsByLogID: [String: CTLogFacts]) throws {
        let path = NSTemporaryDirectory() + "ats-proxy-ctlogs-\(UUID().uuidString).cnf"
        guard FileManager.default.createFile(atPath: path, contents: Data(Self.fileContents(logs).utf8)) else {
            throw CertificateAuthorityError(path: path, problem: "cannot write the CT log list")
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        try self.init(file: path, expectedCount: logs.count, factsByLogID: factsByLogID)
    }

    /// A store loaded from a log list file in OpenSSL's format.
    /// Each log is taken as a usable RFC 6962 log with an operator of its own (its description).
    public convenience init(file: String) throws {
        let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
        try self.init(file: file, expectedCount: nil, factsByLogID: Self.openSSLFormatFacts(text))
    }

    private init(file: String, expectedCount: Int?, factsByLogID: [String: CTLogFacts]) throws {
        guard let store = CTLOG_STORE_new() else { throw OpenSSLError("CTLOG_STORE_new") }
        self.store = store
        self.factsByLogID = factsByLogID
        if expectedCount == 0 {
            logCount = 0
            return
        }
        guard CTLOG_STORE_load_file(store, file) == 1 else {
            ERR_clear_error()
            throw CertificateAuthorityError(path: file, problem: "not a CT log list in OpenSSL's format")
        }
        if let expectedCount {
            logCount = expectedCount
        } else {
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            logCount =
                text.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("key") }.count
        }
    }

    deinit { CTLOG_STORE_free(store) }
}
