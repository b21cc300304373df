import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// Playbook tests of `ProxySession`: events in, commands out, no sockets. HTTPS cases pump a
/// client TLS engine, the session and an upstream TLS server engine back to back in memory.
@Suite struct ProxySessionTests {
    /// A session plus the fixtures its HTTPS tests need.
    final class Harness {
        let proxyCA: CertificateAuthority
        let originCA: CertificateAuthority
        var session: ProxySession
        var now = Date()

        init(
            ats: [String: PlistValue] = [:], settings: ProxySettings = ProxySettings(), platform: String = "ios:18.0",
            upstreamALPN: [String] = ["http/1.1"]
        ) throws {
            proxyCA = try CertificateAuthority.generate()
            originCA = try CertificateAuthority.generate()
            let configuration = ATSConfigurationParser().parse(.dictionary(ats))
            let evaluator = ATSEvaluator(
                configuration: configuration, options: EvaluationOptions(platform: Platform(parsing: platform)!))
            let services = ProxyServices(
                policy: PolicyStore(.init(evaluator: evaluator, sourceSummary: "test", processName: "Tester")),
                settings: settings,
                serverTLS: try ServerTLSContext(
                    leaves: try LeafCertificateCache(authority: proxyCA),
                    alpn: ServerTLSContext.preferring(["http/1.1"])),
                upstreamTLS: UpstreamTLSClient(
                    trust: try TrustStore(systemRoots: false, extraAnchors: [originCA.certificate]), alpn: upstreamALPN),
                processID: 100)
            session = ProxySession(services: services, clientAddress: "127.0.0.1:5000", connectionNumber: 1)
            _ = session.start()
        }

        func send(_ event: ProxyEvent) -> [ProxyCommand] { session.handle(event, now: now) }

        func send(_ text: String) -> [ProxyCommand] { send(.clientBytes(Array(text.utf8))) }

        /// An upstream TLS server engine presenting a leaf for `host` from `originCA`.
        func originServer(
            host: String, versions: ClosedRange<TLSProtocolVersion> = .tls12...(.tls13), alpn: [String]? = nil
        ) throws -> TLSConnection {
            let key = try PrivateKey.generate(.p256)
            var spec = CertificateSpec(
                notBefore: now.addingTimeInterval(-3600), notAfter: now.addingTimeInterval(86400 * 30))
            spec.commonName = host
            spec.dnsNames = [host]
            let leaf = try CertificateMinter.mint(
                spec, subjectKey: key, issuer: originCA.certificate, issuerKey: originCA.privateKey)
            let context = try TLSContext(role: .server)
            if versions.lowerBound < .tls12 {
                context.setSecurityLevel(0)
                try context.setCipherList("DEFAULT@SECLEVEL=0")
            }
            try context.setVersions(minimum: versions.lowerBound, maximum: versions.upperBound)
            try context.useCertificate(leaf, key: key)
            if let alpn { context.setALPNSelector(ServerTLSContext.preferring(alpn)) }
            return try TLSConnection(context: context, serverName: nil)
        }
    }

    // MARK: - Helpers

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// Every decrypted byte an engine holds (a response may span several TLS records).
    static func readAll(_ connection: TLSConnection) -> [UInt8] {
        var bytes: [UInt8] = []
        while case .data(let more) = connection.read() { bytes += more }
        return bytes
    }
    // MARK: - Cleartext

