import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `--keylog` / `SSLKEYLOGFILE`: the proxy logs the secrets of the client-side and the upstream
/// handshake. Proved by comparison with the two real peers' own key logs (curl's SSLKEYLOGFILE and
/// `openssl s_server -keylogfile`) and, where packets can be captured, by tshark decrypting both legs.
@Suite(.serialized) struct KeyLogEndToEndTests {
    static let host = "keys.example.test"

    @Test func keyLogHoldsTheSecretsOfBothLegsAsThePeersLoggedThem() throws {
        let directory = try TemporaryDirectory("keylog")
        let pki = try TestPKI(name: "keylog-ca", directory: directory)
        let origin = try OpenSSLOrigin(directory: directory, leaf: try pki.leaf([Self.host], file: "keys"))
        let proxyKeys = directory.file("proxy-keys.log")
        let proxy = try ProxyProcess(
            plist: infoPlist(""), resolve: [(Self.host, origin.port)], upstreamCAs: [pki.caPath],
            arguments: ["--keylog", proxyKeys])
        #expect(proxy.child.stderrText.contains("TLS keys of both legs are being written to \(proxyKeys)"))
        var status = stat()
        #expect(stat(proxyKeys, &status) == 0)
        #expect(status.st_mode & 0o777 == 0o600, "mode \(String(status.st_mode & 0o777, radix: 8))")

        for version in ["--http1.1", "--http2"] {
            let clientKeys = directory.file("curl-keys\(version).log")
            let result = try E2E.run(
                "/usr/bin/env",
                [
                    "SSLKEYLOGFILE=\(clientKeys)", "/usr/bin/curl", "-s", "-S", "--max-time", "20", version, "-x",
                    "http://\(proxy.address)", "--cacert", proxy.caPath, "https://\(Self.host):\(origin.port)/",
                ], timeout: 30)
            #expect(result.status == 0, "curl: \(result.stderrText)")
            #expect(result.stdoutText.contains("s_server"), "\(result.stdoutText.prefix(300))")
            let proxyLines = Set(fileLines(proxyKeys))
            let clientLines = fileLines(clientKeys)
            #expect(!clientLines.isEmpty, "curl wrote no key log")
            for line in clientLines where !line.hasPrefix("#") {
                #expect(proxyLines.contains(line), "the client leg's secret is missing: \(line)")
            }
        }
        let proxyLines = Set(fileLines(proxyKeys))
        let originLines = fileLines(origin.keyLogPath).filter { !$0.hasPrefix("#") }
        #expect(originLines.count >= 4, "s_server logged \(originLines)")
        for line in originLines {
            #expect(proxyLines.contains(line), "the upstream leg's secret is missing: \(line)")
        }
        // NSS key-log lines only: LABEL, 64 hex digits of client random, the secret in hex.
        for line in proxyLines {
            let fields = line.split(separator: " ")
            #expect(fields.count == 3 && fields[1].count == 64, "\(line)")
        }
    }

