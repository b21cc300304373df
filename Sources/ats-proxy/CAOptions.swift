import ATSTLS
import ArgumentParser
import Foundation

/// Where the proxy's CA lives and how to create or import it; shared by `ca` and the proxy run.
struct CAOptions: ParsableArguments {
    @Option(
        name: .long,
        help:
            "CA directory (default: $ATS_PROXY_CA_DIR, else one per user: $XDG_DATA_HOME/ats-proxy or ~/.local/share/ats-proxy; ~/Library/Application Support/ats-proxy on macOS)."
    )
    var caDir: String?

    @Option(name: .long, help: "Use this existing CA certificate (PEM) instead of the CA directory; needs --ca-key.")
    var caCert: String?

    @Option(name: .long, help: "Private key (PEM) of --ca-cert; must not be readable by group or others.")
    var caKey: String?

    @Option(name: .long, help: "Key type of a new CA: ecdsa (P-256, default) or rsa (RSA-3072).")
    var caKeyType: CertificateAuthority.KeyType = .ecdsa

    func validate() throws {
        if (caCert == nil) != (caKey == nil) { throw ValidationError("--ca-cert and --ca-key go together") }
    }

    /// The absolute CA directory: `--ca-dir` (a settings file and `ATS_PROXY_CA_DIR` arrive as it),
    /// else the per-user directory, after copying a CA left in `certs/` by earlier versions into it.
    func resolveDirectory() throws -> (path: String, legacy: CADirectoryLocator.LegacyOutcome) {
        if caDir != nil || ProcessInfo.processInfo.environment["ATS_PROXY_CA_DIR"] != nil {
            return (CertificateAuthority.resolveDirectory(explicit: caDir), .none)
        }
        let (path, legacy) = try CADirectoryLocator().defaultDirectory()
        return (path, legacy)
    }

    /// The absolute CA directory; a legacy CA copied on the way is reported on stderr.
    var directory: String {
        get throws {
            let (path, legacy) = try resolveDirectory()
            if let message = CADirectoryLocator.message(legacy, directory: path) {
                FileHandle.standardError.write(Data("ats-proxy: \(message)\n".utf8))
            }
            return path
        }
    }

    /// Loads the imported CA, or loads (creating on first use) the one in the CA directory, and
    /// says what happened to a legacy `certs/` CA.
    func loadOrCreate() throws -> (authority: CertificateAuthority, created: Bool, note: String?) {
        if let caCert, let caKey {
            return (try CertificateAuthority.load(certificatePath: caCert, keyPath: caKey), false, nil)
        }
        let (path, legacy) = try resolveDirectory()
        let (authority, created) = try CertificateAuthority.loadOrCreate(directory: path, keyType: caKeyType)
        return (authority, created, CADirectoryLocator.message(legacy, directory: path))
    }

    /// The existing CA's certificate and the paths of its two files, without opening the key.
    func existingCertificate() throws -> (certificate: Certificate, certificatePath: String, keyPath: String) {
        if let caCert, let caKey { return (try CertificateAuthority.readCertificate(path: caCert), caCert, caKey) }
        let directory = try self.directory
        let certificate = (directory as NSString).appendingPathComponent(CertificateAuthority.certificateFileName)
        guard FileManager.default.fileExists(atPath: certificate) else {
            throw CertificateAuthorityError(path: certificate, problem: "no CA here yet; run 'ats-proxy ca init'")
        }
        return (
            try CertificateAuthority.readCertificate(path: certificate), certificate,
            (directory as NSString).appendingPathComponent(CertificateAuthority.keyFileName)
        )
    }

    /// Loads an existing CA without creating one.
    func loadExisting() throws -> CertificateAuthority {
        if let caCert, let caKey { return try CertificateAuthority.load(certificatePath: caCert, keyPath: caKey) }
        let directory = try self.directory
        let certificate = (directory as NSString).appendingPathComponent(CertificateAuthority.certificateFileName)
        guard FileManager.default.fileExists(atPath: certificate) else {
            throw CertificateAuthorityError(path: certificate, problem: "no CA here yet; run 'ats-proxy ca init'")
        }
        return try CertificateAuthority.load(
            certificatePath: certificate,
            keyPath: (directory as NSString).appendingPathComponent(CertificateAuthority.keyFileName))
    }
}

extension CertificateAuthority.KeyType: ExpressibleByArgument {}
