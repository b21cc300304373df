internal import COpenSSL
import Foundation

/// A one-line error about the CA files, naming the file it is about.
public struct CertificateAuthorityError: Error, Sendable, CustomStringConvertible {
    /// The file or directory the error is about (absolute).
    public let path: String
    /// What is wrong, in plain words.
    public let problem: String

    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }

    public var description: String { "\(path): \(problem)" }
}

/// The proxy's own certificate authority: a self-signed CA certificate and its private key,
/// stored as `ats-proxy-ca.pem` and `ats-proxy-ca-key.pem` in the CA directory (key 0600, directory
/// 0700). Immutable once loaded; safe to share across threads.
public final class CertificateAuthority: Sendable {
    /// The CA certificate file name inside the CA directory.
    public static let certificateFileName = "ats-proxy-ca.pem"
    /// The CA private key file name inside the CA directory.
    public static let keyFileName = "ats-proxy-ca-key.pem"

    /// Key algorithm for a new CA.
    public enum KeyType: String, Sendable, CaseIterable {
        /// ECDSA P-256 (default).
        case ecdsa
        /// RSA-3072.
        case rsa
    }

    public let certificate: Certificate
    public let privateKey: PrivateKey
    /// Absolute path of the certificate file (nil for an in-memory CA).
    public let certificatePath: String?
    /// Absolute path of the key file (nil for an in-memory CA).
    public let keyPath: String?

    /// An authority from its certificate and key; the paths are where they were read from (nil: in memory only).
    public init(certificate: Certificate, privateKey: PrivateKey, certificatePath: String?, keyPath: String?) {
        self.certificate = certificate
        self.privateKey = privateKey
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }

    /// The CA directory: `--ca-dir`, else `$ATS_PROXY_CA_DIR`, else `certs/` under the working
    /// directory; always absolute.
    public static func resolveDirectory(
        explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
        workingDirectory: String = FileManager.default.currentDirectoryPath
    ) -> String {
        let chosen = explicit ?? environment["ATS_PROXY_CA_DIR"] ?? "certs"
        let url =
            chosen.hasPrefix("/")
            ? URL(fileURLWithPath: chosen) : URL(fileURLWithPath: workingDirectory).appendingPathComponent(chosen)
        return url.standardizedFileURL.path
    }

    /// Mints a new CA in memory (not written anywhere).
    public static func generate(
        keyType: KeyType = .ecdsa, now: Date = Date(), hostName: String = ProcessInfo.processInfo.hostName
    ) throws -> CertificateAuthority {
        let key = try PrivateKey.generate(keyType == .ecdsa ? .p256 : .rsa(bits: 3072))
        // Backdated a little more than the leaves (one day), so that every leaf's period lies inside the CA's.
        var spec = CertificateSpec(
            notBefore: now.addingTimeInterval(-LeafCertificateCache.backdating - 3600),
            notAfter: now.addingTimeInterval(3650 * 86400))
        let machine = hostName.isEmpty ? "localhost" : hostName
        spec.commonName = String("ats-proxy CA (\(machine))".prefix(64))
        spec.organization = "ats-proxy"
        spec.isCA = true
        spec.keyUsage = ["keyCertSign", "cRLSign"]
        spec.extendedKeyUsage = nil
        let certificate = try CertificateMinter.mint(spec, subjectKey: key, issuer: nil, issuerKey: key)
        return CertificateAuthority(certificate: certificate, privateKey: key, certificatePath: nil, keyPath: nil)
    }

    /// Loads the CA from `directory`, creating it (and the directory) when neither file exists.
    /// Returns the CA and whether it was created now.
    public static func loadOrCreate(
        directory: String, keyType: KeyType = .ecdsa, now: Date = Date()
    ) throws -> (authority: CertificateAuthority, created: Bool) {
        let certPath = (directory as NSString).appendingPathComponent(certificateFileName)
        let keyPath = (directory as NSString).appendingPathComponent(keyFileName)
        let fileManager = FileManager.default
        let certExists = fileManager.fileExists(atPath: certPath)
        let keyExists = fileManager.fileExists(atPath: keyPath)
        if certExists || keyExists {
            guard certExists else {
                throw CertificateAuthorityError(path: certPath, problem: "missing, but the CA key exists next to it")
            }
            guard keyExists else {
                throw CertificateAuthorityError(
                    path: keyPath, problem: "missing, but the CA certificate exists next to it")
            }
            return (try load(certificatePath: certPath, keyPath: keyPath), false)
        }
        let authority = try generate(keyType: keyType, now: now)
        try authority.write(to: directory)
        return (try load(certificatePath: certPath, keyPath: keyPath), true)
    }

    /// Loads an existing CA (also used for `--ca-cert`/`--ca-key` import). Refuses a key file that
    /// group or others can access, like ssh does.
    public static func load(certificatePath: String, keyPath: String) throws -> CertificateAuthority {
        let certPath = URL(fileURLWithPath: certificatePath).standardizedFileURL.path
        let keyPath = URL(fileURLWithPath: keyPath).standardizedFileURL.path
        try checkKeyPermissions(keyPath)
        let certificate: Certificate
        do {
            certificate = try Certificate(pem: try readFile(certPath))
        } catch let error as CertificateAuthorityError {
            throw error
        } catch {
            throw CertificateAuthorityError(path: certPath, problem: "not a PEM certificate (corrupt or wrong file)")
        }
        let key: PrivateKey
        do {
            key = try PrivateKey(pem: try readFile(keyPath))
        } catch let error as CertificateAuthorityError {
            throw error
        } catch {
            throw CertificateAuthorityError(
                path: keyPath, problem: "not a PEM private key (corrupt, encrypted or wrong file)")
        }
        guard certificate.matches(key) else {
            throw CertificateAuthorityError(
                path: keyPath, problem: "this key does not match the certificate \(certPath)")
        }
        guard certificate.isCA else {
            throw CertificateAuthorityError(
                path: certPath, problem: "not a CA certificate (basicConstraints CA:TRUE missing)")
        }
        return CertificateAuthority(
            certificate: certificate, privateKey: key, certificatePath: certPath, keyPath: keyPath)
    }

