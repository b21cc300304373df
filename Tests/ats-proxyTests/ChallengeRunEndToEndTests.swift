import ATSTLS
import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `ats-proxy run --challenge` and `exec --challenge` with real clients through the real binary, in front of a
/// real TLS origin (`api.example.test`, trusted by the proxy through `--upstream-ca`): curl, Python's `ssl` and
/// URLSession on Linux against the deliberately unacceptable servers the proxy presents, the JSON log records and
/// the exit statuses. The origin's request log proves that nothing of a challenged connection reaches it.
///
/// What the clients do, as these tests pin it down: with the proxy CA trusted and verification on, curl and Python
/// refuse every kind OpenSSL can detect (wrong-host, self-signed, untrusted-ca, expired, not-yet-valid, sha1,
/// rsa1024): a pass each. Without verification (`curl -k`, Python's CERT_NONE) they accept and get the proxy's
/// 502: a finding each. TLS 1.0 is refused by curl at OpenSSL's default security level for OpenSSL's own reasons,
/// and by `--tlsv1.2` for the version. The three kinds only Apple's stack refuses (no-san, overlong-validity,
/// static-rsa) are covered against curl and Python in ATSAppTrustTests' ChallengeEndToEndTests.
@Suite("run/exec --challenge end to end", .serialized)
struct ChallengeRunEndToEndTests {
    /// The kinds curl and Python (OpenSSL) refuse with verification on.
    static let detectable: [ChallengeKind] = [
        .wrongHost, .selfSigned, .untrustedCA, .expired, .notYetValid, .sha1Signature, .rsa1024,
    ]

    /// `--challenge` for the stack's TLS origin with `kinds`, every connection challenged unless `every` says
    /// otherwise, JSON log, `--fail-on-violations`.
    static func stack(_ kinds: [ChallengeKind], every: Int = 1, extra: [String] = []) throws -> ProxyStack {
        try ProxyStack(
            arguments: [
                "--challenge", #"api\.example\.test="# + kinds.map(\.rawValue).joined(separator: ","),
                "--challenge-every", String(every), "--log-format", "json", "--fail-on-violations",
            ] + extra)
    }

    /// Stops the proxy with SIGINT and returns its exit status, its stderr and the JSON records of its log.
    static func stop(_ stack: ProxyStack) throws -> (status: Int32, stderr: String, records: [[String: Any]]) {
        stack.proxy.child.signal(SIGINT)
        guard stack.proxy.child.wait(timeout: 20) else {
            throw E2E.Failure("the proxy did not stop: \(stack.proxy.child.stderrText)")
        }
        return (
            stack.proxy.child.process.terminationStatus, stack.proxy.child.stderrText,
            jsonRecords(fileLines(stack.proxy.logPath))
        )
    }

