import ATSSystemTools
import ATSTLS
import Foundation

/// Linux: whether the distribution's trust store holds this CA (the anchor file `ca install --system` writes).
/// Applies where `update-ca-certificates` or `update-ca-trust` is on PATH. Not there is a warning: `exec`
/// trusts the CA in its own mount namespace, but other programs (curl without `--cacert`) do not.
struct LinuxSystemTrustCheck: DoctorCheck {
    func run(_ context: DoctorContext) -> [DoctorFinding] {
        guard let certificate = context.caCertificate,
            let anchors = try? LinuxTrustAnchors.detect(
                directory: context.anchorDirectory, environment: context.environment)
        else { return [] }
        let anchor = "\(anchors.layout.directory)/\(LinuxTrustAnchors.fileName)"
        let install = "sudo ats-proxy ca install --system"
        guard let data = FileManager.default.contents(atPath: anchor) else {
            return [
                .warning(
                    "system trust",
                    "the system trust store does not hold the CA (no \(anchor)); 'ats-proxy exec' "
                        + "does not need it, programs run on their own do (curl without --cacert)",
                    fix: install)
            ]
        }
        guard let installed = try? Certificate(pem: Array(data)),
            installed.sha256Fingerprint == certificate.sha256Fingerprint
        else {
            return [
                .problem(
                    "system trust",
                    "\(anchor) holds another certificate than the CA in \(context.caDirectory) (an older CA?)",
                    fix: install)
            ]
        }
        return [.ok("system trust", "the system trust store holds the CA (\(anchor))")]
    }
}

/// macOS: whether the keychain trusts the CA as a root (`security verify-cert`, local certificates only).
/// Applies where `security` is on PATH. Not trusted is a warning: the Simulator has its own store; Mac apps and
/// `--system-proxy` sessions need it.
struct KeychainTrustCheck: DoctorCheck {
    func run(_ context: DoctorContext) -> [DoctorFinding] {
        let security = ExternalTool("security", environment: context.environment)
        guard security.locate() != nil, context.caCertificate != nil else { return [] }
        let arguments = ["verify-cert", "-c", context.caCertificatePath, "-L"]
        let output: ToolOutput
        do {
            output = try security.run(arguments)
        } catch {
            return [.warning("keychain trust", "cannot ask the keychain: \(error)", fix: nil)]
        }
        guard output.status == 0 else {
            let answer = output.message.isEmpty ? "" : " (security: \(output.message))"
            return [
                .warning(
                    "keychain trust",
                    "the macOS keychain does not trust the CA\(answer); Mac apps and --system-proxy sessions will fail TLS",
                    fix: "ats-proxy ca install --keychain")
            ]
        }
        return [.ok("keychain trust", "the macOS keychain trusts the CA")]
    }
}

/// iOS Simulator: for each booted simulator (`xcrun simctl list devices booted -j`), whether its trust store
/// holds the CA. simctl can add a root but not list them, so the store itself is read with `sqlite3`
/// (`tsettings.sha256` of the device's TrustStore.sqlite3). A booted simulator without the CA is a problem: every
/// intercepted HTTPS load of the app fails there. A store that cannot be read is a warning.
struct SimulatorTrustCheck: DoctorCheck {
    /// The trust store of one simulator, under the user's CoreSimulator directory.
    static func trustStorePath(udid: String, home: String) -> String {
        "\(home)/Library/Developer/CoreSimulator/Devices/\(udid)/data/private/var/protected/trustd/private/TrustStore.sqlite3"
    }

    func run(_ context: DoctorContext) -> [DoctorFinding] {
        guard ExternalTool("xcrun", environment: context.environment).locate() != nil,
            let certificate = context.caCertificate
        else { return [] }
        let devices: [SimulatorKeychain.Device]
        do {
            devices = try SimulatorKeychain(environment: context.environment).bootedDevices()
        } catch {
            return [.warning("Simulator trust", "cannot list the booted simulators: \(error)", fix: nil)]
        }
        guard !devices.isEmpty else {
            return [
                .ok("Simulator trust", "no simulator is booted; 'ats-proxy ca install --simulator all' once one is")
            ]
        }
        let fingerprint = certificate.sha256Fingerprint.map { String(format: "%02X", $0) }.joined()
        return devices.map { finding(for: $0, fingerprint: fingerprint, context: context) }
    }

    private func finding(for device: SimulatorKeychain.Device, fingerprint: String, context: DoctorContext)
        -> DoctorFinding
    {
        let name = "\(device.name) (\(device.udid))"
        let fix = "ats-proxy ca install --simulator \(device.udid)"
        let store = Self.trustStorePath(udid: device.udid, home: context.home)
        guard FileManager.default.fileExists(atPath: store) else {
            return .problem("Simulator trust", "\(name) has no added root certificate, so not the CA", fix: fix)
        }
        let sqlite = ExternalTool("sqlite3", environment: context.environment)
        guard let output = try? sqlite.run(["-readonly", store, "SELECT hex(sha256) FROM tsettings"]),
            output.status == 0
        else {
            return .warning(
                "Simulator trust", "cannot read the trust store of \(name) (\(store)) with sqlite3",
                fix: "if its HTTPS loads fail with a trust error: \(fix)")
        }
        let trusted = output.stdout.split(whereSeparator: \.isNewline).contains { $0 == fingerprint }
        return trusted
            ? .ok("Simulator trust", "\(name) trusts the CA")
            : .problem(
                "Simulator trust", "\(name) does not trust the CA; the app's HTTPS loads will fail there", fix: fix)
    }
}