    /// Writes the CA into `directory` (created 0700 if missing): key 0600 first, then the
    /// certificate 0644. Refuses to overwrite existing files.
    public func write(to directory: String) throws {
        let directory = URL(fileURLWithPath: directory).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw CertificateAuthorityError(path: directory, problem: "exists and is not a directory")
            }
        } else if mkdir(directory, 0o700) != 0 {
            throw CertificateAuthorityError(path: directory, problem: "cannot create directory: \(errnoText())")
        }
        guard access(directory, W_OK | X_OK) == 0 else {
            throw CertificateAuthorityError(path: directory, problem: "directory is not writable")
        }
        // The key's directory must not be listable by others either (a git clone makes certs/ 0755).
        guard chmod(directory, 0o700) == 0 else {
            throw CertificateAuthorityError(path: directory, problem: "cannot restrict to mode 0700: \(errnoText())")
        }
        let keyPath = (directory as NSString).appendingPathComponent(Self.keyFileName)
        let certPath = (directory as NSString).appendingPathComponent(Self.certificateFileName)
        try Self.writeFile(keyPath, try privateKey.pemBytes(), mode: 0o600)
        try Self.writeFile(certPath, try certificate.pemBytes(), mode: 0o644)
    }

    private static func writeFile(_ path: String, _ bytes: [UInt8], mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else {
            throw CertificateAuthorityError(path: path, problem: "cannot create file: \(errnoText())")
        }
        defer { close(fd) }
        guard fchmod(fd, mode) == 0 else {
            throw CertificateAuthorityError(path: path, problem: "cannot set permissions: \(errnoText())")
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else {
                throw CertificateAuthorityError(path: path, problem: "write failed: \(errnoText())")
            }
            offset += written
        }
    }

    private static func checkKeyPermissions(_ path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw CertificateAuthorityError(path: path, problem: "cannot read: \(errnoText())")
        }
        let permissions = info.st_mode & 0o777
        if permissions & 0o077 != 0 {
            throw CertificateAuthorityError(
                path: path,
                problem:
                    "permissions \(String(permissions, radix: 8).leftPad(4)) are too open; a private key must not be accessible by group or others (chmod 600)"
            )
        }
    }

    private static func readFile(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CertificateAuthorityError(path: path, problem: "cannot read: \(errnoText())")
        }
        return [UInt8](data)
    }

    /// `show` text: path, SHA-256 fingerprint, validity, key type.
    public var summaryLines: [String] {
        Self.summaryLines(certificate: certificate, certificatePath: certificatePath, keyPath: keyPath)
    }

    /// `show` text for a CA certificate read alone (the key is never opened): path, SHA-256
    /// fingerprint, validity, key type.
    public static func summaryLines(certificate: Certificate, certificatePath: String?, keyPath: String?) -> [String] {
        let formatter = ISO8601DateFormatter()
        let fingerprint = certificate.sha256Fingerprint.map { hexString([$0]).uppercased() }.joined(separator: ":")
        return [
            "Certificate: \(certificatePath ?? "(in memory)")",
            "Private key: \(keyPath ?? "(in memory)")",
            "Subject: \(certificate.subjectText)",
            "SHA-256 fingerprint: \(fingerprint)",
            "Valid from: \(formatter.string(from: certificate.notBefore))",
            "Valid until: \(formatter.string(from: certificate.notAfter))",
            "Key: \(certificate.keyAlgorithm)",
        ]
    }

    /// Days before expiry from which `expiryWarning` speaks.
    public static let expiryWarningDays = 30

    /// A warning when `certificate` (the CA) expires within `expiryWarningDays` of `now` or has expired;
    /// nil otherwise. Leaves never outlive the CA, so near its end they are minted shorter and shorter.
    public static func expiryWarning(_ certificate: Certificate, now: Date = Date()) -> String? {
        let left = certificate.notAfter.timeIntervalSince(now)
        guard left < TimeInterval(expiryWarningDays) * 86400 else { return nil }
        let day = ISO8601DateFormatter().string(from: certificate.notAfter)
        if left <= 0 {
            return
                "warning: the CA expired on \(day); create a new one with 'ats-proxy ca init' in a fresh --ca-dir and trust it on each device"
        }
        let days = Int((left / 86400).rounded(.down))
        return
            "warning: the CA expires in \(days) day\(days == 1 ? "" : "s") (\(day)); minted leaves end with it. Create a new one with 'ats-proxy ca init' in a fresh --ca-dir and trust it on each device"
    }

    /// Reads only the CA certificate at `path` (PEM).
    public static func readCertificate(path: String) throws -> Certificate {
        let path = URL(fileURLWithPath: path).standardizedFileURL.path
        do {
            return try Certificate(pem: try readFile(path))
        } catch let error as CertificateAuthorityError {
            throw error
        } catch {
            throw CertificateAuthorityError(path: path, problem: "not a PEM certificate (corrupt or wrong file)")
        }
    }
}

func errnoText() -> String { String(cString: strerror(errno)) }

extension String {
    func leftPad(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
