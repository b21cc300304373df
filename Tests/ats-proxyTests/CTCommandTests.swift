import ATSTLS
import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Tests for: `ats-proxy ct update` and `ct status`, the cached list in runs, and `ca show`'s expiry warning.
@Suite("ct update, ct status and the cached CT log list")
struct CTCommandTests {
    static let logs = [
        TestCTLog(name: "argon", operatorName: "Google"),
        TestCTLog(name: "sabre", operatorName: "Sectigo", kind: .staticCTAPI),
        TestCTLog(name: "nimbus", operatorName: "Cloudflare"),
    ]

    static func ats(_ arguments: [String]) throws -> E2E.RunResult {
        try E2E.run(CLITests.binary.path, arguments, timeout: 120)
    }

    @Test func updateFromAFileThenStatusThenARefusedListKeepsTheCache() throws {
        let directory = try TemporaryDirectory("ct-from")
        let caDir = directory.file("ca")
        let list = directory.file("list.json")
        try TestCTLog.appleList(Self.logs).write(to: URL(fileURLWithPath: list))

        let before = try Self.ats(["ct", "status", "--ca-dir", caDir])
        #expect(before.status == 1)
        #expect(before.stdoutText.contains("CT not evaluated: run `ats-proxy ct update`"), "\(before.stdoutText)")

        let update = try Self.ats(["ct", "update", "--from", list, "--ca-dir", caDir])
        #expect(update.status == 0, "\(update.stderrText)")
        #expect(update.stdoutText.contains("3 logs from 3 operators"), "\(update.stdoutText)")

        let status = try Self.ats(["ct", "status", "--ca-dir", caDir])
        #expect(status.status == 0, "\(status.stdoutText)")
        #expect(status.stdoutText.contains("Logs: 3 (1 static-ct-api)"), "\(status.stdoutText)")
        #expect(status.stdoutText.contains("Operators: 3"))
        #expect(status.stdoutText.contains("Sectigo: 1 usable"))
        #expect(status.stdoutText.contains("(0 days ago) from \(list)"))

        let broken = try directory.write("broken.json", #"{"operators": [{"name": "X", "logs": [{"key": "AAAA"}]}]}"#)
        let refused = try Self.ats(["ct", "update", "--from", broken, "--ca-dir", caDir])
        #expect(refused.status == 1)
        #expect(refused.stderrText.contains("not a usable CT log list"), "\(refused.stderrText)")
        #expect(refused.stderrText.contains("the cached list was kept"))
        let after = try Self.ats(["ct", "status", "--ca-dir", caDir])
        #expect(after.status == 0)
        #expect(after.stdoutText.contains("Logs: 3"), "\(after.stdoutText)")
    }

    @Test func aListOlderThanTheLimitCountsAsNone() throws {
        let directory = try TemporaryDirectory("ct-stale")
        let cache = CTLogListCache(directory: directory.file("ca"))
        try cache.install(TestCTLog.appleList(Self.logs), source: "test", now: Date(timeIntervalSinceNow: -90 * 86400))
        let status = try Self.ats(["ct", "status", "--ca-dir", cache.directory])
        #expect(status.status == 1)
        #expect(status.stdoutText.contains("too old (more than 60 days)"), "\(status.stdoutText)")
        let relaxed = try Self.ats(["ct", "status", "--ca-dir", cache.directory, "--ct-max-age", "120"])
        #expect(relaxed.status == 0, "\(relaxed.stdoutText)")
    }

    /// A TLS origin for `ct.test` (minted by the test's CA) serving `list.json` and friends.
    static func listServer(_ directory: TemporaryDirectory) throws -> (Origin, TestPKI, files: String) {
        let pki = try TestPKI(name: "ct-origin", directory: directory)
        let leaf = try pki.leaf(["ct.test"], file: "ct-origin")
        let files = directory.file("files")
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        try TestCTLog.appleList(Self.logs).write(to: URL(fileURLWithPath: files + "/list.json"))
        try Data("{\"operators\": []}".utf8).write(to: URL(fileURLWithPath: files + "/empty.json"))
        let origin = try Origin(name: "ct-origin", directory: directory, tls: leaf, files: files)
        return (origin, pki, files)
    }

    @Test func updateDownloadsOverVerifiedHTTPSFromALocalServer() throws {
        let directory = try TemporaryDirectory("ct-url")
        let (origin, pki, _) = try Self.listServer(directory)
        defer { origin.child.stop() }
        let caDir = directory.file("ca")
        let resolve = ["--resolve", "ct.test:\(origin.port):127.0.0.1"]
        let url = "https://ct.test:\(origin.port)/files/list.json"

        // Without the test's CA the server is not trusted: nothing is cached.
        let untrusted = try Self.ats(["ct", "update", "--url", url, "--ca-dir", caDir] + resolve)
        #expect(untrusted.status == 1)
        #expect(untrusted.stderrText.contains("not trusted"), "\(untrusted.stderrText)")
        #expect(!FileManager.default.fileExists(atPath: caDir + "/" + CTLogListCache.listFileName))

        let update = try Self.ats(
            ["ct", "update", "--url", url, "--upstream-ca", pki.caPath, "--ca-dir", caDir] + resolve)
        #expect(update.status == 0, "\(update.stderrText)")
        #expect(update.stdoutText.contains("Installed Apple's CT log list from \(url)"), "\(update.stdoutText)")
        #expect(origin.requests.contains { $0.contains("GET /files/list.json") }, "\(origin.requests)")
        let status = try Self.ats(["ct", "status", "--ca-dir", caDir])
        #expect(status.stdoutText.contains("from \(url)"), "\(status.stdoutText)")

        // A list the server answers with that does not validate, and a 404: refused, the cache kept.
        for (path, message) in [("empty.json", "`operators` is empty"), ("missing.json", "answered 404")] {
            let refused = try Self.ats(
                [
                    "ct", "update", "--url", "https://ct.test:\(origin.port)/files/\(path)", "--upstream-ca",
                    pki.caPath, "--ca-dir", caDir,
                ] + resolve)
            #expect(refused.status == 1)
            #expect(refused.stderrText.contains(message), "\(refused.stderrText)")
        }
        let kept = try Self.ats(["ct", "status", "--ca-dir", caDir])
        #expect(kept.status == 0)
        #expect(kept.stdoutText.contains("from \(url)"), "\(kept.stdoutText)")
    }

    @Test func diagnoseUsesTheCachedListAndSaysWhenThereIsNone() throws {
        let directory = try TemporaryDirectory("ct-diagnose")
        let (origin, pki, _) = try Self.listServer(directory)
        defer { origin.child.stop() }
        let caDir = directory.file("ca")
        let arguments = [
            "diagnose", "--resolve", "ct.test:\(origin.port):127.0.0.1", "--upstream-ca", pki.caPath, "--ca-dir",
            caDir, "https://ct.test:\(origin.port)/hello",
        ]
        let without = try Self.ats(arguments)
        #expect(without.stdoutText.contains("CT not evaluated: run `ats-proxy ct update` (no CT log list cached)"))
        let list = directory.file("list.json")
        try TestCTLog.appleList(Self.logs).write(to: URL(fileURLWithPath: list))
        #expect(try Self.ats(["ct", "update", "--from", list, "--ca-dir", caDir]).status == 0)
        let with = try Self.ats(arguments)
        #expect(with.stdoutText.contains("CT: Apple's log list of"), "\(with.stdoutText)")
        #expect(with.stdoutText.contains("(3 logs, 3 operators, 0 days old)"))
    }

    @Test func runBannerSaysCTIsNotEvaluatedWithoutAList() throws {
        let proxy = try ProxyProcess(plist: infoPlist(""), logToFile: false)
        defer { proxy.stop() }
        let banner = proxy.waitForLog("CA certificate")
        #expect(banner.contains("CT not evaluated: run `ats-proxy ct update` (no CT log list cached)"), "\(banner)")
    }

    @Test func caShowWarnsWhenTheCAIsNearItsEndAndNeverReadsTheKey() throws {
        let directory = try TemporaryDirectory("ca-expiry")
        let caDir = directory.file("ca")
        try FileManager.default.createDirectory(atPath: caDir, withIntermediateDirectories: true)
        let key = try PrivateKey.generate(.p256)
        var spec = CertificateSpec(
            notBefore: Date(timeIntervalSinceNow: -86400), notAfter: Date(timeIntervalSinceNow: 10 * 86400 - 600))
        spec.commonName = "ats-proxy CA (ten days)"
        spec.isCA = true
        spec.keyUsage = ["keyCertSign", "cRLSign"]
        spec.extendedKeyUsage = nil
        let certificate = try CertificateMinter.mint(spec, subjectKey: key, issuer: nil, issuerKey: key)
        try Data(try certificate.pemBytes()).write(
            to: URL(fileURLWithPath: caDir + "/" + CertificateAuthority.certificateFileName))
        let keyPath = caDir + "/" + CertificateAuthority.keyFileName
        try Data(try key.pemBytes()).write(to: URL(fileURLWithPath: keyPath))
        // A key nobody may read (root reads anyway, so also one that is not a key at all): `show` must not care.
        try Data("not a key".utf8).write(to: URL(fileURLWithPath: keyPath))
        chmod(keyPath, 0o000)
        let shown = try Self.ats(["ca", "show", "--ca-dir", caDir])
        #expect(shown.status == 0, "\(shown.stderrText)")
        #expect(shown.stdoutText.contains("ten days"))
        #expect(shown.stderrText.contains("warning: the CA expires in 9 days"), "\(shown.stderrText)")
    }
}
