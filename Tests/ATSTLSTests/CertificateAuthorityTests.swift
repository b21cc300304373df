import ATSTestSupport
import Foundation
import Testing

@testable import ATSTLS

/// Tests for: The proxy's certificate authority on disk.
@Suite("The proxy's certificate authority on disk")
struct CertificateAuthorityTests {
    static func temporaryDirectory() -> String {
        NSTemporaryDirectory() + "ats-ca-test-\(UUID().uuidString)"
    }

    static func mode(_ path: String) -> Int {
        var info = stat()
        stat(path, &info)
        return Int(info.st_mode & 0o777)
    }

    @Test func createsP256CAWithPrivateFiles() throws {
        let directory = Self.temporaryDirectory() + "/certs"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        try FileManager.default.createDirectory(
            atPath: (directory as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let (authority, created) = try CertificateAuthority.loadOrCreate(directory: directory)
        #expect(created)
        #expect(Self.mode(directory) == 0o700)
        #expect(Self.mode(authority.keyPath!) == 0o600)
        #expect(authority.keyPath == directory + "/ats-proxy-ca-key.pem")
        #expect(authority.certificatePath == directory + "/ats-proxy-ca.pem")
        let certificate = authority.certificate
        #expect(certificate.keyAlgorithm == .ec(bits: 256))
        #expect(certificate.signatureHash == .sha256)
        #expect(certificate.isCA)
        #expect(certificate.isSelfSigned)
        #expect(certificate.subjectText.contains("O=ats-proxy"))
        let years = certificate.notAfter.timeIntervalSince(certificate.notBefore) / (365 * 86400)
        #expect(years > 9.9 && years < 10.1)
        let (again, createdAgain) = try CertificateAuthority.loadOrCreate(directory: directory)
        #expect(!createdAgain)
        #expect(again.certificate.sha256Fingerprint == certificate.sha256Fingerprint)
        #expect(authority.summaryLines.contains { $0.hasPrefix("SHA-256 fingerprint: ") })
    }

    @Test func rsaOptionGivesRSA3072() throws {
        let authority = try CertificateAuthority.generate(keyType: .rsa)
        #expect(authority.certificate.keyAlgorithm == .rsa(bits: 3072))
        #expect(authority.certificate.signatureHash == .sha256)
    }

    @Test func refusesAKeyReadableByOthers() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (authority, _) = try CertificateAuthority.loadOrCreate(directory: directory)
        chmod(authority.keyPath!, 0o644)
        #expect {
            try CertificateAuthority.loadOrCreate(directory: directory)
        } throws: { error in
            let text = "\(error)"
            return text.hasPrefix(authority.keyPath!) && text.contains("too open") && !text.contains("\n")
        }
    }

    @Test func corruptCertificateNamesTheFile() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (authority, _) = try CertificateAuthority.loadOrCreate(directory: directory)
        try Data("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n".utf8).write(
            to: URL(fileURLWithPath: authority.certificatePath!))
        #expect {
            try CertificateAuthority.loadOrCreate(directory: directory)
        } throws: { error in "\(error)".hasPrefix(authority.certificatePath!) }
    }

    @Test func mismatchedKeyNamesTheKeyFile() throws {
        let first = Self.temporaryDirectory()
        let second = Self.temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: first)
            try? FileManager.default.removeItem(atPath: second)
        }
        let (one, _) = try CertificateAuthority.loadOrCreate(directory: first)
        let (two, _) = try CertificateAuthority.loadOrCreate(directory: second)
        #expect {
            try CertificateAuthority.load(certificatePath: one.certificatePath!, keyPath: two.keyPath!)
        } throws: { error in
            "\(error)".hasPrefix(two.keyPath!) && "\(error)".contains("does not match")
        }
        // Importing a matching pair works (an existing team CA).
        let imported = try CertificateAuthority.load(certificatePath: one.certificatePath!, keyPath: one.keyPath!)
        #expect(imported.certificate.sha256Fingerprint == one.certificate.sha256Fingerprint)
    }

    @Test func unusableDirectoryNamesThePath() throws {
        let file = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: file) }
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        #expect {
            try CertificateAuthority.loadOrCreate(directory: file)
        } throws: { error in "\(error)".hasPrefix(file) }
        #expect {
            try CertificateAuthority.loadOrCreate(directory: file + "/certs")
        } throws: { error in "\(error)".hasPrefix(file + "/certs") }
    }

    @Test func directoryResolution() {
        #expect(
            CertificateAuthority.resolveDirectory(explicit: nil, environment: [:], workingDirectory: "/srv/app")
                == "/srv/app/certs")
        #expect(
            CertificateAuthority.resolveDirectory(
                explicit: nil, environment: ["ATS_PROXY_CA_DIR": "ca"], workingDirectory: "/srv/app") == "/srv/app/ca")
        #expect(
            CertificateAuthority.resolveDirectory(
                explicit: "/etc/ats", environment: ["ATS_PROXY_CA_DIR": "ca"], workingDirectory: "/srv/app")
                == "/etc/ats")
    }
}
