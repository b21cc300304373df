import ATSAppTrust
import ATSHTTP2
import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// Regression tests from the review of the `ExchangeLeg`/`ProxySession` split and of `--challenge` in the session:
/// each pins a behaviour the split or the challenge wiring could get wrong, at the event/command level.
@Suite struct ExchangeLegReviewTests {
    typealias Session = ProxySessionTests

    // MARK: - Challenge mode in the session

    static let challengedHost = "api.example.com"

    /// A harness whose session challenges every connection to `challengedHost` with `kind` (`--challenge-every 1`),
    /// its challenge contexts offering http/1.1 only, as `run` builds them.
    static func challengedHarness(kind: ChallengeKind = .wrongHost) throws -> Session.Harness {
        let harness = try Session.Harness()
        let base = harness.session.services
        let rotation = ChallengeRotation(
            specs: [try ChallengeSpec(parsing: "api\\.example\\.com=\(kind.rawValue)")], every: 1)
        let contexts = try ChallengeTLSContexts(
            certificates: try ChallengeCertificates(authority: harness.proxyCA),
            alpn: ServerTLSContext.preferring(["http/1.1"]))
        let appTrust = AppTrustServices(
            challenges: rotation, challengeContexts: contexts, pinningPolicies: [],
            realTrust: try TrustStore(systemRoots: false),
            interceptionTrust: try TrustStore(systemRoots: false, extraAnchors: [harness.proxyCA.certificate]),
            leaves: try LeafCertificateCache(authority: harness.proxyCA))
        let services = ProxyServices(
            policy: base.policy, settings: base.settings, serverTLS: base.serverTLS, upstreamTLS: base.upstreamTLS,
            processID: base.processID, appTrust: appTrust)
        harness.session = ProxySession(services: services, clientAddress: "127.0.0.1:5000", connectionNumber: 1)
        _ = harness.session.start()
        return harness
    }

    /// CONNECT, then a client that does not verify the server completes the handshake with whatever the session
    /// presents. Returns the client engine and every command the session answered on the way.
    static func acceptChallenge(_ harness: Session.Harness) throws -> (TLSConnection, [ProxyCommand]) {
        var commands = harness.send(
            "CONNECT \(challengedHost):443 HTTP/1.1\r\nHost: \(challengedHost):443\r\n\r\n")
        let clientContext = try TLSContext(role: .client)
        try clientContext.setVersions(minimum: .tls12, maximum: .tls13)
        try clientContext.setClientALPN(["h2", "http/1.1"])
        let client = try TLSConnection(context: clientContext, serverName: challengedHost)
        for _ in 0..<10 {
            let progress = client.handshake()
            if progress == .complete && !client.hasOutbound { break }
            if case .failed(let failure) = progress { Issue.record("client handshake failed: \(failure)") }
            let reply = harness.send(.clientBytes(client.takeOutbound()))
            commands += reply
            client.receive(Transcript(reply).clientBytes)
        }
        #expect(client.state == .established)
        #expect(client.negotiatedALPN != "h2", "a challenged connection never speaks HTTP/2")
        return (client, commands)
    }

    static func challengeRecords(_ commands: [ProxyCommand]) -> [RequestRecord] {
        Transcript(commands).records.filter { $0.appTrust?.challenge != nil }
    }