    @Test func blockedCleartextIsAnsweredLocallyAndNeverConnects() throws {
        let harness = try Harness()
        let commands = harness.send("GET http://example.com/feed HTTP/1.1\r\nHost: example.com\r\n\r\n")
        let response = Transcript(commands).clientText
        #expect(response.hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        #expect(response.contains("X-ATS-Error: -1022\r\n"))
        #expect(response.contains("X-ATS-Rule: No exception entry, not a local host"))
        #expect(!response.contains("Connection: close"))
        #expect(Transcript(commands).connects.isEmpty)
        #expect(!Transcript(commands).closesClient)
        let record = try #require(Transcript(commands).records.first)
        #expect(record.result == .blockedCleartext)
        #expect(record.errorCode == -1022)
        #expect(
            record.consoleLines.first?.contains("App Transport Security has blocked a cleartext HTTP connection")
                == true)
    }

    @Test func allowedCleartextIsForwardedWithoutHopByHopHeaders() throws {
        let harness = try Harness()
        let request =
            "GET http://localhost:9000/a?b=1 HTTP/1.1\r\nHost: localhost:9000\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\nUser-Agent: Tester/1 CFNetwork/1\r\n\r\n"
        let first = harness.send(request)
        #expect(Transcript(first).connects.map(\.authority) == ["localhost:9000"])
        #expect(Transcript(first).upstreamBytes.isEmpty)
        let forwarded = Transcript(harness.send(.upstreamConnected)).upstreamText
        #expect(forwarded.hasPrefix("GET /a?b=1 HTTP/1.1\r\n"))
        #expect(forwarded.contains("Host: localhost:9000\r\n"))
        #expect(!forwarded.contains("Proxy-Connection"))
        #expect(!forwarded.contains("Proxy-Authorization"))
        let response = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)))
        #expect(Transcript(response).clientText == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        let record = try #require(Transcript(response).records.first)
        #expect(record.status == 200 && record.result == .completed && record.bytesToClient == 2)
    }

    @Test func aReloadedPolicyDecidesTheNextRequestOnTheSameConnection() throws {
        let harness = try Harness()
        let blocked = harness.send("GET http://example.com/a HTTP/1.1\r\nHost: example.com\r\n\r\n")
        #expect(Transcript(blocked).clientText.hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        // The connection keeps its last decision only while the policy is the same one (SIGHUP replaces it).
        let permissive = ATSEvaluator(
            configuration: ATSConfigurationParser().parse(.dictionary(["NSAllowsArbitraryLoads": .bool(true)])),
            options: EvaluationOptions(platform: Platform(parsing: "ios:18.0")!))
        harness.session.services.policy.replace(
            with: .init(evaluator: permissive, sourceSummary: "reloaded", processName: "Tester"))
        let next = harness.send("GET http://example.com/b HTTP/1.1\r\nHost: example.com\r\n\r\n")
        #expect(Transcript(next).connects.map(\.authority) == ["example.com:80"])
        #expect(Transcript(next).clientBytes.isEmpty)
    }

    /// The driver's form, `handle(_:now:into:)` with one list reused from event to event, gives each event
    /// the same commands as `handle(_:now:)`, nothing of the previous event left over.
    @Test func handlingIntoAReusedListMatchesHandlingEachEventAlone() throws {
        let events: [ProxyEvent] = [
            .clientBytes(Array("GET http://localhost:9000/a HTTP/1.1\r\nHost: localhost:9000\r\n\r\n".utf8)),
            .upstreamConnected,
            .upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi".utf8)),
        ]
        let alone = try Harness()
        let reusing = try Harness()
        var list: [ProxyCommand] = []
        for event in events {
            let expected = alone.session.handle(event, now: alone.now)
            reusing.session.handle(event, now: reusing.now, into: &list)
            #expect(Self.described(list) == Self.described(expected), "\(event)")
            list.removeAll(keepingCapacity: true)
        }
    }

    /// Commands as text, a log record as its URL and status (its task ID is random per connection).
    static func described(_ commands: [ProxyCommand]) -> [String] {
        commands.map { command in
            if case .log(let record) = command { return "log \(record.url) \(record.status ?? 0)" }
            return "\(command)"
        }
    }

    @Test func pipelinedRequestsReuseTheUpstream() throws {
        let harness = try Harness()
        let two =
            "GET http://localhost:9000/1 HTTP/1.1\r\nHost: localhost:9000\r\n\r\nGET http://localhost:9000/2 HTTP/1.1\r\nHost: localhost:9000\r\n\r\n"
        #expect(Transcript(harness.send(two)).connects.map(\.authority) == ["localhost:9000"])
        #expect(Transcript(harness.send(.upstreamConnected)).upstreamText.hasPrefix("GET /1 "))
        let afterFirst = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na".utf8)))
        #expect(Transcript(afterFirst).connects.isEmpty)
        #expect(Transcript(afterFirst).upstreamText.hasPrefix("GET /2 "))
        let afterSecond = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb".utf8)))
        #expect(Transcript(afterSecond).clientText.hasSuffix("\r\n\r\nb"))
        #expect(Transcript(afterSecond).records.count == 1)
    }

    @Test func chunkedRequestWithTrailersIsForwardedOnceAndAnswered() throws {
        // Regression: the trailer section used to finish the body writer and the message end finished it again (a trap).
        let harness = try Harness()
        _ = harness.send(
            "POST http://localhost:9000/up HTTP/1.1\r\nHost: localhost:9000\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5\r\nhello\r\n0\r\nX-Checksum: abc\r\n\r\n")
        let forwarded = Transcript(harness.send(.upstreamConnected)).upstreamText
        #expect(forwarded.hasSuffix("\r\n\r\n5\r\nhello\r\n0\r\nX-Checksum: abc\r\n\r\n"), "\(forwarded)")
        let answered = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)))
        #expect(Transcript(answered).clientText.hasSuffix("\r\n\r\nok"))
        #expect(Transcript(answered).records.first?.status == 200)
    }

    @Test func requestBodyWaitsForTheUpstreamThenStreams() throws {
        let harness = try Harness()
        _ = harness.send(
            "POST http://localhost:9000/up HTTP/1.1\r\nHost: localhost:9000\r\nContent-Length: 10\r\n\r\n01234")
        let connected = Transcript(harness.send(.upstreamConnected)).upstreamText
        #expect(connected.hasSuffix("Content-Length: 10\r\n\r\n01234"))
        #expect(Transcript(harness.send("56789")).upstreamText == "56789")
    }

    @Test func untilCloseResponseIsRechunkedForAKeepAliveClient() throws {
        let harness = try Harness()
        _ = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = harness.send(.upstreamConnected)
        let head = harness.send(.upstreamBytes(Array("HTTP/1.0 200 OK\r\n\r\nhello".utf8)))
        let text = Transcript(head).clientText
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"))
        let end = harness.send(.upstreamEOF)
        #expect(Transcript(end).clientText == "0\r\n\r\n")
        #expect(Transcript(end).records.first?.status == 200)
    }

    @Test(arguments: [
        (UpstreamConnectFailure.nameNotResolved, "-1003", "12:8"), (.refused, "-1004", "1:61"),
        (.timedOut, "-1001", "1:60"),
    ])
    func connectionFailuresAnswer502WithCodes(failure: UpstreamConnectFailure, header: String, pair: String) throws {
        let harness = try Harness()
        _ = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        let commands = harness.send(.upstreamConnectFailed(failure))
        let response = Transcript(commands).clientText
        #expect(response.hasPrefix(failure == .timedOut ? "HTTP/1.1 504 " : "HTTP/1.1 502 "))
        #expect(response.contains("X-ATS-Error: \(header)\r\n"))
        #expect(response.contains("X-ATS-Stream-Error: \(pair)\r\n"))
        #expect(Transcript(commands).records.first?.result == .failed)
    }

    @Test("a failed connect names its cause: the proxy's own descriptors and an unreachable network are not refusals")
    func connectFailuresKeepTheirCause() throws {
        for (failure, words) in [
            (UpstreamConnectFailure.proxyResources(detail: "socket: Too many open files"), "ran out of its own"),
            (.unreachable, "unreachable"), (.refused, "refused the TCP connection"),
        ] {
            let harness = try Harness()
            _ = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
            let record = try #require(Transcript(harness.send(.upstreamConnectFailed(failure))).records.first)
            #expect(record.errorCode == -1004)
            #expect(record.rule.contains(words), "\(record.rule)")
            #expect(failure == .refused || !record.rule.contains("refused"), "\(record.rule)")
        }
    }

    /// Fires the leg's timer until the exchange is recorded (its quiet stage comes first).
    static func fireUntilRecorded(_ harness: Harness) -> [ProxyCommand] {
        for _ in 0..<4 {
            let fired = harness.send(.timerFired)
            if !Transcript(fired).records.isEmpty { return fired }
        }
        return []
    }

    @Test("an exchange timeout names the stage that stalled: the client's request body, or the server's answer")
    func exchangeTimeoutsNameTheStage() throws {
        // The body stops in the middle (the client stopped sending, or the server stopped reading: back-pressure
        // cannot tell which): named as a stalled body, answered 504, both connections closed.
        let stalled = try Harness()
        _ = stalled.send(
            "POST http://localhost:9000/up HTTP/1.1\r\nHost: localhost:9000\r\nContent-Length: 100\r\n\r\nabc")
        _ = stalled.send(.upstreamConnected)
        let cut = Self.fireUntilRecorded(stalled)
        let body = try #require(Transcript(cut).records.first)
        #expect(body.errorCode == -1001 && body.status == 504)
        #expect(
            body.rule.hasPrefix("the request body stopped moving before the timeout: 3 bytes of it had arrived"),
            "\(body.rule)")
        #expect(Transcript(cut).clientText.hasPrefix("HTTP/1.1 504 "))
        #expect(Transcript(cut).closesClient)
        #expect(Transcript(cut).closesUpstream)
        // The whole request went out and no response head came: the server's silence, not a connect stage.
        let silent = try Harness()
        _ = silent.send("GET http://localhost:9000/q HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = silent.send(.upstreamConnected)
        let fired = Self.fireUntilRecorded(silent)
        let answer = try #require(Transcript(fired).records.first)
        #expect(answer.errorCode == -1001 && answer.status == 504)
        #expect(answer.rule.contains("no response head arrived"), "\(answer.rule)")
        #expect(Transcript(fired).clientText.hasPrefix("HTTP/1.1 504 "))
        // Still connecting: the connect stage, as before.
        let connecting = try Harness()
        _ = connecting.send("GET http://localhost:9000/q HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        let timedOut = try #require(Transcript(Self.fireUntilRecorded(connecting)).records.first)
        #expect(timedOut.rule.contains("did not complete the connection"), "\(timedOut.rule)")
    }

    @Test func anExchangeKeepsThePolicyItStartedWithAcrossAReload() throws {
        let harness = try Harness()
        _ = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        // SIGHUP: a new policy (here: another process name and an ATS that blocks nothing) while the exchange runs.
        let reloaded = ATSEvaluator(
            configuration: ATSConfigurationParser().parse(.dictionary(["NSAllowsArbitraryLoads": .bool(true)])),
            options: EvaluationOptions(platform: Platform(parsing: "ios:18.0")!))
        harness.session.services.policy.replace(
            with: .init(evaluator: reloaded, sourceSummary: "reloaded", processName: "Reloaded"))
        let commands = harness.send(.upstreamConnectFailed(.refused))
        let record = try #require(Transcript(commands).records.first)
        #expect(!record.consoleLines.isEmpty)
        #expect(record.consoleLines.allSatisfy { $0.contains("Tester[") && !$0.contains("Reloaded") })
        // The next request is decided under the new policy.
        _ = harness.send("GET http://localhost:9000/again HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        let next = harness.send(.upstreamConnectFailed(.refused))
        #expect(Transcript(next).records.first?.consoleLines.allSatisfy { $0.contains("Reloaded[") } == true)
    }

    @Test func malformedRequestGets400AndClose() throws {
        let harness = try Harness()
        let commands = harness.send(
            "GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        // The standard phrase on the status line; the broken rule in the body.
        let answer = Transcript(commands).clientText
        #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer)")
        #expect(answer.contains("\r\n\r\nats-proxy: "), "\(answer)")
        #expect(Transcript(commands).closesClient)
        #expect(Transcript(commands).connects.isEmpty)
    }

    @Test func requestToTheProxyItselfIsALoop() throws {
        var settings = ProxySettings()
        settings.selfAuthorities = ["127.0.0.1:8080"]
        let harness = try Harness(settings: settings)
        let commands = harness.send("GET http://127.0.0.1:8080/ HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
        #expect(Transcript(commands).clientText.hasPrefix("HTTP/1.1 508 Loop Detected"))
        #expect(Transcript(commands).connects.isEmpty)
    }

    @Test func reportModeLetsBlockedCleartextThroughAndRecordsTheViolation() throws {
        var settings = ProxySettings()
        settings.mode = .report
        let harness = try Harness(settings: settings)
        let commands = harness.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        #expect(Transcript(commands).connects.map(\.authority) == ["example.com:80"])
        _ = harness.send(.upstreamConnected)
        let done = harness.send(.upstreamBytes(Array("HTTP/1.1 204 No Content\r\n\r\n".utf8)))
        let record = try #require(Transcript(done).records.first)
        #expect(record.result == .reported && record.errorCode == -1022 && record.status == 204)
    }

    @Test func idleTimerClosesAndPartialHeadGets408() throws {
        let harness = try Harness()
        let armed = harness.send("GET http://localhost/ HTTP/1.1\r\n")
        #expect(Transcript(armed).armedTimers.contains(30))
        let fired = harness.send(.timerFired)
        #expect(Transcript(fired).clientText.hasPrefix("HTTP/1.1 408 "))
        #expect(Transcript(fired).closesClient)
    }

    @Test func anIdleClientHandsItsUpstreamBackToThePoolAfterTheLinger() throws {
        let harness = try Harness()
        _ = harness.send("GET http://localhost:9000/1 HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = harness.send(.upstreamConnected)
        let answered = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na".utf8)))
        // Idle with an upstream of its own: the timer is the linger (1 s), not the idle timeout (60 s).
        #expect(Transcript(answered).armedTimers.contains(1))
        let lingered = harness.send(.timerFired)
        let leases = Transcript(lingered).releases
        #expect(leases.count == 1)
        #expect(leases.first?.key.host == "localhost" && leases.first?.key.port == 9000)
        #expect(!Transcript(lingered).closesUpstream)
        #expect(!Transcript(lingered).closesClient)
        // The client connection stays for the rest of the idle timeout.
        #expect(Transcript(lingered).armedTimers.contains(59))
        // Its next request asks the pool again and rides on what the pool hands over.
        let next = harness.send("GET http://localhost:9000/2 HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        let reuse = Transcript(next).connects.compactMap(\.reuse)
        #expect(reuse.first?.host == "localhost" && reuse.first?.port == 9000)
        let lease = try #require(leases.first)
        let reused = harness.send(.upstreamReused(lease))
        #expect(Transcript(reused).upstreamText.hasPrefix("GET /2 HTTP/1.1\r\n"))
        let second = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb".utf8)))
        #expect(Transcript(second).clientText.hasSuffix("\r\n\r\nb"))
        #expect(Transcript(second).armedTimers.contains(1))
        // Idle without an upstream: after the linger and the rest of the idle timeout, the client closes.
        _ = harness.send(.timerFired)
        #expect(Transcript(harness.send(.timerFired)).closesClient)
    }

    @Test func withoutALingerAnIdleClientKeepsItsUpstreamUntilItCloses() throws {
        var settings = ProxySettings()
        settings.upstreamLinger = 0
        let harness = try Harness(settings: settings)
        _ = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = harness.send(.upstreamConnected)
        let answered = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na".utf8)))
        #expect(Transcript(answered).armedTimers.contains(60))
        let fired = harness.send(.timerFired)
        #expect(Transcript(fired).closesClient)
        // Closing an idle connection still parks its upstream.
        #expect(!Transcript(fired).releases.isEmpty)
    }

    @Test func headerTimerIsNotRestartedByEachByte() throws {
        let harness = try Harness()
        let first = harness.send("G")
        #expect(Transcript(first).armedTimers.contains(30))
        let more = harness.send("ET http://localhost/ HTTP/1.1\r\n")
        #expect(Transcript(more).armedTimers.isEmpty)
    }

    @Test func stalledOriginTimesOutWith504AndMinus1001() throws {
        let harness = try Harness()
        let start = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        #expect(Transcript(start).armedTimers.contains(60))
        let fired = harness.send(.timerFired)
        let response = Transcript(fired).clientText
        #expect(response.hasPrefix("HTTP/1.1 504 Gateway Timeout\r\n"))
        #expect(response.contains("X-ATS-Error: -1001\r\n"))
        #expect(Transcript(fired).records.first?.errorCode == -1001)
    }

    @Test func clientReadsPauseUntilTheUpstreamIsReady() throws {
        let harness = try Harness()
        let start = harness.send(
            "POST http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\nContent-Length: 4\r\n\r\n")
        #expect(Transcript(start).pausesClientReads)
        let connected = harness.send(.upstreamConnected)
        #expect(Transcript(connected).resumesClientReads)
    }

    @Test func aClientThatLeavesMidExchangeIsLogged() throws {
        let harness = try Harness()
        _ = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = harness.send(.upstreamConnected)
        let gone = harness.send(.clientGone)
        let record = try #require(Transcript(gone).records.first)
        #expect(record.result == .failed)
        #expect(record.rule == "the client closed the connection before the response was complete")
        #expect(Transcript(gone).closesUpstream)
    }

    @Test func drainClosesAnIdleConnectionAndABusyOneAfterItsExchange() throws {
        let idle = try Harness()
        #expect(Transcript(idle.send(.drain)).closesClient)
        let busy = try Harness()
        _ = busy.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = busy.send(.upstreamConnected)
        #expect(!Transcript(busy.send(.drain)).closesClient)
        let done = busy.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx".utf8)))
        #expect(Transcript(done).closesClient)
    }

    // MARK: - HTTPS interception, pumped in memory

    /// Runs the client handshake with the session (which answers CONNECT) until it completes.
    static func establishTunnel(_ harness: Harness, host: String) throws -> TLSConnection {
        let connect = harness.send("CONNECT \(host):443 HTTP/1.1\r\nHost: \(host):443\r\n\r\n")
        #expect(Transcript(connect).clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
        let clientContext = try TLSContext(role: .client)
        try clientContext.setVersions(minimum: .tls12, maximum: .tls13)
        let client = try TLSConnection(context: clientContext, serverName: host)
        for _ in 0..<10 {
            let progress = client.handshake()
            if progress == .complete && !client.hasOutbound { break }
            if case .failed(let failure) = progress { Issue.record("client handshake failed: \(failure)") }
            let reply = harness.send(.clientBytes(client.takeOutbound()))
            client.receive(Transcript(reply).clientBytes)
        }
        #expect(client.state == .established)
        return client
    }

    @Test func theTunnelHandshakeIsTimedByTheIdleTimeoutAndIdleStagesStartAfterTheFirstExchange() throws {
        // A client may take its time between the 200 and its ClientHello, and between the server's flight
        // and its Finished (a phone checking the chain): the 50 ms buffer stage applies only between requests.
        let harness = try Harness()
        let connect = harness.send("CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
        #expect(Transcript(connect).armedTimers.contains(60), "\(connect)")
        let clientContext = try TLSContext(role: .client)
        let client = try TLSConnection(context: clientContext, serverName: "api.example.com")
        var timers: [Double] = []
        for _ in 0..<10 {
            if client.handshake() == .complete && !client.hasOutbound { break }
            let reply = harness.send(.clientBytes(client.takeOutbound()))
            timers += Transcript(reply).armedTimers
            client.receive(Transcript(reply).clientBytes)
        }
        #expect(client.state == .established)
        // Until the handshake completes: the idle timeout. Then, waiting for the first request, the buffer stage,
        // whose firing frees buffers and keeps the connection.
        #expect(timers.dropLast().allSatisfy { $0 == 60 }, "timers armed during the handshake: \(timers)")
        #expect(timers.last == 0.05, "\(timers)")
        let fired = harness.send(.timerFired)
        #expect(!Transcript(fired).closesClient, "\(fired)")
        #expect(Transcript(fired).armedTimers.contains(59.95), "\(fired)")
    }

    /// Pumps the upstream handshake between the session and `origin` until it settles; returns
    /// the commands of the last step.
    static func pumpUpstream(_ harness: Harness, origin: TLSConnection, first: [ProxyCommand]) -> [ProxyCommand] {
        var commands = first
        for _ in 0..<10 {
            let toOrigin = Transcript(commands).upstreamBytes
            if toOrigin.isEmpty { break }
            origin.receive(toOrigin)
            _ = origin.handshake()
            guard origin.hasOutbound else { break }
            commands = harness.send(.upstreamBytes(origin.takeOutbound()))
            if !Transcript(commands).clientBytes.isEmpty { break }
        }
        return commands
    }

    @Test(arguments: [false, true])
    func anOriginChoosingH2IsPromotedExceptForUpgradeRequests(upgrade: Bool) throws {
        // URLSession offers h2 upstream, but a WebSocket (HTTP/1.1 Upgrade) connection offers http/1.1 only.
        let harness = try Harness(upstreamALPN: ["h2", "http/1.1"])
        let client = try Self.establishTunnel(harness, host: "api.example.com")
        var request = "GET /socket HTTP/1.1\r\nHost: api.example.com\r\n"
        if upgrade {
            request += "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
            request += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        }
        #expect(client.write(Array((request + "\r\n").utf8)) > 0)
        _ = harness.send(.clientBytes(client.takeOutbound()))
        let origin = try harness.originServer(host: "api.example.com", alpn: ["h2", "http/1.1"])
        // Pump the handshake, keeping every command (the promotion comes with the origin's last flight).
        var commands = harness.send(.upstreamConnected)
        var all = commands
        func isPromotion(_ command: ProxyCommand) -> Bool {
            if case .promoteUpstream = command { true } else { false }
        }
        for _ in 0..<10 where !all.contains(where: isPromotion) {
            origin.receive(Transcript(commands).upstreamBytes)
            _ = origin.handshake()
            guard origin.hasOutbound else { break }
            commands = harness.send(.upstreamBytes(origin.takeOutbound()))
            all += commands
        }
        if let promotion = commands.firstIndex(where: isPromotion) {
            // The TLS records before the promotion (the client's Finished) still belong to the handshake.
            origin.receive(Transcript(Array(commands[..<promotion])).upstreamBytes)
            _ = origin.handshake()
        }
        #expect(origin.state == .established)
        #expect(origin.negotiatedALPN == (upgrade ? "http/1.1" : "h2"))
        #expect(all.contains(where: isPromotion) == !upgrade)
    }

    @Test func aQuietExchangeFreesItsTLSBuffersAndStillTimesOutAfterTheExchangeTimeout() throws {
        // A long poll: the origin has the request and says nothing. After 50 ms of silence the engines free their
        // record buffers (the connection stays); the exchange still times out 60 s after the last byte moved.
        let harness = try Harness()
        let client = try Self.establishTunnel(harness, host: "api.example.com")
        #expect(client.write(Array("GET /poll HTTP/1.1\r\nHost: api.example.com\r\n\r\n".utf8)) > 0)
        _ = harness.send(.clientBytes(client.takeOutbound()))
        let origin = try harness.originServer(host: "api.example.com")
        let settled = Self.pumpUpstream(harness, origin: origin, first: harness.send(.upstreamConnected))
        func timers(_ commands: [ProxyCommand]) -> [Double] {
            Transcript(commands).armedTimers
        }
        #expect(timers(settled).last == 0.05, "\(settled)")
        let quiet = harness.send(.timerFired)
        #expect(!Transcript(quiet).closesClient && Transcript(quiet).clientBytes.isEmpty, "\(quiet)")
        #expect(timers(quiet) == [59.95], "\(quiet)")
        // Bytes move again: the buffers are held again and the quiet stage restarts.
        if case .data = origin.read() {} else { Issue.record("the origin did not get the request") }
        _ = origin.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel".utf8))
        let partial = harness.send(.upstreamBytes(origin.takeOutbound()))
        #expect(timers(partial).last == 0.05, "\(partial)")
        // Silent again past both stages: the timeout ends the exchange (response started: the client is closed).
        _ = harness.send(.timerFired)
        let timedOut = harness.send(.timerFired)
        #expect(Transcript(timedOut).closesClient, "\(timedOut)")
    }

    @Test func interceptedRequestIsForwardedOverTLSAndAnswered() throws {
        let harness = try Harness()
        let client = try Self.establishTunnel(harness, host: "api.example.com")
        #expect(client.write(Array("GET /v1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n".utf8)) > 0)
        let request = harness.send(.clientBytes(client.takeOutbound()))
        #expect(Transcript(request).connects.map(\.authority) == ["api.example.com:443"])
        let origin = try harness.originServer(host: "api.example.com")
        let settled = Self.pumpUpstream(harness, origin: origin, first: harness.send(.upstreamConnected))
        _ = settled
        // The origin now has the request; read it and answer.
        var received: [UInt8] = []
        if case .data(let bytes) = origin.read() { received = bytes }
        #expect(Self.text(received).hasPrefix("GET /v1 HTTP/1.1\r\n"))
        _ = origin.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8))
        let answer = harness.send(.upstreamBytes(origin.takeOutbound()))
        client.receive(Transcript(answer).clientBytes)
        #expect(Self.text(Self.readAll(client)) == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        let record = try #require(Transcript(answer).records.first)
        #expect(record.url == "https://api.example.com/v1")
        #expect(record.tls?["version"] == "TLSv1.3")
    }

    /// `OPTIONS *` inside a tunnel goes upstream as asterisk-form; its target URI has an empty path
    /// (RFC 9112 §3.3), so the record names the origin alone.
    @Test func asteriskFormInsideTheTunnelIsForwardedAndLoggedAsTheOrigin() throws {
        let harness = try Harness()
        let client = try Self.establishTunnel(harness, host: "api.example.com")
        #expect(client.write(Array("OPTIONS * HTTP/1.1\r\nHost: api.example.com\r\n\r\n".utf8)) > 0)
        _ = harness.send(.clientBytes(client.takeOutbound()))
        let origin = try harness.originServer(host: "api.example.com")
        _ = Self.pumpUpstream(harness, origin: origin, first: harness.send(.upstreamConnected))
        var received: [UInt8] = []
        if case .data(let bytes) = origin.read() { received = bytes }
        #expect(Self.text(received).hasPrefix("OPTIONS * HTTP/1.1\r\n"), "\(Self.text(received))")
        _ = origin.write(Array("HTTP/1.1 204 No Content\r\nAllow: GET\r\n\r\n".utf8))
        let answer = harness.send(.upstreamBytes(origin.takeOutbound()))
        client.receive(Transcript(answer).clientBytes)
        #expect(Self.text(Self.readAll(client)).hasPrefix("HTTP/1.1 204 No Content\r\n"))
        let record = try #require(Transcript(answer).records.first)
        #expect(record.url == "https://api.example.com")
    }

    @Test func tls11OriginIsBlockedInsideTheTunnelWith9836() throws {
        let harness = try Harness()
        let client = try Self.establishTunnel(harness, host: "old.example.com")
        _ = client.write(Array("GET / HTTP/1.1\r\nHost: old.example.com\r\n\r\n".utf8))
        _ = harness.send(.clientBytes(client.takeOutbound()))
        let origin = try harness.originServer(host: "old.example.com", versions: .tls11...(.tls11))
        let settled = Self.pumpUpstream(harness, origin: origin, first: harness.send(.upstreamConnected))
        client.receive(Transcript(settled).clientBytes)
        guard case .data(let plain) = client.read() else {
            Issue.record("no 502 inside the tunnel")
            return
        }
        let response = Self.text(plain)
        #expect(response.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
        #expect(response.contains("X-ATS-Error: -1200\r\n"))
        #expect(response.contains("X-ATS-Stream-Error: 3:-9836\r\n"))
        let record = try #require(Transcript(settled).records.first)
        #expect(
            record.consoleLines.contains { $0.contains("HTTP load failed, 0/0 bytes (error code: -1200 [3:-9836])") })
    }

    @Test func tls11OriginIsAllowedWithAnException() throws {
        let ats: [String: PlistValue] = [
            "NSExceptionDomains": .dictionary([
                "old.example.com": .dictionary(["NSExceptionMinimumTLSVersion": .string("TLSv1.1")])
            ])
        ]
        let harness = try Harness(ats: ats)
        let client = try Self.establishTunnel(harness, host: "old.example.com")
        _ = client.write(Array("GET / HTTP/1.1\r\nHost: old.example.com\r\n\r\n".utf8))
        _ = harness.send(.clientBytes(client.takeOutbound()))
        let origin = try harness.originServer(host: "old.example.com", versions: .tls11...(.tls11))
        _ = Self.pumpUpstream(harness, origin: origin, first: harness.send(.upstreamConnected))
        guard case .data(let received) = origin.read() else {
            Issue.record("the request did not reach the TLS 1.1 origin")
            return
        }
        #expect(Self.text(received).hasPrefix("GET / HTTP/1.1"))
    }
}

// MARK: - HTTP_1_1_REQUIRED

/// An origin that resets a request's HTTP/2 stream with HTTP_1_1_REQUIRED (RFC 9113 §8.7) wants HTTP/1.1: like
/// browsers and CFNetwork, the session sends a replayable request once more on an HTTP/1.1-only upstream, and
/// asks for one straight away for the origin's later requests.
extension ProxySessionTests {
    /// A channel of a shared HTTP/2 link for `key`, as the pool hands it over.
    static func h2Channel(_ key: UpstreamKey) -> UpstreamLease {
        UpstreamLease(key: key, tls: nil, facts: ["alpn": "h2"], wire: .h2, shareable: true)
    }

    /// A parked HTTP/1.1 connection for `key`, as the pool hands it over (plaintext from then on).
    static func http1Connection(_ key: UpstreamKey) -> UpstreamLease {
        UpstreamLease(key: key, tls: nil, facts: ["alpn": "http/1.1"], wire: .http1, shareable: true)
    }

    /// The request parts the session sent on its HTTP/2 channel, written down as the HTTP/1.1 text they stand for.
    static func channelText(_ commands: [ProxyCommand]) -> String {
        var bytes: [UInt8] = []
        var writer: HTTP1BodyWriter?
        for part in Transcript(commands).channelParts {
            switch part {
            case .request(let head, let framing):
                HTTP1Serializer.writeRequestHead(head, into: &bytes)
                writer = HTTP1BodyWriter(framing: framing)
            case .body(let slice):
                try? writer?.write(slice, into: &bytes)
            case .trailers(let trailers):
                try? writer?.finish(trailers: trailers, into: &bytes)
                writer = nil
            case .messageEnd:
                try? writer?.finish(into: &bytes)
                writer = nil
            case .response, .upgraded, .failed:
                Issue.record("not a request part: \(part)")
            }
        }
        return text(bytes)
    }

    @Test func aRequestTheOriginRequiresOverHTTP1IsSentAgainOnAnHTTP1OnlyConnection() throws {
        let harness = try Harness(upstreamALPN: ["h2", "http/1.1"])
        let client = try Self.establishTunnel(harness, host: "api.example.com")
        #expect(client.write(Array("GET /v1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n".utf8)) > 0)
        let opened = harness.send(.clientBytes(client.takeOutbound()))
        let key = try #require(Transcript(opened).connects.map(\.reuse).first ?? nil)
        #expect(!key.http1Only)
        let sent = harness.send(.upstreamReused(Self.h2Channel(key)))
        #expect(Transcript(sent).upstreamBytes.isEmpty, "a channel takes request parts, not HTTP/1.1 text")
        #expect(Self.channelText(sent).hasPrefix("GET /v1 HTTP/1.1\r\n"))

        let refused = harness.send(.upstreamRequiresHTTP11)
        #expect(Transcript(refused).closesUpstream)
        #expect(Transcript(refused).clientBytes.isEmpty, "nothing reaches the client yet")
        #expect(Transcript(refused).records.isEmpty)
        // The same origin and decision, HTTP/1.1 only: the pool may answer with a parked connection.
        var http1Key = key
        http1Key.http1Only = true
        #expect(Transcript(refused).connects.map(\.reuse) == [http1Key])

        // The pool has none: a new connection offers only http/1.1, though the origin prefers h2.
        let origin = try harness.originServer(host: "api.example.com", alpn: ["h2", "http/1.1"])
        _ = Self.pumpUpstream(harness, origin: origin, first: harness.send(.upstreamConnected))
        #expect(origin.state == .established)
        #expect(origin.negotiatedALPN == "http/1.1")
        #expect(Self.text(Self.readAll(origin)).hasPrefix("GET /v1 HTTP/1.1\r\n"))
        _ = origin.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8))
        let answer = harness.send(.upstreamBytes(origin.takeOutbound()))
        client.receive(Transcript(answer).clientBytes)
        #expect(Self.text(Self.readAll(client)) == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        let record = try #require(Transcript(answer).records.first)
        #expect(record.status == 200 && record.result == .completed)
        #expect(record.retriedOnNewConnection == true)
        #expect(record.tls?["alpn"] == "http/1.1", "the facts are the HTTP/1.1 connection's: \(record.tls ?? [:])")
    }

    @Test(arguments: [false, true])
    func aRequestSentAgainOverHTTP1IsNeverSentAThirdTime(refusedAgain: Bool) throws {
        let harness = try Harness()
        _ = harness.send("GET http://localhost:9000/once HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = harness.send(
            .upstreamReused(
                Self.h2Channel(UpstreamKey(host: "localhost", port: 9000, requirements: nil, permissive: false))))
        let refused = harness.send(.upstreamRequiresHTTP11)
        let http1Key = try #require(Transcript(refused).connects.map(\.reuse).first ?? nil)
        #expect(http1Key.http1Only)
        let resent = harness.send(.upstreamReused(Self.http1Connection(http1Key)))
        #expect(Transcript(resent).upstreamText.hasPrefix("GET /once HTTP/1.1\r\n"))

        // The parked connection the pool handed over was closed by the origin (or, impossibly, refused again).
        let lost = harness.send(refusedAgain ? .upstreamRequiresHTTP11 : .upstreamReset)
        #expect(Transcript(lost).connects.map(\.reuse).isEmpty, "a third attempt")
        let response = Transcript(lost).clientText
        #expect(response.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
        #expect(response.contains("X-ATS-Error: -1005\r\n"))
        let record = try #require(Transcript(lost).records.first)
        #expect(record.errorCode == -1005)
    }

    @Test func aRequestWithABodyIsNotSentAgainButTheOriginIsRememberedForTheNextOne() throws {
        let harness = try Harness(upstreamALPN: ["h2", "http/1.1"])
        let client = try Self.establishTunnel(harness, host: "api.example.com")
        let post = "POST /upload HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 4\r\n\r\ndata"
        #expect(client.write(Array(post.utf8)) > 0)
        let opened = harness.send(.clientBytes(client.takeOutbound()))
        let key = try #require(Transcript(opened).connects.map(\.reuse).first ?? nil)
        let sent = harness.send(.upstreamReused(Self.h2Channel(key)))
        #expect(Transcript(sent).upstreamBytes.isEmpty, "a channel takes request parts, not HTTP/1.1 text")
        #expect(Self.channelText(sent).hasSuffix("\r\n\r\ndata"))

        let refused = harness.send(.upstreamRequiresHTTP11)
        #expect(Transcript(refused).connects.map(\.reuse).isEmpty, "a POST is never replayed")
        client.receive(Transcript(refused).clientBytes)
        let response = Self.text(Self.readAll(client))
        #expect(response.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
        #expect(response.contains("X-ATS-Error: -1005\r\n"))
        let record = try #require(Transcript(refused).records.first)
        #expect(record.errorCode == -1005 && record.retriedOnNewConnection == nil)
        #expect(!Transcript(refused).closesClient)

        // The client trying again is not sent into the same refusal: HTTP/1.1 only from now on.
        #expect(client.write(Array(post.utf8)) > 0)
        let again = harness.send(.clientBytes(client.takeOutbound()))
        var http1Key = key
        http1Key.http1Only = true
        #expect(Transcript(again).connects.map(\.reuse) == [http1Key])
    }

    @Test func laterRequestsToTheOriginAskForAnHTTP1OnlyUpstreamStraightAway() throws {
        let harness = try Harness()
        let h2Key = UpstreamKey(host: "localhost", port: 9000, requirements: nil, permissive: false)
        let first = harness.send("GET http://localhost:9000/first HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        #expect(Transcript(first).connects.map(\.reuse) == [h2Key])
        _ = harness.send(.upstreamReused(Self.h2Channel(h2Key)))
        let refused = harness.send(.upstreamRequiresHTTP11)
        var http1Key = h2Key
        http1Key.http1Only = true
        #expect(Transcript(refused).connects.map(\.reuse) == [http1Key])
        _ = harness.send(.upstreamReused(Self.http1Connection(http1Key)))
        let answered = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na".utf8)))
        #expect(Transcript(answered).clientText.hasSuffix("\r\n\r\na"))
        #expect(Transcript(answered).records.first?.retriedOnNewConnection == true)

        // Another origin is not affected.
        let other = harness.send("GET http://localhost:9001/other HTTP/1.1\r\nHost: localhost:9001\r\n\r\n")
        #expect(
            Transcript(other).connects.map(\.reuse) == [
                UpstreamKey(host: "localhost", port: 9001, requirements: nil, permissive: false)
            ])
        _ = harness.send(.upstreamConnected)
        _ = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb".utf8)))

        // The refusing origin's next request asks for HTTP/1.1 at once: no second round trip over h2.
        let second = harness.send("GET http://localhost:9000/second HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        #expect(Transcript(second).connects.map(\.reuse) == [http1Key])
        let resent = harness.send(.upstreamReused(Self.http1Connection(http1Key)))
        #expect(Transcript(resent).upstreamText.hasPrefix("GET /second HTTP/1.1\r\n"))
        let done = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nc".utf8)))
        #expect(Transcript(done).records.first?.retriedOnNewConnection == nil)
    }
}

/// Responses of an HTTP/2 origin reach an HTTP/1.1 client through the session's HTTP/1.1 writer: parts in, text out.
extension ProxySessionTests {
    /// A GET inside a tunnel to `api.example.com`, sent on an HTTP/2 channel the pool handed over.
    static func requestOnChannel(_ harness: Harness, _ request: String) throws -> TLSConnection {
        let client = try Self.establishTunnel(harness, host: "api.example.com")
        #expect(client.write(Array(request.utf8)) > 0)
        let opened = harness.send(.clientBytes(client.takeOutbound()))
        let key = try #require(Transcript(opened).connects.map(\.reuse).first ?? nil)
        let sent = harness.send(.upstreamReused(Self.h2Channel(key)))
        #expect(Transcript(sent).upstreamBytes.isEmpty)
        return client
    }

    @Test func aChannelResponseOfUnknownLengthReachesAnHTTP1ClientChunkedWithItsReasonPhrase() throws {
        let harness = try Harness(upstreamALPN: ["h2", "http/1.1"])
        let client = try Self.requestOnChannel(harness, "GET /parts HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
        let head = HTTPResponseHead(status: 200, reason: "", headers: ["x-origin": "h2"])
        let answer = harness.send(
            .upstreamParts([
                .response(head, body: .untilClose), .body(Array("hel".utf8)[...]), .body(Array("lo".utf8)[...]),
                .trailers(["x-sum": "1"]), .messageEnd,
            ]))
        client.receive(Transcript(answer).clientBytes)
        let text = Self.text(Self.readAll(client))
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"), "the standard phrase for a head that came without one")
        #expect(text.contains("\r\nTransfer-Encoding: chunked\r\n"))
        #expect(text.hasSuffix("\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\nx-sum: 1\r\n\r\n"))
        #expect(
            !Transcript(answer).closesClient && !Transcript(answer).closesUpstream,
            "the channel's body ends with its stream")
        #expect(Transcript(answer).records.first?.status == 200)
    }

    @Test func anInterimHeadFromAChannelIsRelayedAndTheFinalOneFollows() throws {
        let harness = try Harness(upstreamALPN: ["h2", "http/1.1"])
        let client = try Self.requestOnChannel(harness, "GET /early HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
        let answer = harness.send(
            .upstreamParts([
                .response(HTTPResponseHead(status: 103, reason: "", headers: ["link": "</a.css>"]), body: .none),
                .response(HTTPResponseHead(status: 204, reason: "", headers: [:]), body: .none), .messageEnd,
            ]))
        client.receive(Transcript(answer).clientBytes)
        let text = Self.text(Self.readAll(client))
        #expect(text.hasPrefix("HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\nHTTP/1.1 204 No Content\r\n"))
        #expect(Transcript(answer).records.first?.status == 204)
    }
}
