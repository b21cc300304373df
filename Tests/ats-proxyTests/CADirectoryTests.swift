import ATSTestSupport
import Foundation
import Testing

/// One CA per user: the same CA from any working directory, the variable and the flag still win,
/// and a CA left in `certs/` is copied (not re-created) with a message.
@Suite struct CADirectoryTests {
    static func fingerprint(_ text: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix("SHA-256 fingerprint: ") }.map {
            String($0.dropFirst("SHA-256 fingerprint: ".count))
        }
    }

    @Test func sameCAFromDifferentWorkingDirectories() throws {
        let home = try TemporaryDirectory("ca-home")
        let first = try TemporaryDirectory("ca-cwd-a")
        let second = try TemporaryDirectory("ca-cwd-b")
        let environment = Invocation.environment(home: home.path)
        let created = try Invocation.run(["ca", "init"], in: first.path, environment: environment)
        #expect(created.status == 0, "\(created.stderr)")
        let userDirectory = home.file(".local/share/ats-proxy")
        #expect(created.stdout.hasPrefix("Created a new CA in \(userDirectory)\n"))
        let shown = try Invocation.run(["ca", "show"], in: second.path, environment: environment)
        #expect(shown.stdout.contains("Certificate: \(userDirectory)/ats-proxy-ca.pem"))
        #expect(
            Self.fingerprint(shown.stdout) != nil && Self.fingerprint(shown.stdout) == Self.fingerprint(created.stdout))
        #expect(!FileManager.default.fileExists(atPath: second.file("certs")))
        // XDG_DATA_HOME moves the per-user directory; ATS_PROXY_CA_DIR and --ca-dir still choose.
        let xdg = try Invocation.run(
            ["ca", "init"], in: second.path,
            environment: Invocation.environment(home: home.path, ["XDG_DATA_HOME": home.file("xdg")]))
        #expect(xdg.stdout.hasPrefix("Created a new CA in \(home.file("xdg/ats-proxy"))\n"))
        let variable = try Invocation.run(
            ["ca", "init"], in: second.path,
            environment: Invocation.environment(home: home.path, ["ATS_PROXY_CA_DIR": home.file("chosen")]))
        #expect(variable.stdout.hasPrefix("Created a new CA in \(home.file("chosen"))\n"))
    }

    @Test func legacyCertsCAIsCopiedOnceWithAMessage() throws {
        let home = try TemporaryDirectory("ca-legacy-home")
        let project = try TemporaryDirectory("ca-legacy-cwd")
        let environment = Invocation.environment(home: home.path)
        let legacy = try Invocation.run(
            ["ca", "init", "--ca-dir", "certs"], in: project.path, environment: environment)
        #expect(legacy.status == 0)
        let shown = try Invocation.run(["ca", "show"], in: project.path, environment: environment)
        let userDirectory = home.file(".local/share/ats-proxy")
        #expect(
            shown.stderr
                == "ats-proxy: CA copied from \(project.file("certs")) to \(userDirectory), the per-user CA directory (same key and fingerprint: devices that trust it need nothing new); \(project.file("certs")) is no longer used\n"
        )
        #expect(Self.fingerprint(shown.stdout) == Self.fingerprint(legacy.stdout))
        let key = try FileManager.default.attributesOfItem(atPath: "\(userDirectory)/ats-proxy-ca-key.pem")
        #expect((key[.posixPermissions] as? Int) == 0o600)
        // Once copied, no further message; a different CA later put in certs/ is reported as unused.
        #expect(try Invocation.run(["ca", "show"], in: project.path, environment: environment).stderr.isEmpty)
        try FileManager.default.removeItem(atPath: project.file("certs"))
        _ = try Invocation.run(["ca", "init", "--ca-dir", "certs"], in: project.path, environment: environment)
        let other = try Invocation.run(["ca", "show"], in: project.path, environment: environment)
        #expect(other.stderr.contains("holds a different CA that is no longer used"))
        #expect(Self.fingerprint(other.stdout) == Self.fingerprint(legacy.stdout))
    }
}
