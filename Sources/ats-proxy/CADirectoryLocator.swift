import ATSTLS
import Foundation

/// Chooses the CA directory when none is given: one per user, whatever the working directory, so
/// a phone or Simulator that trusts the CA keeps trusting it wherever the proxy is started.
///
/// - Linux and other systems: `$XDG_DATA_HOME/ats-proxy`, else `~/.local/share/ats-proxy`.
/// - macOS: `~/Library/Application Support/ats-proxy`.
///
/// A CA left in `certs/` under the working directory by earlier versions is copied there on first
/// use (when the per-user directory has none yet), with a message; the copy keeps its key and
/// fingerprint, so devices that trust it need nothing new.
struct CADirectoryLocator {
    /// The legacy directory name, relative to the working directory.
    static let legacyDirectoryName = "certs"

    let environment: [String: String]
    let workingDirectory: String
    let homeDirectory: String

    init(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        workingDirectory: String = FileManager.default.currentDirectoryPath,
        homeDirectory: String? = nil
    ) {
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.homeDirectory = homeDirectory ?? environment["HOME"] ?? NSHomeDirectory()
    }

    /// The per-user default CA directory (absolute).
    var userDirectory: String {
        #if os(macOS)
            return (homeDirectory as NSString).appendingPathComponent("Library/Application Support/ats-proxy")
        #else
            if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
                return (xdg as NSString).appendingPathComponent("ats-proxy")
            }
            return (homeDirectory as NSString).appendingPathComponent(".local/share/ats-proxy")
        #endif
    }

    /// `certs/` under the working directory (absolute).
    var legacyDirectory: String {
        URL(fileURLWithPath: workingDirectory).appendingPathComponent(Self.legacyDirectoryName).standardizedFileURL
            .path
    }

    /// What happened to a legacy `certs/` CA while choosing the default directory.
    enum LegacyOutcome: Equatable {
        /// No CA in `certs/`.
        case none
        /// The `certs/` CA was copied into the per-user directory.
        case migrated(from: String)
        /// The per-user directory already has a CA and `certs/` holds another one, now unused.
        case ignored(String)
    }

    /// The default directory, after copying a legacy `certs/` CA into it when it has none.
    /// The parent directories are created (0700) so that the CA can be written there.
    func defaultDirectory() throws -> (directory: String, legacy: LegacyOutcome) {
        let target = userDirectory
        do {
            try FileManager.default.createDirectory(
                atPath: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CertificateAuthorityError(path: target, problem: "cannot create the CA directory: \(error)")
        }
        let legacy = legacyDirectory
        let legacyCertificate = (legacy as NSString).appendingPathComponent(CertificateAuthority.certificateFileName)
        let legacyKey = (legacy as NSString).appendingPathComponent(CertificateAuthority.keyFileName)
        let fileManager = FileManager.default
        guard legacy != target, fileManager.fileExists(atPath: legacyCertificate),
            fileManager.fileExists(atPath: legacyKey)
        else { return (target, .none) }
        let targetCertificate = (target as NSString).appendingPathComponent(CertificateAuthority.certificateFileName)
        if fileManager.fileExists(atPath: targetCertificate) {
            let same = fileManager.contentsEqual(atPath: legacyCertificate, andPath: targetCertificate)
            return (target, same ? .none : .ignored(legacy))
        }
        let targetKey = (target as NSString).appendingPathComponent(CertificateAuthority.keyFileName)
        guard let key = fileManager.contents(atPath: legacyKey),
            let certificate = fileManager.contents(atPath: legacyCertificate),
            fileManager.createFile(atPath: targetKey, contents: key, attributes: [.posixPermissions: 0o600]),
            fileManager.createFile(
                atPath: targetCertificate, contents: certificate, attributes: [.posixPermissions: 0o644])
        else {
            throw CertificateAuthorityError(path: target, problem: "cannot copy the CA from \(legacy) here")
        }
        return (target, .migrated(from: legacy))
    }

    /// The line the proxy prints about a legacy CA, or nil.
    static func message(_ outcome: LegacyOutcome, directory: String) -> String? {
        switch outcome {
        case .none:
            return nil
        case .migrated(let from):
            return
                "CA copied from \(from) to \(directory), the per-user CA directory (same key and fingerprint: devices that trust it need nothing new); \(from) is no longer used"
        case .ignored(let legacy):
            return
                "note: \(legacy) holds a different CA that is no longer used; the per-user CA in \(directory) is (pass --ca-dir \(legacy) to use the old one)"
        }
    }
}
