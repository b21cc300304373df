import ATSTestSupport
import Foundation
import Testing

/// Whether `scripts/package --test` runs this process (it sets ATS_PROXY_PACKAGE_TEST=1).
enum PackagingStage {
    static let isOn = ProcessInfo.processInfo.environment["ATS_PROXY_PACKAGE_TEST"] == "1"
}

/// What `scripts/package --test` built (CI's package stage): `make install` into a scratch prefix, the Linux
/// archive and the .deb. Runs only when that script sets ATS_PROXY_PACKAGE_TEST=1 (a release build is too long
/// for the unit suite); otherwise every test here is reported as skipped. The .deb test installs the package on
/// this machine with dpkg -i (root) and removes it with dpkg -r.
@Suite(.serialized, .enabled(if: PackagingStage.isOn, "run by scripts/package --test (CI's package stage)"))
struct PackagingTests {
    static let environment = ProcessInfo.processInfo.environment

    /// An environment variable `scripts/package --test` sets.
    static func given(_ name: String) throws -> String {
        try #require(environment[name].flatMap { $0.isEmpty ? nil : $0 }, "\(name) is not set")
    }

    /// Runs a shell command line with a bounded wait.
    static func shell(_ script: String, timeout: TimeInterval = 60) throws -> CLITests.Result {
        try CLITests.launch(
            URL(fileURLWithPath: "/bin/bash"), ["-c", script], environment: E2E.environment, timeout: timeout)
    }

