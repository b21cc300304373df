import ATSTLS
import ArgumentParser
import Foundation

/// Where the proxy's CA lives and how to create or import it; shared by `ca` and the proxy run.
struct CAOptions: ParsableArguments {
    @Option(name: .long, help: "CA directory (default: $ATS_PROXY_CA_DIR, else certs/ under the working directory).")
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

    /// The absolute CA directory.
    var directory: String { CertificateAuthority.resolveDirectory(explicit: caDir) }

    /// Loads the imported CA, or loads (creating on first use) the one in the CA directory.
    func loadOrCreate() throws -> (authority: CertificateAuthority, created: Bool) {
        if let caCert, let caKey {
            return (try CertificateAuthority.load(certificatePath: caCert, keyPath: caKey), false)
        }
        return try CertificateAuthority.loadOrCreate(directory: directory, keyType: caKeyType)
    }

    /// Loads an existing CA without creating one.
    func loadExisting() throws -> CertificateAuthority {
        if let caCert, let caKey { return try CertificateAuthority.load(certificatePath: caCert, keyPath: caKey) }
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
