import ATSDiagnose
import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSTLS

/// Tests for: NSPinnedDomains and Certificate Transparency against loopback servers.
@Suite("NSPinnedDomains and Certificate Transparency against loopback servers")
struct PinningAndCTTests {
    static let leafCertificate = TestPKI.leaf(TestPKI.leafSpec())

    static func compliantServer() throws -> TestServer {
        try TestServer(.tls(TestPKI.serverContext(leaf: leafCertificate)))
    }

    @Test func pinnedLeafMatchAllows() throws {
        let server = try Self.compliantServer()
        defer { server.stop() }
        let verdict = check(server, Policies.pinned(leaf: [Self.leafCertificate.spkiSHA256]))
        #expect(verdict.outcome == .allowed, "\(verdict.rule)")
    }

    @Test func pinnedLeafMismatchIsATSTrustFailure() throws {
        let server = try Self.compliantServer()
        defer { server.stop() }
        let verdict = check(server, Policies.pinned(leaf: [Data(repeating: 7, count: 32)]))
        #expect(Expectation.of(verdict) == .blocked(.secureConnectionFailed, -9802))
        #expect(verdict.trustEvaluation == .ats)
        #expect(verdict.rule.contains("NSPinnedLeafIdentities"))
        #expect(verdict.fix?.contains(Self.leafCertificate.spkiSHA256.base64EncodedString()) == true)
    }

    @Test func pinnedCAMatchAllows() throws {
        let server = try Self.compliantServer()
        defer { server.stop() }
        #expect(check(server, Policies.pinned(ca: [TestPKI.intermediate.spkiSHA256])).outcome == .allowed)
        #expect(check(server, Policies.pinned(ca: [TestPKI.root.spkiSHA256])).outcome == .allowed)
    }

    @Test func pinnedCAMismatchIsATSTrustFailure() throws {
        let server = try Self.compliantServer()
        defer { server.stop() }
        let verdict = check(server, Policies.pinned(ca: [TestPKI.otherRoot.spkiSHA256]))
        #expect(Expectation.of(verdict) == .blocked(.secureConnectionFailed, -9802))
        #expect(verdict.rule.contains("NSPinnedCAIdentities"))
    }

    static let logs = [TestCTLog(name: "log-a"), TestCTLog(name: "log-b"), TestCTLog(name: "log-c")]

    /// NSRequiresCertificateTransparency on the host's entry, honoured (`--requires-ct always`).
    static let ctRequired = Policies.make(
        { configuration in
            var entry = ExceptionDomain(key: TestPKI.host)
            entry.requiresCertificateTransparency = true
            configuration.exceptionDomains[TestPKI.host] = entry
        }, options: { $0.requiresCTKey = .always })

    @Test func embeddedSCTsFromKnownLogsSatisfyCT() throws {
        let leaf = TestCTLog.embedding(
            Self.logs, in: TestPKI.leaf(TestPKI.leafSpec()), issuer: TestPKI.intermediate,
            issuerKey: TestPKI.intermediateKey)
        let server = try TestServer(.tls(TestPKI.serverContext(leaf: leaf)))
        defer { server.stop() }
        let store = try CTLogStore(logs: Self.logs.map(\.log))
        #expect(store.logCount == 3)
        let verdict = check(server, Self.ctRequired, ctLogs: store)
        #expect(verdict.outcome == .allowed, "\(verdict.rule)")
        #expect(verdict.summary?.scts.count == 3)
        #expect(verdict.summary?.scts.allSatisfy { $0.status == .valid && $0.source == .embedded } == true)
    }

    @Test func missingSCTsFailWhenCTIsRequired() throws {
        let server = try Self.compliantServer()
        defer { server.stop() }
        let store = try CTLogStore(logs: Self.logs.map(\.log))
        let verdict = check(server, Self.ctRequired, ctLogs: store)
        #expect(Expectation.of(verdict) == .blocked(.secureConnectionFailed, -9802))
        #expect(verdict.rule.contains("Certificate Transparency"))
        // Without the key being honoured (modern iOS), the same server passes.
        #expect(check(server, Policies.standard, ctLogs: store).outcome == .allowed)
    }

