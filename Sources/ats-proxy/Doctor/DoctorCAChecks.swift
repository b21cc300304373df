import ATSTLS
import Foundation

/// The proxy's CA in the CA directory: both files there, the key private (no access for group or others, as
/// the proxy itself demands), the pair loadable and matching, and the certificate not expired nor within
/// ``renewalWindow`` of its end. A missing CA is a warning: the first run creates one.
struct CACheck: DoctorCheck {
    /// How close to its end a CA counts as a problem.
    static let renewalWindow: TimeInterval = 30 * 86400

    func run(_ context: DoctorContext) -> [DoctorFinding] {
        let directory = context.caDirectory
        let certificatePath = (directory as NSString).appendingPathComponent(CertificateAuthority.certificateFileName)
        let keyPath = (directory as NSString).appendingPathComponent(CertificateAuthority.keyFileName)
        let fileManager = FileManager.default
        switch (fileManager.fileExists(atPath: certificatePath), fileManager.fileExists(atPath: keyPath)) {
        case (false, false):
            return [
                .warning(
                    "CA", "no CA in \(directory) yet; the first 'ats-proxy run' creates one",
                    fix: "ats-proxy ca init  (then trust it: ats-proxy ca install …)")
            ]
        case (true, false), (false, true):
            let missing = fileManager.fileExists(atPath: certificatePath) ? keyPath : certificatePath
            return [
                .problem(
                    "CA", "\(missing) is missing: half a CA cannot be used",
                    fix: "restore it from a backup, or move \(directory) away and run 'ats-proxy ca init' (a new CA)")
            ]
        case (true, true):
            return [keyPermissions(keyPath)] + certificate(certificatePath, keyPath: keyPath, context: context)
        }
    }

    /// The key file's mode: a problem when group or others have any access.
    private func keyPermissions(_ keyPath: String) -> DoctorFinding {
        var info = stat()
        guard stat(keyPath, &info) == 0 else {
            return .problem(
                "CA key", "cannot read \(keyPath): \(String(cString: strerror(errno)))", fix: "check the file's owner")
        }
        let mode = info.st_mode & 0o777
        let octal = String(mode, radix: 8)
        guard mode & 0o077 == 0 else {
            return .problem(
                "CA key",
                "\(keyPath) is open to group or others (mode 0\(octal)); anyone who reads it can impersonate every site to devices that trust the CA, and the proxy refuses it",
                fix: "chmod 600 \(keyPath)")
        }
        return .ok("CA key", "\(keyPath) is private (mode 0\(octal))")
    }

    /// The certificate read on its own (so an unsafe key does not hide its dates), then the pair loaded as
    /// the proxy loads it when the key is private.
    private func certificate(_ path: String, keyPath: String, context: DoctorContext) -> [DoctorFinding] {
        let fix =
            "move \(context.caDirectory) away, run 'ats-proxy ca init' and trust the new CA (ats-proxy ca install …)"
        guard let pem = FileManager.default.contents(atPath: path), let certificate = try? Certificate(pem: Array(pem))
        else {
            return [.problem("CA", "\(path) is not a PEM certificate", fix: fix)]
        }
        var findings: [DoctorFinding] = []
        let end = Self.day(certificate.notAfter)
        let remaining = certificate.notAfter.timeIntervalSince(context.now)
        if remaining <= 0 {
            findings.append(.problem("CA validity", "the CA expired on \(end); no device accepts its leaves", fix: fix))
        } else if remaining < Self.renewalWindow {
            let days = Int(remaining / 86400)
            findings.append(
                .problem(
                    "CA validity", "the CA expires on \(end), in \(days) day\(days == 1 ? "" : "s")",
                    fix: "before then: " + fix))
        } else {
            findings.append(.ok("CA validity", "\(path) is valid until \(end)"))
        }
        var info = stat()
        if stat(keyPath, &info) == 0, info.st_mode & 0o077 == 0 {
            do {
                _ = try CertificateAuthority.load(certificatePath: path, keyPath: keyPath)
            } catch {
                findings.append(.problem("CA", "the proxy cannot load its CA: \(error)", fix: fix))
            }
        }
        return findings
    }

    /// `2026-11-28` (UTC).
    static func day(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: date)
    }
}

extension DoctorContext {
    /// The CA certificate's path in the CA directory.
    var caCertificatePath: String {
        (caDirectory as NSString).appendingPathComponent(CertificateAuthority.certificateFileName)
    }

    /// The CA certificate, when the CA directory holds a readable one (trust checks need it).
    var caCertificate: Certificate? {
        guard let pem = FileManager.default.contents(atPath: caCertificatePath) else { return nil }
        return try? Certificate(pem: Array(pem))
    }
}