    @Test func aClientThatBreaksOffTheChallengedHandshakeIsOnePass() throws {
        let harness = try Self.challengedHarness()
        var commands = harness.send(
            "CONNECT \(Self.challengedHost):443 HTTP/1.1\r\nHost: \(Self.challengedHost):443\r\n\r\n")
        // A TLS record that is no ClientHello (bytes that are not TLS at all never reach the challenge).
        commands += harness.send(.clientBytes(ProxySessionFuzzRegressionTests.brokenHandshakeRecord))
        commands += harness.send(.clientGone)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeRefused], "\(records)")
        #expect(records.first?.appTrust?.challenge == "wrong-host")
        #expect(Transcript(commands).connects.isEmpty)
        #expect(Transcript(commands).closesClient)
    }

    @Test func aRequestThroughTheChallengeIsOneFindingAnswered502AndNeverForwarded() throws {
        let harness = try Self.challengedHarness()
        var (client, commands) = try Self.acceptChallenge(harness)
        #expect(Self.challengeRecords(commands).isEmpty, "no verdict before a request: \(commands)")
        _ = client.write(Array("GET /v1 HTTP/1.1\r\nHost: \(Self.challengedHost)\r\n\r\n".utf8))
        let answer = harness.send(.clientBytes(client.takeOutbound()))
        commands += answer
        client.receive(Transcript(answer).clientBytes)
        #expect(Session.text(Session.readAll(client)).hasPrefix("HTTP/1.1 502 "))
        commands += harness.send(.clientGone)
        commands += harness.send(.timerFired)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeAccepted], "\(records)")
        #expect(records.first?.url == "https://api.example.com/v1")
        #expect(Transcript(commands).records.count == 1, "one record per challenged connection")
        #expect(Transcript(commands).connects.isEmpty, "nothing of a challenged connection reaches an origin")
        #expect(Transcript(answer).closesClient)
    }

    /// A CONNECT sent through the challenged tunnel is a request the client sent through the forged server like any
    /// other: a finding, not a 400 followed by a pass ("closed without sending a request").
    @Test func aCONNECTThroughTheChallengeIsAFindingToo() throws {
        let harness = try Self.challengedHarness()
        var (client, commands) = try Self.acceptChallenge(harness)
        _ = client.write(Array("CONNECT other.example.com:443 HTTP/1.1\r\nHost: other.example.com:443\r\n\r\n".utf8))
        let answer = harness.send(.clientBytes(client.takeOutbound()))
        commands += answer
        client.receive(Transcript(answer).clientBytes)
        #expect(Session.text(Session.readAll(client)).hasPrefix("HTTP/1.1 502 "))
        commands += harness.send(.clientGone)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeAccepted], "\(records)")
        #expect(Transcript(commands).records.count == 1, "one record per challenged connection")
        #expect(Transcript(commands).connects.isEmpty)
    }

    @Test func aClientThatClosesAfterTheChallengedHandshakeWithoutARequestIsOnePass() throws {
        let harness = try Self.challengedHarness()
        var (_, commands) = try Self.acceptChallenge(harness)
        commands += harness.send(.clientEOF)
        commands += harness.send(.clientGone)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeRefused], "\(records)")
        #expect(Transcript(commands).records.count == 1)
    }

    /// When the proxy itself ends a challenged connection before the client decided (its timeout, its shutdown),
    /// the pass says so: it only means the client sent nothing until then. A client's own close says nothing of it.
    @Test(arguments: [ProxyEvent.timerFired, .drain])
    func aPassAtACloseOfTheProxysOwnSaysTheProxyEndedIt(event: ProxyEvent) throws {
        let harness = try Self.challengedHarness()
        var (_, commands) = try Self.acceptChallenge(harness)
        var ended: [ProxyCommand] = []
        for _ in 0..<8 where !Transcript(ended).closesClient { ended += harness.send(event) }
        commands += ended
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeRefused], "\(records)")
        #expect(records.first?.rule.contains("it was the proxy that ended the connection") == true, "\(records)")
        let byClient = try Self.challengedHarness()
        var (_, clientCommands) = try Self.acceptChallenge(byClient)
        clientCommands += byClient.send(.clientGone)
        #expect(Self.challengeRecords(clientCommands).first?.rule.contains("the proxy that ended") == false)
    }

    /// Request bytes that never become a whole head (malformed, an HTTP/2 preface on the HTTP/1.1 connection, a head
    /// cut short by the header timeout or the client's close) still went through the forged server: a finding, never
    /// a pass, and nothing reaches an origin.
    @Test(arguments: [
        ("GET /v1 HTTP/1.1\r\nno colon here\r\n\r\n", ProxyEvent.clientGone),
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ProxyEvent.clientGone),
        ("GET /v1 HTTP/1.1\r\nHost: api.exa", ProxyEvent.timerFired),
        ("GET /v1 HTTP/1.1\r\nHost: api.exa", ProxyEvent.clientEOF),
    ])
    func requestBytesThroughTheChallengeAreAFindingEvenWithoutAWholeHead(bytes: String, then event: ProxyEvent) throws {
        let harness = try Self.challengedHarness()
        var (client, commands) = try Self.acceptChallenge(harness)
        _ = client.write(Array(bytes.utf8))
        commands += harness.send(.clientBytes(client.takeOutbound()))
        commands += harness.send(event)
        commands += harness.send(.clientGone)
        let records = Self.challengeRecords(commands)
        #expect(records.map(\.result) == [.challengeAccepted], "\(records)")
        #expect(Transcript(commands).records.count == 1, "one record per challenged connection")
        #expect(Transcript(commands).connects.isEmpty)
        #expect(Transcript(commands).closesClient)
    }

    /// A small deterministic generator for the walks below (SplitMix64).
    struct Walk {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }

    /// Challenged connections driven through random orders of what a driver may deliver (the handshake accepted or
    /// broken off, whole, partial or malformed requests, timers, drains, EOF, the client gone): each gets exactly
    /// one challenge record, a finding exactly when the client sent request bytes after the handshake, nothing
    /// reaches an origin, and nothing follows `.closeClient`.
    @Test(arguments: 0..<40)
    func everyChallengedConnectionGetsExactlyOneVerdict(seed: Int) throws {
        var walk = Walk(state: UInt64(seed) &* 7919)
        let harness = try Self.challengedHarness()
        let connect = "CONNECT \(Self.challengedHost):443 HTTP/1.1\r\nHost: \(Self.challengedHost):443\r\n\r\n"
        var commands: [ProxyCommand] = []
        var client: TLSConnection?
        var sentRequestBytes = false
        switch walk.next(3) {
        case 0:
            commands = harness.send(connect)
            commands += harness.send(.clientBytes(Array("\u{16}\u{03}\u{01}garbage".utf8)))
        case 1:
            commands = harness.send(connect)
            commands += harness.send([ProxyEvent.drain, .timerFired, .clientEOF][walk.next(3)])
        default:
            let accepted = try Self.acceptChallenge(harness)
            client = accepted.0
            commands = accepted.1
        }
        let requests = [
            "GET /a HTTP/1.1\r\nHost: \(Self.challengedHost)\r\n\r\n", "GET /partial HTTP/1.1\r\nHo",
            "BROKEN\r\n\r\n", "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab",
        ]
        var closed = Transcript(commands).closesClient
        for _ in 0..<4 where !closed {
            let answer: [ProxyCommand]
            switch walk.next(6) {
            case 0, 1:
                guard let client else { continue }
                _ = client.write(Array(requests[walk.next(requests.count)].utf8))
                sentRequestBytes = true
                answer = harness.send(.clientBytes(client.takeOutbound()))
            case 2: answer = harness.send(.timerFired)
            case 3: answer = harness.send(.drain)
            case 4: answer = harness.send(.clientEOF)
            default: answer = harness.send(.clientGone)
            }
            commands += answer
            closed = Transcript(answer).closesClient
        }
        if !closed { commands += harness.send(.clientGone) }
        let after = harness.send(.timerFired) + harness.send(.clientGone)
        #expect(after.isEmpty, "nothing after the close: \(after)")
        let records = Transcript(commands).records
        #expect(records.count == 1, "\(records.map { "\($0.result) \($0.rule)" })")
        #expect(records.allSatisfy { $0.appTrust?.challenge == "wrong-host" })
        #expect(records.map(\.result) == [sentRequestBytes ? .challengeAccepted : .challengeRefused])
        #expect(Transcript(commands).connects.isEmpty)
    }

    // MARK: - Tunnels and upgrades through lane 0

    /// `host:port` of every upstream handed back to the pool (`releaseUpstream`), in order.
    static func releases(_ commands: [ProxyCommand]) -> [String] {
        Transcript(commands).releases.map { "\($0.key.host):\($0.key.port)" }
    }

    /// A keep-alive cleartext request answered on a pooled-able upstream of `harness`'s session (task 1).
    static func oneRequest(_ harness: Session.Harness) -> [ProxyCommand] {
        var commands = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        commands += harness.send(.upstreamConnected)
        commands += harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx".utf8)))
        #expect(Transcript(commands).records.map(\.status) == [200])
        return commands
    }

    /// A passthrough CONNECT after a request on the same proxy connection: the idle upstream goes back to the pool
    /// before the probe connects; the probe's one record comes when the tunnel opens, the 200 after it, then the
    /// bytes the client sent early, and raw bytes both ways until the origin closes.
    @Test func aPassthroughCONNECTAfterARequestReleasesTheIdleUpstreamThenProbesAndRelays() throws {
        var settings = ProxySettings()
        settings.passthroughHosts = ["secure.pass.test"]
        let harness = try Session.Harness(settings: settings)
        _ = Self.oneRequest(harness)
        let connect = harness.send(
            "CONNECT secure.pass.test:443 HTTP/1.1\r\nHost: secure.pass.test:443\r\n\r\nEARLY")
        #expect(Self.releases(connect) == ["localhost:9000"], "\(connect)")
        #expect(Transcript(connect).connects.map(\.authority) == ["secure.pass.test:443"])
        #expect(Transcript(connect).connects.map(\.reuse) == [nil], "a probe never takes a pooled connection")
        #expect(Transcript(connect).clientBytes.isEmpty, "no answer before the probe's verdict")
        #expect(Transcript(connect).pausesClientReads)
        // The probe's handshake, judged like a request's.
        let origin = try harness.originServer(host: "secure.pass.test")
        var commands = harness.send(.upstreamConnected)
        var all = commands
        for _ in 0..<10 where Transcript(all).connects.isEmpty {
            origin.receive(Transcript(commands).upstreamBytes)
            _ = origin.handshake()
            guard origin.hasOutbound else { break }
            commands = harness.send(.upstreamBytes(origin.takeOutbound()))
            all += commands
        }
        #expect(
            Transcript(all).connects.map(\.authority) == ["secure.pass.test:443"],
            "the raw tunnel's own connection: \(all)")
        #expect(Transcript(all).records.isEmpty, "the probe's record waits for the tunnel")
        let opened = harness.send(.upstreamConnected)
        let records = Transcript(opened).records
        #expect(records.map(\.method) == ["CONNECT"])
        #expect(records.map(\.status) == [200])
        #expect(records.first?.taskID.hasSuffix(".2") == true, "\(records.map(\.taskID))")
        #expect(Transcript(opened).clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
        #expect(Transcript(opened).upstreamText == "EARLY")
        #expect(Transcript(opened).resumesClientReads)
        #expect(Transcript(opened).timers.last == .cancel, "a relaying tunnel has no timer: \(opened)")
        #expect(Transcript(harness.send("more")).upstreamText == "more")
        #expect(Transcript(harness.send(.upstreamBytes(Array("back".utf8)))).clientText == "back")
        let end = harness.send(.upstreamEOF)
        #expect(Transcript(end).closesClient)
        #expect(Transcript(end).records.isEmpty, "one record per tunnel")
    }

    /// A left-alone host's CONNECT after a request: the idle upstream goes back to the pool, the blind tunnel opens
    /// without a probe or a record.
    @Test func aBlindTunnelAfterARequestReleasesTheIdleUpstreamAndIsNotRecorded() throws {
        var settings = ProxySettings()
        settings.hostFilter = try HostFilter(mode: .ignore, patterns: ["ignored\\.test"])
        let harness = try Session.Harness(settings: settings)
        _ = Self.oneRequest(harness)
        let connect = harness.send("CONNECT ignored.test:443 HTTP/1.1\r\nHost: ignored.test:443\r\n\r\nhello")
        #expect(Self.releases(connect) == ["localhost:9000"], "\(connect)")
        #expect(Transcript(connect).connects.map(\.authority) == ["ignored.test:443"])
        let opened = harness.send(.upstreamConnected)
        #expect(Transcript(opened).records.isEmpty)
        #expect(Transcript(opened).clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
        #expect(Transcript(opened).upstreamText == "hello")
        let end = harness.send(.clientEOF)
        #expect(Transcript(end).closesClient)
        #expect(Transcript(end).records.isEmpty)
    }

    /// 101 Switching Protocols on lane 0: the response and the origin's first raw bytes reach the client, what the
    /// client pipelined behind its request (held by the parser) reaches the origin, the exchange is recorded once,
    /// the timer stops and raw bytes flow both ways from then on.
    @Test func anUpgradeOnAClientConnectionRelaysTheHeldBytesAndStopsTheTimer() throws {
        let harness = try Session.Harness()
        let request =
            "GET http://localhost:9000/ws HTTP/1.1\r\nHost: localhost:9000\r\nConnection: Upgrade\r\n"
            + "Upgrade: websocket\r\n\r\nFRAME1"
        _ = harness.send(request)
        let sent = harness.send(.upstreamConnected)
        #expect(!Transcript(sent).upstreamText.contains("FRAME1"), "held until the origin switches")
        let switched = harness.send(
            .upstreamBytes(
                Array(
                    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nSERVER1".utf8)
            ))
        #expect(Transcript(switched).clientText.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"))
        #expect(Transcript(switched).clientText.hasSuffix("\r\n\r\nSERVER1"))
        #expect(Transcript(switched).upstreamText == "FRAME1")
        #expect(Transcript(switched).records.map(\.status) == [101])
        #expect(Transcript(switched).timers.last == .cancel, "a relaying connection has no timer: \(switched)")
        #expect(Transcript(harness.send("FRAME2")).upstreamText == "FRAME2")
        #expect(Transcript(harness.send(.upstreamBytes(Array("SERVER2".utf8)))).clientText == "SERVER2")
        let end = harness.send(.upstreamEOF)
        #expect(Transcript(end).closesClient)
        #expect(Transcript(end).records.isEmpty)
    }

    // MARK: - Stream legs

    /// A stream's leg whose response ends before its request body: the exchange finishes (one record) when the
    /// body ends, the leg's `finished(keepAlive: false)` shuts it down, the lane closes once, and nothing for that
    /// lane follows its close; the next stream gets a lane of its own.
    @Test func aStreamAnsweredBeforeItsBodyEndedClosesItsLaneOnceTheBodyEnds() throws {
        typealias H2 = HTTP2FrontendTests
        let harness = try H2.Harness()
        let client = try #require(harness.client)
        let (stream, _) = try harness.request(
            "/upload", method: "POST", headers: [HTTP2Header("content-length", "10")], body: Array("hello".utf8),
            endStream: false)
        harness.connect(lane: 1)
        let answered = harness.respond(lane: 1, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
        #expect(harness.stream(stream).head?.first { $0.name == ":status" }?.value == "413")
        #expect(Transcript(answered).records.isEmpty, "the exchange ends with its request")
        #expect(!Transcript(answered).names.contains("1:closeClient"))
        try client.submitData(stream: stream, bytes: Array("world".utf8), endStream: true)
        let ended = harness.flushClient()
        let records = Transcript(ended).records
        #expect(records.map(\.status) == [413])
        #expect(records.first?.bytesFromClient == 10)
        let names = Transcript(ended).names
        let close = try #require(names.firstIndex(of: "1:closeClient"), "\(names)")
        #expect(names.filter { $0 == "1:closeClient" }.count == 1)
        #expect(!names[(close + 1)...].contains { $0.hasPrefix("1:") }, "lane 1 after its close: \(names)")
        #expect(harness.received(lane: 1).hasSuffix("helloworld"))
        let (_, next) = try harness.request("/next")
        #expect(Transcript(next).laneConnects.map(\.lane) == [2])
    }
}