    @Test func sctsFromUnknownLogsDoNotCount() throws {
        let leaf = TestCTLog.embedding(
            Self.logs, in: TestPKI.leaf(TestPKI.leafSpec()), issuer: TestPKI.intermediate,
            issuerKey: TestPKI.intermediateKey)
        let server = try TestServer(.tls(TestPKI.serverContext(leaf: leaf)))
        defer { server.stop() }
        let store = try CTLogStore(logs: [TestCTLog(name: "unrelated").log])
        let verdict = check(server, Self.ctRequired, ctLogs: store)
        #expect(verdict.isBlocked)
        #expect(verdict.summary?.scts.allSatisfy { $0.status == .unknownLog } == true)
    }

    @Test func logListFileFormat() {
        let text = CTLogStore.fileContents([CTLog(name: "one", publicKeyDER: [1, 2, 3])])
        #expect(text == "enabled_logs = log0\n\n[log0]\ndescription = one\nkey = AQID\n")
    }
}

/// Tests for: Bad input: never a crash or a hang, always a verdict with the right code.
@Suite("Bad input: never a crash or a hang, always a verdict with the right code")
struct BadInputTests {
    @Test func plainHTTPServerIsNoTLS() throws {
        let server = try TestServer(.reply(Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8)))
        defer { server.stop() }
        let verdict = check(server, Policies.standard)
        #expect(Expectation.of(verdict) == .blocked(.secureConnectionFailed, -9800), "\(verdict.rule)")
    }

    @Test func garbageIsNoTLS() throws {
        let server = try TestServer(.reply((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }))
        defer { server.stop() }
        let verdict = check(server, Policies.standard)
        #expect(verdict.isBlocked)
        #expect(verdict.error == .secureConnectionFailed)
    }

    @Test func closeDuringHandshakeIsClosedWithoutNotify() throws {
        let server = try TestServer(.closeImmediately)
        defer { server.stop() }
        let verdict = check(server, Policies.standard)
        // EOF gives -9816; if the close turns into a TCP reset first, -9806 (both in reference §4.3).
        #expect(verdict.error == .secureConnectionFailed, "\(verdict.rule)")
        #expect([-9816, -9806].contains(verdict.streamCode ?? 0))
    }

    @Test func stallingServerTimesOut() throws {
        let server = try TestServer(.silent)
        defer { server.stop() }
        let checker = UpstreamChecker(client: TestPKI.client())
        let start = Date()
        let verdict = checker.attempt(
            requirements: Policies.standard.decide(try RequestTarget(parsing: "https://ats.test/")).requirements,
            host: TestPKI.host, url: "https://ats.test/", transport: LoopbackTransport(port: server.port, timeout: 0.3))
        #expect(Date().timeIntervalSince(start) < 2)
        #expect(verdict.error == .timedOut)
        #expect(verdict.streamPair == "[1:60]")
    }

    @Test func refusedConnection() throws {
        let checker = UpstreamChecker(client: TestPKI.client())
        let target = RequestTarget(scheme: .https, host: TestPKI.host)
        let verdict = checker.check(target, policy: Policies.standard, transport: LoopbackTransport(port: unusedPort()))
        #expect(verdict.error == .cannotConnectToHost)
        #expect(verdict.streamPair == "[1:61]")
    }

    @Test func unresolvableName() {
        let checker = UpstreamChecker(client: TestPKI.client())
        let target = RequestTarget(scheme: .https, host: "nowhere.invalid")
        let verdict = checker.check(target, policy: Policies.standard, transport: UnresolvableTransport())
        #expect(verdict.error == .cannotFindHost)
        #expect(verdict.streamPair == "[12:8]")
        let lines = verdict.consoleLines(platform: .default, context: ConsoleContext(processName: "App"))
        #expect(lines.contains { $0.hasSuffix("HTTP load failed, 0/0 bytes (error code: -1003 [12:8])") })
    }

    @Test func trustFailureConsoleLinesFollowTheATSPath() throws {
        let server = try TestServer(.tls(Fixture.expired.makeContext()))
        defer { server.stop() }
        let verdict = check(server, Policies.standard)
        let lines = verdict.consoleLines(
            platform: .default, context: ConsoleContext(processName: "App", connectionNumber: 6))
        #expect(lines.contains { $0.hasSuffix("ATS failed system trust") })
        #expect(lines.contains { $0.hasSuffix("Connection 6: system TLS Trust evaluation failed(-9802)") })
        #expect(lines.contains { $0.hasSuffix("HTTP load failed, 0/0 bytes (error code: -1200 [3:-9802])") })
    }
}
