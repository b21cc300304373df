import ATSSystemTools
import ATSTLS
import ArgumentParser
import Foundation

/// Where `ca install` and `ca uninstall` put (or take away) trust in the proxy's CA.
struct CATrustStoreOptions: ParsableArguments {
    @Option(
        name: .long,
        help: "iOS Simulator: booted (the booted one), a device UDID, or all (every booted simulator); repeatable.")
    var simulator: [String] = []

    @Flag(
        name: .long, help: "macOS: the login keychain, trusted as a root for this user (macOS asks for the password).")
    var keychain = false

    @Flag(name: .long, help: "Linux: the system trust store (anchor directory + update-ca-certificates); needs root.")
    var system = false

    @Option(name: .long, help: "With --system: the anchor directory (default: the distribution's).")
    var anchorDir: String?

    func validate() throws {
        guard !simulator.isEmpty || keychain || system else {
            throw ValidationError("say where: --simulator booted|UDID|all, --keychain (macOS) or --system (Linux)")
        }
        if anchorDir != nil && !system { throw ValidationError("--anchor-dir goes with --system") }
    }

    /// Runs `body` for each chosen store, printing its lines; the first failure ends the command (status 1)
    /// after saying which store failed and what the tool answered.
    func forEachStore(_ body: (Store) throws -> [String]) throws {
        var stores: [Store] = simulator.map { .simulator(SimulatorKeychain.Target(argument: $0)) }
        if keychain { stores.append(.keychain) }
        if system { stores.append(.system(anchorDir)) }
        for store in stores {
            do {
                for line in try body(store) { print("ats-proxy: \(line)") }
            } catch {
                FileHandle.standardError.write(Data("ats-proxy: error: \(store): \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
    }

    /// One trust store.
    enum Store: CustomStringConvertible {
        /// One or more simulators.
        case simulator(SimulatorKeychain.Target)
        /// The macOS login keychain.
        case keychain
        /// The Linux system store, optionally with an explicit anchor directory.
        case system(String?)

        var description: String {
            switch self {
            case .simulator(let target): "--simulator \(target)"
            case .keychain: "--keychain"
            case .system: "--system"
            }
        }
    }
}

/// `ats-proxy ca install --simulator booted|UDID|all | --keychain | --system`: makes the Simulator, the Mac
/// or the Linux machine trust the proxy's CA, with the platform's own tools.
struct CAInstallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Trust the CA in the iOS Simulator, the macOS keychain or the Linux system store.",
        discussion: """
            --simulator runs 'xcrun simctl keychain DEVICE add-root-cert'; --keychain runs \
            'security add-trusted-cert -r trustRoot -k ~/Library/Keychains/login.keychain-db'; --system copies \
            the CA to the anchor directory (/usr/local/share/ca-certificates on Debian) and runs \
            update-ca-certificates. Undo each with 'ats-proxy ca uninstall' and the same flag.
            """)

    @OptionGroup var ca: CAOptions
    @OptionGroup var stores: CATrustStoreOptions

    func run() throws {
        let certificatePath: String
        do {
            certificatePath = try ca.existingCertificatePath()
        } catch {
            exitWithError(error)
        }
        try stores.forEachStore { store in
            switch store {
            case .simulator(let target):
                return try SimulatorKeychain().addRootCertificate(certificatePath, to: target)
            case .keychain:
                return try MacKeychain().trust(certificatePath)
            case .system(let directory):
                return try LinuxTrustAnchors.detect(directory: directory).install(certificatePath)
            }
        }
    }
}

/// `ats-proxy ca uninstall --simulator … | --keychain | --system`: takes the trust `ca install` gave away.
struct CAUninstallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "uninstall",
        abstract: "Remove the CA from the iOS Simulator, the macOS keychain or the Linux system store.",
        discussion: """
            --simulator resets the simulator's keychain (simctl cannot remove a single certificate: every \
            certificate added to that simulator goes); --keychain runs 'security remove-trusted-cert' and \
            'security delete-certificate -Z SHA256'; --system removes the anchor file and runs \
            update-ca-certificates.
            """)

    @OptionGroup var ca: CAOptions
    @OptionGroup var stores: CATrustStoreOptions

    func run() throws {
        let authority: CertificateAuthority
        let certificatePath: String
        do {
            authority = try ca.loadExisting()
            certificatePath = try ca.existingCertificatePath()
        } catch {
            exitWithError(error)
        }
        try stores.forEachStore { store in
            switch store {
            case .simulator(let target):
                return try SimulatorKeychain().reset(target)
            case .keychain:
                let hex = authority.certificate.sha256Fingerprint.map { String(format: "%02X", $0) }.joined()
                return try MacKeychain().untrust(certificatePath, sha256Hex: hex)
            case .system(let directory):
                return try LinuxTrustAnchors.detect(directory: directory).uninstall()
            }
        }
    }
}

extension CAOptions {
    /// The path of the existing CA certificate (`--ca-cert`, or the one in the CA directory).
    func existingCertificatePath() throws -> String {
        let authority = try loadExisting()
        if let path = authority.certificatePath { return path }
        return (try directory as NSString).appendingPathComponent(CertificateAuthority.certificateFileName)
    }
}