    /// The request records among `lines` (JSON objects with a `result`; not the `message` lines of start and stop).
    static func jsonRecords(_ lines: [String]) -> [[String: Any]] {
        lines.filter { $0.hasPrefix("{") }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["result"] != nil }
    }

    /// A record's `appTrust.challenge` and `appTrust.challengeMeaning`.
    static func challenge(_ record: [String: Any]) -> (kind: String?, meaning: String) {
        let appTrust = record["appTrust"] as? [String: Any]
        return (appTrust?["challenge"] as? String, appTrust?["challengeMeaning"] as? String ?? "")
    }

    // MARK: - curl

    /// curl trusting the proxy CA (`--cacert`, what a device with the CA installed does) refuses each kind OpenSSL
    /// detects: seven passes, one CONNECT record each, nothing forwarded, and `--fail-on-violations` exits 0.
    @Test func curlTrustingTheProxyCARefusesEveryKindItCanDetect() throws {
        let stack = try Self.stack(Self.detectable)
        for kind in Self.detectable {
            let result = try stack.curl("\(stack.api)/hello")
            #expect(result.exitCode == 60, "\(kind): \(result.stderr)")
            let message = try #require(CurlChallengeErrors.message(kind), "\(kind) is one curl detects")
            #expect(result.stderr.contains(message), "\(kind): \(result.stderr)")
        }
        let stopped = try Self.stop(stack)
        #expect(stopped.status == 0, "passes are not violations: \(stopped.stderr)")
        #expect(
            stopped.stderr.contains(
                "  challenges (--challenge): 0 forged server(s) accepted by the client (findings), 7 refused (passes)"),
            "\(stopped.stderr)")
        #expect(stopped.stderr.contains("0 ATS violations"), "\(stopped.stderr)")
        #expect(!stopped.stderr.contains("does not trust the proxy CA"), "a refused challenge is not a set-up failure")
        #expect(stopped.records.count == 7, "\(stopped.records)")
        #expect(stopped.records.map { Self.challenge($0).kind } == Self.detectable.map(\.rawValue))
        for record in stopped.records {
            let (kind, meaning) = Self.challenge(record)
            #expect(record["result"] as? String == "challenge-refused", "\(record)")
            #expect(record["method"] as? String == "CONNECT")
            #expect(record["url"] as? String == "https://api.example.test:\(stack.tlsOrigin.port)/")
            #expect(record["status"] == nil, "no response was sent: \(record)")
            if kind == ChallengeKind.wrongHost.rawValue {
                // curl checks the host name itself once OpenSSL's handshake is complete, then closes.
                #expect(
                    meaning.hasPrefix(
                        "the client completed the handshake with \(ChallengeKind.wrongHost.presents) but closed without sending a request"
                    ), "\(meaning)")
            } else {
                #expect(
                    meaning.hasPrefix("the client refused ")
                        && meaning.contains(" during the handshake (it sent the alert "), "\(kind ?? "?"): \(meaning)")
            }
            #expect(
                meaning.hasSuffix(
                    "an ATS client reports NSURLErrorDomain -1200 [3:-9802] (NSURLErrorSecureConnectionFailed, errSSLFatalAlert)"
                ), "\(meaning)")
        }
        #expect(stack.tlsOrigin.requests.isEmpty, "nothing reached the origin: \(stack.tlsOrigin.requests)")
    }

    /// curl -k accepts every certificate kind and static RSA: each request is a finding, answered 502 by the proxy
    /// (over http/1.1 although curl offered h2), never forwarded; `--fail-on-violations` exits 5.
    @Test func curlWithoutVerificationAcceptsAndTheRunExitsFive() throws {
        let kinds = ChallengeKind.all(.certificate) + [.staticRSAOnly]
        let stack = try Self.stack(kinds)
        for kind in kinds {
            let result = try stack.curl(
                "\(stack.api)/hello", ["-k", "--http2"], writeOut: "%{http_code} %{http_version}")
            #expect(result.exitCode == 0, "\(kind): \(result.stderr)")
            #expect(result.writeOut == "502 1.1", "\(kind): \(result.writeOut)")
            #expect(
                result.bodyText
                    == "ats-proxy: challenge \(kind) (--challenge): this connection presented \(kind.presents) and the client accepted it; the request was not forwarded. \(kind.acceptanceMeaning)\n",
                "\(kind): \(result.bodyText)")
            #expect(result.headers["connection"] == "close", "\(kind): \(result.headers)")
        }
        let stopped = try Self.stop(stack)
        #expect(stopped.status == 5, "\(stopped.stderr)")
        let lines = stopped.stderr.split(separator: "\n").map(String.init)
        #expect(
            lines.contains(
                "  challenges (--challenge): 10 forged server(s) accepted by the client (findings), 0 refused (passes)"),
            "\(stopped.stderr)")
        #expect(
            lines.last
                == "ats-proxy: exiting 5: the client accepted 10 forged server(s) (--challenge, --fail-on-violations)",
            "\(stopped.stderr)")
        #expect(stopped.records.map { Self.challenge($0).kind } == kinds.map(\.rawValue), "\(stopped.records)")
        for (record, kind) in zip(stopped.records, kinds) {
            #expect(record["result"] as? String == "challenge-accepted", "\(record)")
            #expect(record["method"] as? String == "GET")
            #expect(record["url"] as? String == "\(stack.api)/hello")
            #expect(record["status"] as? Int == 502)
            #expect(record["httpProtocol"] as? String == "http/1.1")
            #expect(Self.challenge(record).meaning == kind.acceptanceMeaning)
            #expect(record["serverAddress"] == nil, "no upstream: \(record)")
        }
        #expect(stack.tlsOrigin.requests.isEmpty, "nothing reached the origin: \(stack.tlsOrigin.requests)")
    }

    /// A TLS-1.0-only server: curl at OpenSSL's default security level cannot speak TLS 1.0 at all; lowered to level
    /// 0 and held to TLS 1.2 (`--tlsv1.2`) it refuses for the version (no version in common); allowed TLS 1.0 at
    /// level 0 it goes on, and that is a finding.
    @Test func aTLS10OnlyChallengeAgainstCurl() throws {
        let stack = try Self.stack([.tls10Only])
        let level0 = ["--ciphers", "DEFAULT@SECLEVEL=0"]
        let defaults = try stack.curl("\(stack.api)/hello")
        #expect(defaults.exitCode == 35, "\(defaults.stderr)")
        #expect(defaults.stderr.contains("legacy sigalg disallowed or unsupported"), "\(defaults.stderr)")
        let enforcing = try stack.curl("\(stack.api)/hello", ["--tlsv1.2"] + level0)
        #expect(enforcing.exitCode == 35, "\(enforcing.stderr)")
        #expect(enforcing.stderr.contains("tlsv1 alert protocol version"), "\(enforcing.stderr)")
        let willing = try stack.curl("\(stack.api)/hello", ["--tlsv1.0"] + level0, writeOut: "%{http_code}")
        #expect(willing.exitCode == 0 && willing.httpCode == 502, "\(willing.stderr)")

        let stopped = try Self.stop(stack)
        #expect(stopped.status == 5, "\(stopped.stderr)")
        let results = stopped.records.map { $0["result"] as? String ?? "?" }
        #expect(results == ["challenge-refused", "challenge-refused", "challenge-accepted"], "\(stopped.records)")
        let meanings = stopped.records.map { Self.challenge($0).meaning }
        #expect(
            meanings.allSatisfy { $0.contains("a handshake limited to TLS 1.0") || $0.contains("TLS 1.0 handshake") })
        // The two refusals' records may be written in either order: each connection is judged on its own loop
        // thread, when its alert arrives. One of them is the version refusal.
        #expect(
            meanings.count == 3
                && meanings.prefix(2).filter { $0.contains("(no protocol version in common)") }.count == 1,
            "\(meanings)")
        #expect(meanings.last == ChallengeKind.tls10Only.acceptanceMeaning)
        #expect(stack.tlsOrigin.requests.isEmpty, "\(stack.tlsOrigin.requests)")
    }

    /// Rotation (`--challenge-every 2`): the first, third and fifth connections get the normal leaf and reach the
    /// origin (200), the second and fourth are challenged and refused; the run exits 0.
    @Test func rotationKeepsTheOrdinaryRequestsWorking() throws {
        let stack = try Self.stack([.expired, .wrongHost], every: 2)
        var outcomes: [String] = []
        for _ in 1...5 {
            let result = try stack.curl("\(stack.api)/hello")
            outcomes.append(result.exitCode == 0 ? "\(result.httpCode) \(result.bodyText)" : "exit \(result.exitCode)")
        }
        let hello = "200 hello from tls-origin\n"
        #expect(outcomes == [hello, "exit 60", hello, "exit 60", hello], "\(outcomes)")
        let stopped = try Self.stop(stack)
        #expect(stopped.status == 0, "\(stopped.stderr)")
        let summary = stopped.records.map { "\($0["result"] as? String ?? "?") \(Self.challenge($0).kind ?? "-")" }
        #expect(
            summary == [
                "completed -", "challenge-refused expired", "completed -", "challenge-refused wrong-host",
                "completed -",
            ], "\(summary)")
        #expect(stack.tlsOrigin.requests.count == 3, "only the normal connections reached the origin")
        #expect(stopped.stderr.contains("0 forged server(s) accepted by the client (findings), 2 refused (passes)"))
    }

    // MARK: - Python

    /// Python's http.client through the proxy (CONNECT with `set_tunnel`): `verify` uses the default context with
    /// the proxy CA as its only anchor; `none` is CERT_NONE without a host name check (what `requests`'
    /// `verify=False` does). Prints `ACCEPTED status body` or `REFUSED error`.
    static let pythonClient = """
        import http.client, ssl, sys
        proxy_port, host, port, mode, cafile = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
        if mode == "none":
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(cafile=cafile)
        connection = http.client.HTTPSConnection("127.0.0.1", proxy_port, context=context, timeout=10)
        connection.set_tunnel(host, port)
        try:
            connection.request("GET", "/hello")
            response = connection.getresponse()
        except (ssl.SSLError, OSError) as error:
            print("REFUSED", error)
            sys.exit(1)
        print("ACCEPTED", response.status, response.read().decode().split(" (--challenge)")[0])
        """

    static func python(_ stack: ProxyStack, host: String, mode: String) throws -> E2E.RunResult {
        try E2E.run(
            "/usr/bin/python3",
            [
                "-c", pythonClient, String(stack.proxy.port), host, String(stack.tlsOrigin.port), mode,
                stack.proxy.caPath,
            ], timeout: 30)
    }

    /// Python verifying against the proxy CA refuses four kinds (passes); with CERT_NONE it accepts two (findings,
    /// 502). Two `--challenge` values, one per host name, each with its own kinds.
    @Test func pythonRefusesWithVerificationAndAcceptsWithout() throws {
        let stack = try ProxyStack(
            arguments: [
                "--challenge", #"verify\.example\.test=wrong-host,untrusted-ca,expired,rsa1024"#,
                "--challenge", #"noverify\.example\.test=self-signed,sha1"#, "--challenge-every", "1",
                "--log-format", "json",
            ])
        for _ in 0..<4 {
            let result = try Self.python(stack, host: "verify.example.test", mode: "verify")
            #expect(result.status == 1, "\(result.stdoutText)\(result.stderrText)")
            #expect(
                result.stdoutText.hasPrefix("REFUSED [SSL: CERTIFICATE_VERIFY_FAILED]"),
                "\(result.stdoutText)\(result.stderrText)")
        }
        for kind in [ChallengeKind.selfSigned, .sha1Signature] {
            let result = try Self.python(stack, host: "noverify.example.test", mode: "none")
            #expect(result.status == 0, "\(result.stderrText)")
            #expect(
                result.stdoutText == "ACCEPTED 502 ats-proxy: challenge \(kind)\n",
                "\(result.stdoutText)\(result.stderrText)")
        }
        let stopped = try Self.stop(stack)
        #expect(stopped.status == 0, "without --fail-on-violations findings do not change the status")
        let summary = stopped.records.map {
            "\($0["host"] as? String ?? "?") \($0["result"] as? String ?? "?") \(Self.challenge($0).kind ?? "-")"
        }
        #expect(
            summary == [
                "verify.example.test challenge-refused wrong-host",
                "verify.example.test challenge-refused untrusted-ca",
                "verify.example.test challenge-refused expired", "verify.example.test challenge-refused rsa1024",
                "noverify.example.test challenge-accepted self-signed", "noverify.example.test challenge-accepted sha1",
            ], "\(summary)")
        #expect(stopped.stderr.contains("2 forged server(s) accepted by the client (findings), 4 refused (passes)"))
    }

    /// Two requests pipelined in one write through an accepted challenge: one finding, one 502, and the
    /// connection closes (the second request is neither answered nor counted).
    @Test func pipelinedRequestsThroughAnAcceptedChallengeAreOneFinding() throws {
        let stack = try Self.stack([.expired])
        let script = """
            import socket, ssl, sys
            proxy_port, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
            raw = socket.create_connection(("127.0.0.1", proxy_port), timeout=10)
            raw.sendall(("CONNECT %s:%d HTTP/1.1\\r\\nHost: %s:%d\\r\\n\\r\\n" % (host, port, host, port)).encode())
            head = b""
            while b"\\r\\n\\r\\n" not in head:
                head += raw.recv(1)
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            tls = context.wrap_socket(raw, server_hostname=host)
            request = "GET /hello HTTP/1.1\\r\\nHost: %s:%d\\r\\n\\r\\n" % (host, port)
            tls.sendall((request + request).encode())
            received = b""
            while True:
                try:
                    chunk = tls.recv(65536)
                except (ssl.SSLError, OSError):
                    break
                if not chunk:
                    break
                received += chunk
            print("RESPONSES", received.count(b"HTTP/1.1 "), received.split(b"\\r\\n")[0].decode())
            """
        let result = try E2E.run(
            "/usr/bin/python3",
            ["-c", script, String(stack.proxy.port), "api.example.test", String(stack.tlsOrigin.port)], timeout: 30)
        #expect(
            result.stdoutText == "RESPONSES 1 HTTP/1.1 502 Bad Gateway\n", "\(result.stdoutText)\(result.stderrText)")
        let stopped = try Self.stop(stack)
        #expect(stopped.records.map { $0["result"] as? String } == ["challenge-accepted"], "\(stopped.records)")
        #expect(stopped.stderr.contains("1 forged server(s) accepted by the client (findings), 0 refused (passes)"))
        #expect(stack.tlsOrigin.requests.isEmpty)
    }
}

