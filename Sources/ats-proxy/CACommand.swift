import ATSProxyCore
import ATSTLS
import ArgumentParser
import Foundation

/// `ats-proxy ca …`: create, show and export the proxy's certificate authority.
struct CACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca", abstract: "Manage the proxy's certificate authority.",
        subcommands: [
            CAInitCommand.self, CAShowCommand.self, CAExportCommand.self, CAInstallCommand.self,
            CAUninstallCommand.self, CASimulatorCommand.self,
        ])
}

/// `ats-proxy ca init`: create the CA (or import --ca-cert/--ca-key into the CA directory).
struct CAInitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init", abstract: "Create the CA in the CA directory, or import an existing one into it.")

    @OptionGroup var ca: CAOptions

    func run() throws {
        do {
            let directory = try ca.directory
            if let certificate = ca.caCert, let key = ca.caKey {
                let imported = try CertificateAuthority.load(certificatePath: certificate, keyPath: key)
                try imported.write(to: directory)
                print("Imported the CA into \(directory)")
            } else {
                let (_, created) = try CertificateAuthority.loadOrCreate(directory: directory, keyType: ca.caKeyType)
                print(created ? "Created a new CA in \(directory)" : "A CA already exists in \(directory)")
            }
            var shown = ca
            shown.caCert = nil
            shown.caKey = nil
            shown.caDir = directory
            for line in try shown.loadExisting().summaryLines { print(line) }
            print("Install \(CertificateAuthority.certificateFileName) on the device and enable full trust for it.")
        } catch {
            exitWithError(error)
        }
    }
}

/// `ats-proxy ca show`: path, SHA-256 fingerprint, validity and key type, and a warning on stderr when
/// the CA expires within 30 days. Reads the certificate only, never the key.
struct CAShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show the CA's files, fingerprint, validity and key type.")

    @OptionGroup var ca: CAOptions

    func run() throws {
        do {
            let (certificate, certificatePath, keyPath) = try ca.existingCertificate()
            let lines = CertificateAuthority.summaryLines(
                certificate: certificate, certificatePath: certificatePath, keyPath: keyPath)
            for line in lines { print(line) }
            if let warning = CertificateAuthority.expiryWarning(certificate) {
                FileHandle.standardError.write(Data("ats-proxy: \(warning)\n".utf8))
            }
        } catch {
            exitWithError(error)
        }
    }
}

/// `ats-proxy ca export --format pem|der|mobileconfig [--output FILE]`: the CA certificate for
/// devices; `mobileconfig` is an Apple configuration profile iOS offers to install.
struct CAExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the CA certificate (never the key) as PEM, DER or an iOS configuration profile.")

    /// Export formats.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case pem, der, mobileconfig
    }

    @OptionGroup var ca: CAOptions

    @Option(name: .long, help: "pem, der (.cer) or mobileconfig.")
    var format: Format = .pem

    @Option(name: .shortAndLong, help: "Write to this file instead of standard output.")
    var output: String?

    func run() throws {
        do {
            let certificate = try ca.loadExisting().certificate
            let bytes: [UInt8]
            switch format {
            case .pem: bytes = try certificate.pemBytes()
            case .der: bytes = certificate.derBytes
            case .mobileconfig:
                bytes = try OnboardingSite(certificate: certificate, proxyAddresses: []).mobileconfig
            }
            if let output {
                guard FileManager.default.createFile(atPath: output, contents: Data(bytes)) else {
                    throw CertificateAuthorityError(path: output, problem: "cannot write")
                }
            } else {
                FileHandle.standardOutput.write(Data(bytes))
            }
        } catch {
            exitWithError(error)
        }
    }
}

/// `ats-proxy ca simulator-command`: the commands that make the booted iOS Simulator (and macOS)
/// trust the CA.
struct CASimulatorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulator-command", abstract: "Print the command that adds the CA to the booted iOS Simulator.")

    @OptionGroup var ca: CAOptions

    func run() throws {
        do {
            let authority = try ca.loadExisting()
            let path = authority.certificatePath ?? "ats-proxy-ca.pem"
            print(OnboardingSite.simulatorCommand(caPath: path))
            print("# or let ats-proxy run it: ats-proxy ca install --simulator booted (or a UDID, or all)")
            print("# macOS (system-wide): \(OnboardingSite.macOSCommand(caPath: path))")
        } catch {
            exitWithError(error)
        }
    }
}