    /// The first line of `--version` names the packaged version; the libraries are the loaded ones.
    static func expectVersionReport(_ binary: String) throws {
        let result = try CLITests.runTool(binary, ["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "ats-proxy \(try given("ATS_PROXY_PACKAGE_VERSION"))", "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("commit:  ") && !$0.contains("unknown") }, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("OpenSSL: OpenSSL 3.") }, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("nghttp2: 1.") }, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("TLS key exchange: X25519, P-256") }, "\(result.stdout)")
    }

    @Test func makeInstallPutsTheBinaryCompletionsManPageAndDocsUnderThePrefix() throws {
        let prefix = try Self.given("ATS_PROXY_PACKAGE_PREFIX")
        try Self.expectVersionReport("\(prefix)/bin/ats-proxy")

        // bash loads the completion script and registers a completion for the command.
        let bash = try Self.shell(
            "source '\(prefix)/share/bash-completion/completions/ats-proxy' && complete -p ats-proxy")
        #expect(bash.status == 0, "\(bash.stderr)")
        #expect(bash.stdout.contains("complete ") && bash.stdout.hasSuffix("ats-proxy\n"), "\(bash.stdout)")
        let zsh = try String(contentsOfFile: "\(prefix)/share/zsh/site-functions/_ats-proxy", encoding: .utf8)
        #expect(zsh.hasPrefix("#compdef ats-proxy"))
        let fish = try String(
            contentsOfFile: "\(prefix)/share/fish/vendor_completions.d/ats-proxy.fish", encoding: .utf8)
        #expect(
            fish.contains("complete -c 'ats-proxy'") || fish.contains("complete -c ats-proxy"), "\(fish.prefix(300))")

        // man renders the page: the command, its subcommands and their options.
        let man = try Self.shell("MANPAGER=cat MANWIDTH=100 man -l '\(prefix)/share/man/man1/ats-proxy.1'")
        #expect(man.status == 0, "\(man.stderr)")
        #expect(man.stdout.contains("NAME") && man.stdout.contains("ats-proxy"), "\(man.stdout.prefix(500))")
        for word in ["explain", "lint", "diagnose", "--listen", "--config"] {
            #expect(man.stdout.contains(word), "the man page does not mention \(word)")
        }
        #expect(FileManager.default.fileExists(atPath: "\(prefix)/share/doc/ats-proxy/docs/INSTALL.md"))

        // make uninstall takes away everything make install put there.
        let repository = CLITests.repository.path
        let uninstall = try Self.shell("make -s -C '\(repository)' uninstall PREFIX='\(prefix)'")
        #expect(uninstall.status == 0, "\(uninstall.stderr)")
        let left = FileManager.default.enumerator(atPath: prefix)?.compactMap { entry -> String? in
            let path = "\(prefix)/\(entry as? String ?? "")"
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
                ? path : nil
        }
        #expect(left ?? [] == [], "left behind: \(left ?? [])")
    }

    @Test func theArchiveHoldsTheBinaryAndNamesTheLibrariesItNeeds() throws {
        let archive = try Self.given("ATS_PROXY_PACKAGE_ARCHIVE")
        let version = try Self.given("ATS_PROXY_PACKAGE_VERSION")
        let listing = try Self.shell("tar -tzf '\(archive)'")
        #expect(listing.status == 0, "\(listing.stderr)")
        for entry in ["bin/ats-proxy", "share/man/man1/ats-proxy.1", "LIBRARIES.txt"] {
            #expect(listing.stdout.contains("ats-proxy-\(version)/\(entry)"), "no \(entry) in \(archive)")
        }
        let libraries = try Self.shell("tar -xzOf '\(archive)' 'ats-proxy-\(version)/LIBRARIES.txt'")
        #expect(libraries.stdout.contains("libssl.so.3") && libraries.stdout.contains("libnghttp2.so.14"))
        // The Swift runtime is linked in: no libswift*.so is needed.
        #expect(!libraries.stdout.contains("libswift"), "\(libraries.stdout)")
    }

    @Test func theDebInstallsProxiesARequestAndIsRemoved() throws {
        let deb = try Self.given("ATS_PROXY_PACKAGE_DEB")
        let depends = try Self.shell("dpkg-deb -f '\(deb)' Depends")
        for package in ["libssl3", "libnghttp2-14", "zlib1g", "libc6"] {
            #expect(depends.stdout.contains(package), "Depends: \(depends.stdout)")
        }
        #expect(!depends.stdout.contains("swift"))

        let installed = try Self.shell("dpkg -i '\(deb)'", timeout: 120)
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        defer { _ = try? Self.shell("dpkg -r ats-proxy", timeout: 120) }
        try Self.expectVersionReport("/usr/bin/ats-proxy")
        #expect(FileManager.default.fileExists(atPath: "/usr/share/man/man1/ats-proxy.1"))

        // A proxied request with curl: a cleartext origin the policy allows, and a load full ATS blocks.
        let directory = try TemporaryDirectory("package-e2e")
        let origin = try Origin(name: "plain", directory: directory)
        defer { origin.stop() }
        let proxy = try ProxyProcess(
            plist: infoPlist("<key>NSExceptionDomains</key><dict>\(cleartextException("legacy.example.test"))</dict>"),
            resolve: [("legacy.example.test", origin.port)], binary: "/usr/bin/ats-proxy")
        defer { proxy.stop() }
        let allowed = try Curl.fetch("http://legacy.example.test:\(origin.port)/hello", proxy: proxy)
        #expect(allowed.httpCode == 200, "\(allowed.stderr) \(proxy.log)")
        #expect(origin.requests.contains { $0.hasPrefix("GET /hello") }, "\(origin.requests)")
        let blocked = try Curl.fetch("http://cleartext.example.test/", proxy: proxy)
        #expect(blocked.httpCode == 403)
        #expect(blocked.headers["x-ats-error"] == "-1022")
        proxy.stop()

        // doctor from the package: the CA that run created is sound (a healthy report, exit 0).
        let doctor = try CLITests.launch(
            URL(fileURLWithPath: "/usr/bin/ats-proxy"),
            [
                "doctor", "--format", "json", "--ca-dir", proxy.directory.file("ca"), "--listen",
                "127.0.0.1:\(try E2E.freePort())",
            ],
            directory: directory.path, environment: E2E.environment, timeout: 60)
        #expect(doctor.status == 0, "\(doctor.stdout)")
        let report = try JSONSerialization.jsonObject(with: Data(doctor.stdout.utf8)) as? [String: Any]
        #expect(report?["healthy"] as? Bool == true)
        let checks = (report?["findings"] as? [[String: Any]] ?? []).compactMap { $0["check"] as? String }
        #expect(checks.contains("CA key") && checks.contains("OpenSSL"), "\(checks)")

        let removed = try Self.shell("dpkg -r ats-proxy", timeout: 120)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "/usr/bin/ats-proxy"))
        #expect(!FileManager.default.fileExists(atPath: "/usr/share/man/man1/ats-proxy.1"))
    }
}
