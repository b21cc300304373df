import ATSDiagnose
import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSAppTrust
@testable import ATSTLS

/// Tests for: real clients (curl, Python's `ssl`, and the project's own ATS judge) against a loopback
/// server that serves each challenge kind through `ChallengeTLSContexts`.
///
/// What the OpenSSL-based clients on this Debian do, as these tests pin it down:
/// - with the proxy CA trusted and verification on, they refuse every kind except three, which test
///   rules only Apple enforces: `no-san` (curl and Python fall back to the CN when a certificate has no
///   SAN), `overlong-validity` (OpenSSL has no validity cap) and `static-rsa` (OpenSSL's default suites,
///   which Debian's Python uses too, include RSA key exchange). The project's ATS judge refuses all twelve;
/// - without verification they accept every certificate kind (SHA-1 and RSA-1024 included);
/// - at OpenSSL's default security level (2) neither curl nor Python can speak TLS 1.0 or 1.1 at all
///   ("legacy sigalg disallowed or unsupported"), with or without verification; curl does at level 0.
@Suite("Challenge mode end to end", .serialized)
struct ChallengeEndToEndTests {
    static let host = "api.challenge.test"
    static let authority = try! CertificateAuthority.generate(hostName: "challenge-e2e")
    /// HTTP/1.1 only: the test server answers in HTTP/1.1 text.
    static let alpn = ServerTLSContext.preferring(["http/1.1"])
    static let contexts = try! ChallengeTLSContexts(
        certificates: try! ChallengeCertificates(authority: authority), alpn: alpn)
    static let normal = try! ServerTLSContext(leaves: try! LeafCertificateCache(authority: authority), alpn: alpn)

    /// What a client did, from both ends.
    struct Run {
        let client: ChallengeClientRun.Result
        let outcomes: [ChallengeOutcome]
        let normalRequests: Int
    }

    /// Serves one connection with `assignment` and runs `client` (given the port and the proxy CA's
    /// PEM path) against it.
    static func exercise(
        _ assignment: ChallengeAssignment, client: (UInt16, String) throws -> ChallengeClientRun.Result
    ) throws -> Run {
        let directory = try TemporaryDirectory("challenge-e2e")
        let caPath = directory.file("proxy-ca.pem")
        try Data(try authority.certificate.pemBytes()).write(to: URL(fileURLWithPath: caPath))
        let server = try ChallengeTestServer(assignment, host: host, contexts: contexts, normal: normal)
        defer { server.stop() }
        let result = try client(server.port, caPath)
        #expect(server.waitForConnections(1), "the server never finished the connection: \(result)")
        return Run(client: result, outcomes: server.outcomes, normalRequests: server.normalRequests)
    }

    static func curl(_ port: UInt16, _ options: [String]) throws -> ChallengeClientRun.Result {
        try ChallengeClientRun.run(
            "/usr/bin/curl",
            [
                "-sS", "--noproxy", "*", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
                "--resolve", "\(host):\(port):127.0.0.1",
            ] + options + ["https://\(host):\(port)/"])
    }

    /// Python's `ssl` connecting to the server: `verify` (the default context with the proxy CA),
    /// `verify-san-only` (the same without the CN fallback, like iOS 13+) or `none` (CERT_NONE, what
    /// `requests`' `verify=False` does). Prints ACCEPTED with the status line, or REFUSED with the error.
    static let pythonClient = """
        import socket, ssl, sys
        host, port, mode, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
        if mode == "none":
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(cafile=cafile)
            context.hostname_checks_common_name = mode != "verify-san-only"
        try:
            tls = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname=host)
        except (ssl.SSLError, OSError) as error:
            print("REFUSED", error)
            sys.exit(1)
        tls.sendall(("GET / HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" % host).encode())
        print("ACCEPTED", tls.version(), tls.recv(200).split(b"\\r\\n")[0].decode())
        """