    @Test func sslKeyLogFileVariableIsHonouredAndAppendedTo() throws {
        let directory = try TemporaryDirectory("keylog-env")
        let pki = try TestPKI(name: "keylog-ca", directory: directory)
        let origin = try OpenSSLOrigin(directory: directory, leaf: try pki.leaf([Self.host], file: "keys"))
        let keys = directory.file("env-keys.log")
        try Data("# earlier content\n".utf8).write(to: URL(fileURLWithPath: keys))
        let port = try E2E.freePort()
        let proxy = try Child(
            executable: "/usr/bin/env",
            arguments: [
                "SSLKEYLOGFILE=\(keys)", CLITests.binary.path, "--config",
                try directory.write("Info.plist", infoPlist("")),
                "--listen", "127.0.0.1:\(port)", "--ca-dir", directory.file("ca"), "--loops", "1",
                "--resolve", "\(Self.host):\(origin.port):127.0.0.1", "--upstream-ca", pki.caPath,
                "--log-file", directory.file("proxy.log"),
            ], directory: directory, label: "proxy")
        let started = E2E.poll(timeout: 15) { proxy.stderrText.contains("listening on") ? true : nil }
        #expect(started == true, "\(proxy.stderrText)")
        #expect(proxy.stderrText.contains("TLS keys of both legs are being written to \(keys)"))
        let result = try E2E.run(
            "/usr/bin/curl",
            [
                "-s", "-S", "--max-time", "20", "-x", "http://127.0.0.1:\(port)", "--cacert",
                directory.file("ca/ats-proxy-ca.pem"), "https://\(Self.host):\(origin.port)/",
            ], timeout: 30)
        #expect(result.status == 0, "curl: \(result.stderrText)")
        let written = fileLines(keys)
        #expect(written.first == "# earlier content", "the file was not appended to")
        let secrets = Set(written.dropFirst())
        // Two handshakes (client side and upstream), each with at least the TLS 1.3 traffic secrets.
        let randoms = Set(secrets.map { $0.split(separator: " ")[1] })
        #expect(randoms.count == 2, "\(secrets)")
        for line in fileLines(origin.keyLogPath) where !line.hasPrefix("#") { #expect(secrets.contains(line)) }
    }

    /// Capturing packets needs root or CAP_NET_RAW; on machines without them the comparison test
    /// above still proves the secrets.
    static var canCapture: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/dumpcap")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/tshark") && getuid() == 0
    }

    @Test(.enabled(if: canCapture, "needs tshark and root to capture on loopback"))
    func tsharkDecryptsBothLegsOfACapturedExchange() throws {
        let directory = try TemporaryDirectory("keylog-tshark")
        let pki = try TestPKI(name: "keylog-ca", directory: directory)
        let origin = try OpenSSLOrigin(directory: directory, leaf: try pki.leaf([Self.host], file: "keys"))
        let keys = directory.file("proxy-keys.log")
        let proxy = try ProxyProcess(
            plist: infoPlist(""), resolve: [(Self.host, origin.port)], upstreamCAs: [pki.caPath],
            arguments: ["--keylog", keys])
        let capture = directory.file("loopback.pcapng")
        let dumpcap = try Child(
            executable: "/usr/bin/dumpcap",
            // Stops by itself: children of the test runner may inherit a signal mask that blocks SIGTERM.
            arguments: [
                "-i", "lo", "-q", "-a", "duration:10", "-w", capture, "-f",
                "tcp port \(proxy.port) or tcp port \(origin.port)",
            ],
            directory: directory, label: "dumpcap")
        let capturing = E2E.poll(timeout: 15) { () -> Bool? in
            if !dumpcap.process.isRunning { return false }
            return dumpcap.stderrText.contains("Capturing on") ? true : nil
        }
        #expect(capturing == true, "dumpcap: \(dumpcap.stderrText)")
        usleep(300_000)
        let path = "/decrypt-me-\(UUID().uuidString.prefix(8))"
        let result = try E2E.run(
            "/usr/bin/curl",
            [
                "-s", "-S", "--max-time", "20", "--http1.1", "-x", "http://\(proxy.address)", "--cacert", proxy.caPath,
                "https://\(Self.host):\(origin.port)\(path)",
            ], timeout: 30)
        #expect(result.status == 0, "curl: \(result.stderrText)")
        #expect(dumpcap.wait(timeout: 30), "dumpcap did not stop after its 10 s")
        let decoded = try E2E.run(
            "/usr/bin/tshark",
            [
                "-r", capture, "-o", "tls.keylog_file:\(keys)", "-d", "tcp.port==\(origin.port),tls",
                "-d", "tcp.port==\(proxy.port),http", "-Y", "http.request", "-T", "fields", "-e", "tcp.dstport",
                "-e", "http.request.method", "-e", "http.request.uri",
            ], timeout: 60)
        #expect(decoded.status == 0, "tshark: \(decoded.stderrText)")
        let requests = decoded.stdoutText.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        // The request inside the client's tunnel (to the proxy's port) and the one the proxy sent the origin.
        #expect(requests.contains { $0 == ["\(proxy.port)", "GET", path] }, "\(decoded.stdoutText)")
        #expect(requests.contains { $0 == ["\(origin.port)", "GET", path] }, "\(decoded.stdoutText)")
        // Without the key log nothing inside TLS can be read.
        let blind = try E2E.run(
            "/usr/bin/tshark",
            [
                "-r", capture, "-d", "tcp.port==\(origin.port),tls", "-d", "tcp.port==\(proxy.port),http",
                "-Y", "http.request", "-T", "fields", "-e", "http.request.uri",
            ], timeout: 60)
        #expect(!blind.stdoutText.contains(path), "\(blind.stdoutText)")
    }
}