// MARK: - exec

extension ChallengeRunEndToEndTests {
    /// `ats-proxy exec` with a JSON log in a directory of its own; the command's stdout, exec's stderr and the log.
    static func exec(_ arguments: [String]) throws -> (
        status: Int32, stdout: String, stderr: String, records: [[String: Any]]
    ) {
        let directory = try TemporaryDirectory("challenge-exec")
        let log = directory.file("proxy.log")
        let result = try E2E.run(
            CLITests.binary.path,
            ["exec", "--ca-dir", directory.file("ca"), "--log-file", log, "--log-format", "json"] + arguments,
            timeout: 90)
        #expect(!result.timedOut, "ats-proxy exec did not finish")
        return (result.status, result.stdoutText, result.stderrText, jsonRecords(fileLines(log)))
    }

    /// curl -k under exec accepts the forged server: exec exits 5 whatever curl's own status (0).
    @Test func execWithCurlWithoutVerificationExitsFive() throws {
        let result = try Self.exec([
            "--challenge", #"forged\.example\.test=wrong-host"#, "--challenge-every", "1", "--",
            "/usr/bin/curl", "-sS", "-k", "-o", "/dev/null", "-w", "%{http_code}", "https://forged.example.test/",
        ])
        #expect(result.status == 5, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout == "502")
        // (Whether a challenged connection counts among the requests and hosts is SessionStats' business.)
        let summary = try #require(
            result.stderr.split(separator: "\n").last { $0.hasPrefix("ats-proxy: ") && $0.contains(" requests, ") },
            "\(result.stderr)")
        #expect(summary.contains(" 0 ATS violations, "), "\(summary)")
        #expect(
            summary.hasSuffix(
                ", 1 forged server(s) accepted (--challenge); exiting 5: the app's trust evaluation accepts servers it must refuse"
            ), "\(summary)")
        #expect(result.records.map { $0["result"] as? String } == ["challenge-accepted"], "\(result.records)")
        #expect(result.records.first.map { Self.challenge($0).kind } == "wrong-host")
    }

    /// curl under exec trusts the proxy CA (exec gives it the bundle) and refuses the forged server: only passes,
    /// so exec keeps the command's status (the script's 0; curl itself said 60).
    @Test func execWithATrustingCurlAndOnlyPassesKeepsTheCommandsStatus() throws {
        let script = try ExecTests.script(
            """
            curl -sS -o /dev/null https://forged.example.test/one
            echo "first=$?"
            curl -sS -o /dev/null https://forged.example.test/two
            echo "second=$?"
            """)
        let result = try Self.exec([
            "--challenge", #"forged\.example\.test=expired,untrusted-ca"#, "--challenge-every", "1", "--", script,
        ])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout == "first=60\nsecond=60\n", "\(result.stdout)\n\(result.stderr)")
        let summary = try #require(
            result.stderr.split(separator: "\n").last { $0.hasPrefix("ats-proxy: ") && $0.contains(" requests, ") },
            "\(result.stderr)")
        #expect(summary.contains(" 0 ATS violations, ") && !summary.contains("exiting"), "\(summary)")
        #expect(result.records.map { Self.challenge($0).kind } == ["expired", "untrusted-ca"], "\(result.records)")
        #expect(result.records.allSatisfy { $0["result"] as? String == "challenge-refused" })
    }

    /// URLSession on Linux, bare (default trust: the system bundle, which the trust overlay shows with the proxy CA
    /// in it): an unchallenged host loads (200 from the origin: the client trusts the proxy), the challenged one
    /// fails with a certificate error and is a pass; exec exits 0.
    @Test func urlSessionWithDefaultTrustUnderExecRefusesAChallenge() throws {
        let directory = try TemporaryDirectory("challenge-urlsession")
        let pki = try TestPKI(name: "challenge-urlsession", directory: directory)
        let origin = try Origin(
            name: "api", directory: directory, tls: try pki.leaf(["api.example.com"], file: "api"), tlsVersion: "1.2")
        let normal = "https://api.example.com:\(origin.port)/hello"
        let forged = "https://forged.example.test:\(origin.port)/hello"
        let result = try Self.exec([
            "--upstream-ca", pki.caPath, "--resolve", "api.example.com:\(origin.port):127.0.0.1",
            "--resolve", "forged.example.test:\(origin.port):127.0.0.1",
            "--challenge", #"forged\.example\.test=wrong-host,self-signed"#, "--challenge-every", "1", "--",
            ExecTrustTests.client, "--plain", normal, forged, forged,
        ])
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(result.stdout)\n\(result.stderr)")
        #expect(lines.first?.hasPrefix("\(normal) status 200 ") == true, "\(lines)")
        // FoundationNetworking reports libcurl's certificate errors as NSURLErrorUnknown (-1) with libcurl's text.
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("\(forged) error -1 ") }, "\(lines)")
        #expect(
            lines.count == 3
                && lines[1].hasSuffix(
                    "no alternative certificate subject name matches target host name 'forged.example.test'")
                && lines[2].hasSuffix("SSL certificate problem: self-signed certificate"), "\(lines)")
        #expect(result.status == 0, "\(result.stderr)")
        let summary = result.records.map { "\($0["result"] as? String ?? "?") \(Self.challenge($0).kind ?? "-")" }
        #expect(
            summary == ["completed -", "challenge-refused wrong-host", "challenge-refused self-signed"], "\(summary)")
        #expect(origin.requests.count == 1, "only the unchallenged request reached the origin: \(origin.requests)")
    }
}

