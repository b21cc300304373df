import ATSTestSupport
import Foundation
import Testing

/// Tests for: headless Chromium trusting the proxy's CA the way Chromium on Linux trusts a local root (an
/// NSS database in `$HOME/.pki/nssdb`), loading an https page through the proxy without
/// `--ignore-certificate-errors`: the minted leaf (under 200 days, serverAuth only) is one Chromium accepts.
@Suite("Chromium trusts the proxy's leaves through an NSS database")
struct ChromiumTrustEndToEndTests {
    static let certutil = "/usr/bin/certutil"

    /// A HOME whose NSS database trusts `caPath` as a TLS root (empty when `caPath` is nil).
    static func home(_ directory: TemporaryDirectory, name: String, trusting caPath: String?) throws -> String {
        let home = directory.file(name)
        let database = home + "/.pki/nssdb"
        try FileManager.default.createDirectory(atPath: database, withIntermediateDirectories: true)
        let created = try E2E.run(certutil, ["-d", "sql:\(database)", "-N", "--empty-password"], timeout: 30)
        guard created.status == 0 else { throw E2E.Failure("certutil -N: \(created.stderrText)") }
        if let caPath {
            let added = try E2E.run(
                certutil, ["-d", "sql:\(database)", "-A", "-t", "C,,", "-n", "ats", "-i", caPath], timeout: 30)
            guard added.status == 0 else { throw E2E.Failure("certutil -A: \(added.stderrText)") }
        }
        return home
    }

    /// Chromium's DOM of `url` loaded through `proxy` (as an HTTP proxy, a SOCKS5 one with `scheme` "socks5", or
    /// an HTTPS one with "https", reached as `proxyHost`), with `home` as HOME.
    static func dumpDOM(
        _ chromium: String, url: String, proxy: ProxyProcess, home: String, directory: TemporaryDirectory,
        scheme: String = "http", proxyHost: String = "127.0.0.1", extra: [String] = []
    ) throws -> String {
        let child = try Child(
            executable: chromium,
            arguments: [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--user-data-dir=\(home)/profile", "--proxy-server=\(scheme)://\(proxyHost):\(proxy.port)",
                "--proxy-bypass-list=<-loopback>",
            ] + extra + ["--dump-dom", url], directory: directory, label: "chromium", environment: ["HOME": home])
        defer { child.stop() }
        guard child.wait(timeout: 90) else { throw E2E.Failure("chromium did not finish: \(child.stderrText)") }
        return child.stdoutText
    }

    @Test(.timeLimit(.minutes(4))) func chromiumLoadsHTTPSThroughTheProxyWithTheCATrustedInNSS() throws {
        let chromium = try #require(
            LiveViewEndToEndTests.chromium, "chromium is not installed; run scripts/bootstrap test")
        try #require(
            FileManager.default.isExecutableFile(atPath: Self.certutil),
            "certutil is not installed (libnss3-tools); run scripts/bootstrap test")
        let directory = try TemporaryDirectory("chromium-nss")
        let pki = try TestPKI(name: "web-origin", directory: directory)
        let origin = try Origin(
            name: "web", directory: directory, tls: try pki.leaf(["www.ats.test"], file: "web-origin"))
        defer { origin.child.stop() }
        let proxy = try ProxyProcess(
            plist: infoPlist(""), resolve: [("www.ats.test", origin.port)], upstreamCAs: [pki.caPath])
        defer { proxy.stop() }
        let url = "https://www.ats.test:\(origin.port)/hello"

        let trusted = try Self.home(directory, name: "trusting", trusting: proxy.caPath)
        let page = try Self.dumpDOM(chromium, url: url, proxy: proxy, home: trusted, directory: directory)
        #expect(page.contains("hello from web"), "\(page.prefix(2000))")
        #expect(origin.requests.contains { $0.contains("GET /hello") })

        // The control: the same load with an empty NSS database shows Chromium's certificate error instead.
        let before = origin.requests.count
        let untrusted = try Self.home(directory, name: "empty", trusting: nil)
        let refused = try Self.dumpDOM(chromium, url: url, proxy: proxy, home: untrusted, directory: directory)
        #expect(!refused.contains("hello from web"), "\(refused.prefix(2000))")
        #expect(origin.requests.count == before)
    }
}
