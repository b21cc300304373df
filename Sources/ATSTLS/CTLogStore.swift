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
/// from the project: an embedded list (`CTLog` values, written to a private temp file in
/// OpenSSL's format and loaded), or a file in OpenSSL's format (`--ct-log-list FILE`).
/// Immutable after creation; `deinit` frees the OpenSSL store.
public final class CTLogStore: @unchecked Sendable {
    let store: OpaquePointer
    /// How many logs the store knows (0: SCTs cannot be validated, CT checks are skipped for
    /// system-rooted chains and reported as not evaluated).
    public let logCount: Int

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
                "\n[\(section)]\ndescription = \(log.name)\nkey = \(Data(log.publicKeyDER).base64EncodedString())\n"
        }
        return "enabled_logs = \(names.joined(separator: ","))\n" + sections
    }

    /// A store of `logs`, loaded through a temporary file that is removed again.
    public convenience init(logs: [CTLog]) throws {
        let path = NSTemporaryDirectory() + "ats-proxy-ctlogs-\(UUID().uuidString).cnf"
        guard FileManager.default.createFile(atPath: path, contents: Data(Self.fileContents(logs).utf8)) else {
            throw CertificateAuthorityError(path: path, problem: "cannot write the CT log list")
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        try self.init(file: path, expectedCount: logs.count)
    }

    /// A store loaded from a log list file in OpenSSL's format.
    public convenience init(file: String) throws { try self.init(file: file, expectedCount: nil) }

    private init(file: String, expectedCount: Int?) throws {
        guard let store = CTLOG_STORE_new() else { throw OpenSSLError("CTLOG_STORE_new") }
        self.store = store
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