    static func python(_ port: UInt16, _ caPath: String, mode: String) throws -> ChallengeClientRun.Result {
        try ChallengeClientRun.run("/usr/bin/python3", ["-c", pythonClient, host, String(port), mode, caPath])
    }

    /// Asserts that the client refused the challenge and the server recorded a pass.
    static func expectRefused(_ run: Run, _ kind: ChallengeKind, saying text: String? = nil) {
        #expect(run.client.status != 0, "\(kind): \(run.client)")
        if let text {
            #expect(run.client.stderr.contains(text) || run.client.stdout.contains(text), "\(kind): \(run.client)")
        }
        #expect(
            run.outcomes.count == 1 && run.outcomes.allSatisfy { $0.kind == kind && !$0.isFinding },
            "\(kind): \(run.outcomes)")
    }

    /// Asserts that the client sent a request through the challenge and the server recorded a finding.
    static func expectAccepted(_ run: Run, _ kind: ChallengeKind, response: String) {
        #expect(run.client.status == 0, "\(kind): \(run.client)")
        #expect(run.client.stdout.contains(response), "\(kind): \(run.client)")
        #expect(run.outcomes.map(\.result) == [.sentRequest], "\(kind): \(run.outcomes)")
        #expect(run.outcomes.first?.meaning == kind.acceptanceMeaning)
    }

    // MARK: - curl

    // curl trusting the proxy CA (what `--cacert` with the onboarding certificate gives), no `-k`: its message for
    // each kind is `CurlChallengeErrors`'.

    @Test func curlTrustingTheProxyCAAcceptsANormalLeaf() throws {
        let run = try Self.exercise(.normal) { port, ca in try Self.curl(port, ["--cacert", ca]) }
        #expect(run.client.status == 0 && run.client.stdout == "200", "\(run.client)")
        #expect(run.normalRequests == 1)
        #expect(run.outcomes.isEmpty)
    }

    @Test(arguments: ChallengeKind.allCases)
    func curlTrustingTheProxyCA(_ kind: ChallengeKind) throws {
        let run = try Self.exercise(.challenge(kind)) { port, ca in try Self.curl(port, ["--cacert", ca]) }
        if let message = CurlChallengeErrors.message(kind) {
            Self.expectRefused(run, kind, saying: message)
            #expect(run.client.status == (kind.category == .certificate ? 60 : 35), "\(run.client)")
        } else {
            // Rules OpenSSL does not have: CN fallback without SAN, no validity cap, RSA key exchange
            // in its default suites. Apple's evaluation refuses them (see the ATS judge test).
            Self.expectAccepted(run, kind, response: "502")
        }
    }

    @Test(arguments: ChallengeKind.all(.certificate))
    func curlWithoutVerificationAcceptsEveryCertificateKind(_ kind: ChallengeKind) throws {
        let run = try Self.exercise(.challenge(kind)) { port, _ in try Self.curl(port, ["-k"]) }
        Self.expectAccepted(run, kind, response: "502")
    }

    @Test func curlWithoutVerificationAcceptsStaticRSA() throws {
        let run = try Self.exercise(.challenge(.staticRSAOnly)) { port, _ in try Self.curl(port, ["-k"]) }
        Self.expectAccepted(run, .staticRSAOnly, response: "502")
    }

    /// At OpenSSL's default security level curl has no TLS 1.0/1.1 at all, even with `-k` and the
    /// version allowed: the refusal comes from the client's own library.
    @Test(arguments: [ChallengeKind.tls10Only, .tls11Only])
    func curlAtTheDefaultSecurityLevelCannotSpeakTheOldVersions(_ kind: ChallengeKind) throws {
        let run = try Self.exercise(.challenge(kind)) { port, _ in try Self.curl(port, ["-k", "--tlsv1.0"]) }
        Self.expectRefused(run, kind, saying: "legacy sigalg disallowed or unsupported")
        #expect(run.client.status == 35)
    }

    /// Lowered to level 0, curl speaks TLS 1.0/1.1 and the challenge is a finding: the test can fail.
    @Test(arguments: [ChallengeKind.tls10Only, .tls11Only])
    func curlAtLevelZeroAcceptsTheOldVersions(_ kind: ChallengeKind) throws {
        let run = try Self.exercise(.challenge(kind)) { port, ca in
            try Self.curl(port, ["--cacert", ca, "--tlsv1.0", "--ciphers", "DEFAULT@SECLEVEL=0"])
        }
        Self.expectAccepted(run, kind, response: "502")
    }

    /// The brief's case: a client that enforces TLS 1.2 refuses a TLS-1.0-only (or 1.1-only) server, here
    /// at level 0 so that the version floor alone refuses it; the server sees no version in common.
    @Test(arguments: [ChallengeKind.tls10Only, .tls11Only])
    func curlEnforcingTLS12RefusesTheOldVersions(_ kind: ChallengeKind) throws {
        let run = try Self.exercise(.challenge(kind)) { port, ca in
            try Self.curl(port, ["--cacert", ca, "--tlsv1.2", "--ciphers", "DEFAULT@SECLEVEL=0"])
        }
        Self.expectRefused(run, kind, saying: "tlsv1 alert protocol version")
        #expect(run.outcomes.first?.result == .refusedHandshake(.noCommonVersion), "\(run.outcomes)")
    }

    /// curl limited to ATS's forward-secret suites finds nothing in common with static RSA.
    @Test func curlWithTheATSSuitesRefusesStaticRSA() throws {
        let suites =
            "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256:"
            + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
        let run = try Self.exercise(.challenge(.staticRSAOnly)) { port, ca in
            try Self.curl(port, ["--cacert", ca, "--ciphers", suites])
        }
        Self.expectRefused(run, .staticRSAOnly, saying: "handshake failure")
        #expect(run.outcomes.first?.result == .refusedHandshake(.noCommonCipher), "\(run.outcomes)")
    }

    /// Rotation with a real client: connections alternate between the normal leaf (200 through curl
    /// trusting the proxy CA) and the next kind, which curl refuses; every refusal is a pass.
    @Test func rotationKeepsEveryOtherConnectionWorking() throws {
        let directory = try TemporaryDirectory("challenge-rotation")
        let caPath = directory.file("proxy-ca.pem")
        try Data(try Self.authority.certificate.pemBytes()).write(to: URL(fileURLWithPath: caPath))
        let rotation = ChallengeRotation(specs: [
            try ChallengeSpec(parsing: #"api\.challenge\.test=expired,wrong-host,tls1.0"#)
        ])
        let server = try ChallengeTestServer(host: Self.host, contexts: Self.contexts, normal: Self.normal) {
            rotation.assign(host: Self.host)
        }
        defer { server.stop() }
        var codes: [String] = []
        for connection in 1...6 {
            let result = try Self.curl(server.port, ["--cacert", caPath])
            codes.append(result.status == 0 ? result.stdout : "exit \(result.status)")
            #expect(server.waitForConnections(connection))
        }
        #expect(codes == ["200", "exit 60", "200", "exit 60", "200", "exit 35"])
        #expect(server.normalRequests == 3)
        #expect(server.outcomes.map(\.kind) == [.expired, .wrongHost, .tls10Only])
        #expect(server.outcomes.allSatisfy { !$0.isFinding })
        #expect(rotation.connectionCount(host: Self.host) == 6)
    }

    // MARK: - Python

    @Test func pythonVerifyingAcceptsANormalLeaf() throws {
        let run = try Self.exercise(.normal) { port, ca in try Self.python(port, ca, mode: "verify") }
        #expect(
            run.client.status == 0 && run.client.stdout.contains("ACCEPTED TLSv1.3 HTTP/1.1 200 OK"), "\(run.client)")
        #expect(run.normalRequests == 1)
    }

    @Test(arguments: ChallengeKind.allCases)
    func pythonVerifying(_ kind: ChallengeKind) throws {
        let run = try Self.exercise(.challenge(kind)) { port, ca in try Self.python(port, ca, mode: "verify") }
        switch kind {
        case .noSAN, .overlongValidity:
            Self.expectAccepted(run, kind, response: "ACCEPTED TLSv1.3 HTTP/1.1 502 Bad Gateway")
        case .staticRSAOnly:
            Self.expectAccepted(run, kind, response: "ACCEPTED TLSv1.2 HTTP/1.1 502 Bad Gateway")
        case .tls10Only, .tls11Only:
            Self.expectRefused(run, kind, saying: "legacy sigalg disallowed or unsupported")
        case .wrongHost, .selfSigned, .untrustedCA, .expired, .notYetValid, .sha1Signature, .rsa1024:
            Self.expectRefused(run, kind, saying: "CERTIFICATE_VERIFY_FAILED")
        }
    }

    /// Without the CN fallback (Apple's rule since iOS 13) Python refuses the SAN-less leaf too.
    @Test func pythonCheckingSANOnlyRefusesNoSAN() throws {
        let run = try Self.exercise(.challenge(.noSAN)) { port, ca in try Self.python(port, ca, mode: "verify-san-only")
        }
        Self.expectRefused(run, .noSAN, saying: "Hostname mismatch")
    }

    @Test(arguments: ChallengeKind.allCases)
    func pythonWithoutVerification(_ kind: ChallengeKind) throws {
        let run = try Self.exercise(.challenge(kind)) { port, ca in try Self.python(port, ca, mode: "none") }
        switch kind {
        case .tls10Only, .tls11Only:
            // Debian's Python sets no version floor, but at OpenSSL's default level it cannot speak them.
            Self.expectRefused(run, kind, saying: "legacy sigalg disallowed or unsupported")
        case .wrongHost, .selfSigned, .untrustedCA, .expired, .notYetValid, .sha1Signature, .rsa1024, .noSAN,
            .overlongValidity, .staticRSAOnly:
            Self.expectAccepted(run, kind, response: "HTTP/1.1 502 Bad Gateway")
        }
    }

    // MARK: - The project's ATS judge

    static func judge(_ kind: ChallengeKind?, policy: PolicyContext) throws -> UpstreamVerdict {
        let context = kind.map { Self.contexts.context(for: $0) } ?? Self.normal.context
        let server = try TestServer(.tls(context))
        defer { server.stop() }
        let trust = try TrustStore(systemRoots: false, extraAnchors: [Self.authority.certificate])
        let checker = UpstreamChecker(client: UpstreamTLSClient(trust: trust))
        let target = RequestTarget(scheme: .https, host: TestPKI.host, port: Int(server.port))
        return checker.check(target, policy: policy, transport: server.transport)
    }

    @Test func theATSJudgeAcceptsTheNormalLeaf() throws {
        #expect(Expectation.of(try Self.judge(nil, policy: Policies.standard)) == .allowed)
    }

    /// The ATS client refuses every kind with the error `ChallengeKind.atsRefusal` names.
    @Test(arguments: ChallengeKind.allCases)
    func theATSJudgeRefusesEveryKindWithItsError(_ kind: ChallengeKind) throws {
        let verdict = try Self.judge(kind, policy: Policies.standard)
        #expect(
            Expectation.of(verdict) == .blocked(kind.atsRefusal.code, kind.atsRefusal.streamCode), "\(verdict.rule)")
    }

    /// Outside ATS, default trust still refuses the certificate kinds with `defaultTrustRefusal`, and
    /// the handshake kinds go through.
    @Test(arguments: ChallengeKind.allCases)
    func withArbitraryLoadsDefaultTrustStillRefusesTheCertificateKinds(_ kind: ChallengeKind) throws {
        let verdict = try Self.judge(kind, policy: Policies.arbitraryLoads)
        if let refusal = kind.defaultTrustRefusal {
            #expect(Expectation.of(verdict) == .blocked(refusal.code, refusal.streamCode), "\(verdict.rule)")
        } else {
            #expect(Expectation.of(verdict) == .allowed, "\(verdict.rule)")
        }
    }
}