// MARK: - Options and settings

extension ChallengeRunEndToEndTests {
    /// Bad values stop `run` before it listens (status 2), naming the flag and the bad part; a bad
    /// `--challenge-every` does so even without `--challenge`.
    @Test func badValuesAreUsageErrorsNamingTheFlag() throws {
        let directory = try TemporaryDirectory("challenge-options")
        let cases: [([String], String)] = [
            (["--challenge", "api=bogus"], "--challenge 'api=bogus': unknown kind 'bogus' (kinds: wrong-host, "),
            (
                ["--challenge", "(=expired"],
                "--challenge '(=expired': the host pattern '(' is not a valid regular expression"
            ),
            (
                ["--challenge", ".*", "--challenge-every", "0"],
                "--challenge-every '0': expected a whole number of at least 1"
            ),
            (["--challenge-every", "0"], "--challenge-every '0': expected a whole number of at least 1"),
            (["--af-policy", "api=pinned"], "--af-policy 'api=pinned': unknown mode 'pinned'"),
        ]
        for (arguments, message) in cases {
            let result = try CLITests.launch(
                CLITests.binary,
                ["run", "--listen", "127.0.0.1:0", "--ca-dir", directory.file("ca")] + arguments, timeout: 20)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains("listening on"), "\(arguments)")
        }
    }

    /// The settings file's keys `challenge`, `challenge-every` and `af-policy` (its pins directory relative to the
    /// working directory, as on the command line).
    @Test func theSettingsFileSetsChallengeAndAFPolicy() throws {
        let directory = try TemporaryDirectory("challenge-settings")
        let pki = try TestPKI(name: "challenge-settings", directory: directory)
        let leaf = try pki.leaf(["api.example.com"], file: "pinned")
        try FileManager.default.createDirectory(atPath: directory.file("pins"), withIntermediateDirectories: true)
        try Data(leaf.certificate.derBytes).write(to: URL(fileURLWithPath: directory.file("pins/api.cer")))
        _ = try directory.write(
            "ats-proxy.yaml",
            #"""
            challenge: ['api\.example\.com=expired,wrong-host', '.*\.cdn\.example']
            challenge-every: 3
            af-policy: 'api\.example\.com=public-key,pins=pins'
            """#)
        let table = try Invocation.settings(
            in: directory.path, environment: Invocation.environment(home: directory.path))
        #expect(table["challenge"]?.from == "file", "\(table["challenge"].debugDescription)")
        #expect(table["challenge"]?.value.contains(#"api\.example\.com=expired,wrong-host"#) == true)
        #expect(table["challenge"]?.value.contains(#".*\.cdn\.example"#) == true)
        #expect(table["challenge-every"]?.value == "3" && table["challenge-every"]?.from == "file")
        // The pins directory, like every path of a settings file, is resolved against the file's directory.
        let pins = URL(fileURLWithPath: directory.file("pins")).standardizedFileURL.path
        #expect(table["af-policy"]?.value == #"api\.example\.com=public-key,pins="# + pins)
        #expect(table["af-policy"]?.from == "file")
    }
}
