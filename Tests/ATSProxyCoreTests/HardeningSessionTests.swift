import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// Playbook regressions for the faults of the hardening review (issue 17): local targets reached from another
/// machine, the proxy reached by another spelling of its address, host names that are no DNS names, requests
/// inside a tunnel that name another origin, repeated Content-Length, and exchanges that ended without a record.
@Suite struct HardeningSessionTests {
    typealias Support = ProxySessionTests

    /// A harness whose session serves a client at `clientAddress`.
    static func harness(client clientAddress: String, settings: ProxySettings = ProxySettings()) throws
        -> ProxySessionTests.Harness
    {
        let harness = try ProxySessionTests.Harness(settings: settings)
        harness.session = ProxySession(
            services: harness.session.services, clientAddress: clientAddress, connectionNumber: 1)
        _ = harness.session.start()
        return harness
    }

    /// The status line's version and code (`HTTP/1.1 403`) of what the client was sent.
    static func status(_ commands: [ProxyCommand]) -> String {
        String(Transcript(commands).clientText.utf8.prefix(12))!
    }

    // MARK: - Finding 1: local targets from another machine

    static let localTargets = [
        "127.0.0.1:22", "127.0.0.1:65000", "localhost:5432", "LocalHost.:80", "db.localhost:80", "127.1:22",
        "0177.0.0.1:22", "2130706433:22", "0x7f000001:22", "[::1]:22", "[::ffff:127.0.0.1]:22", "0.0.0.0:22",
        "[::]:22", "192.168.77.1:8000",
    ]

    @Test(arguments: localTargets)
    func aLANClientIsRefusedTheProxyHostsOwnServicesBeforeAnyConnection(target: String) throws {
        var settings = ProxySettings()
        settings.localTargets = LocalTargetPolicy(ownAddresses: [IPAddress(parsing: "192.168.77.1")!])
        // CONNECT: the same 403 whatever the port, before any 200, leaf or connection: no port scan.
        let tunnel = try Self.harness(client: "192.168.1.20:50000", settings: settings)
        let connect = tunnel.send("CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n\r\n")
        #expect(Self.status(connect) == "HTTP/1.1 403", "\(target)")
        #expect(Transcript(connect).clientText.contains("--allow-local-targets"))
        #expect(Transcript(connect).connects.isEmpty)
        #expect(Transcript(connect).closesClient)
        let record = try #require(Transcript(connect).records.first)
        #expect(record.result == .refused && record.status == 403 && record.method == "CONNECT")
        // Blocked before any byte reached a server, with the code a device's task would end with (never `?`).
        #expect(LoadOutcome(record) == .blocked && LoadOutcome.code(of: record) == "-1004")
        let line = DiagnosticsFormatter(level: .summary).jsonLine(record)
        #expect(line.contains(#""outcome":"blocked""#) && line.contains(#""errorCode":-1004"#), "\(line)")
        // A cleartext request in absolute form: refused the same way.
        let plain = try Self.harness(client: "192.168.1.20:50000", settings: settings)
        let get = plain.send("GET http://\(target)/secret HTTP/1.1\r\nHost: \(target)\r\n\r\n")
        #expect(Self.status(get) == "HTTP/1.1 403", "\(target)")
        #expect(Transcript(get).connects.isEmpty)
        #expect(Transcript(get).records.count == 1)
    }

    @Test func theAnswerToARefusedTargetIsTheSameForEveryPort() throws {
        let answers = try [22, 80, 5432, 65000].map { port in
            let harness = try Self.harness(client: "10.0.0.9:40000")
            return Support.text(
                Transcript(harness.send("CONNECT 127.0.0.1:\(port) HTTP/1.1\r\nHost: x\r\n\r\n")).clientBytes)
        }
        #expect(Set(answers).count == 1, "\(answers)")
    }

    @Test func loopbackClientsAndTheOptInKeepReachingLocalTargets() throws {
        for client in ["127.0.0.1:5000", "[::1]:5000"] {
            let harness = try Self.harness(client: client)
            let commands = harness.send("GET http://127.0.0.1:9000/ HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n\r\n")
            #expect(Transcript(commands).connects.map(\.authority) == ["127.0.0.1:9000"], "\(client)")
        }
        var settings = ProxySettings()
        settings.localTargets = LocalTargetPolicy(allowsRemoteClients: true)
        let allowed = try Self.harness(client: "192.168.1.20:50000", settings: settings)
        let commands = allowed.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        #expect(Transcript(commands).connects.map(\.authority) == ["localhost:9000"])
        // Other hosts are never affected.
        let lan = try Self.harness(client: "192.168.1.20:50000")
        let other = lan.send("CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
        #expect(Self.status(other) == "HTTP/1.1 200")
    }

    @Test func theLocalTargetPolicyReadsClientAddressesAndHostSpellings() {
        let policy = LocalTargetPolicy(ownAddresses: [IPAddress(parsing: "10.1.2.3")!])
        #expect(LocalTargetPolicy.isLoopbackClient("127.0.0.1:1"))
        #expect(LocalTargetPolicy.isLoopbackClient("127.9.9.9:1"))
        #expect(LocalTargetPolicy.isLoopbackClient("[::1]:1"))
        #expect(LocalTargetPolicy.isLoopbackClient("[::ffff:127.0.0.1]:1"))
        #expect(!LocalTargetPolicy.isLoopbackClient("192.168.1.2:1"))
        #expect(!LocalTargetPolicy.isLoopbackClient("unknown"))
        #expect(policy.namesThisMachine("10.1.2.3"))
        #expect(policy.namesThisMachine("0xa.1.2.3"))
        #expect(!policy.namesThisMachine("10.1.2.4"))
        #expect(!policy.namesThisMachine("example.com"))
        #expect(!policy.namesThisMachine("localhost.example.com"))
        #expect(policy.refuses(host: "localhost", clientAddress: "unknown"))
    }

    // MARK: - Finding 4: the proxy itself under another spelling

    @Test(arguments: ["127.1", "0177.0.0.1", "2130706433", "0x7f000001", "0x7F.0.0.1", "[::ffff:127.0.0.1]"])
    func everySpellingOfTheProxysAddressIsALoop(host: String) throws {
        var settings = ProxySettings()
        settings.selfAuthorities = ["127.0.0.1:8080"]
        let tunnel = try ProxySessionTests.Harness(settings: settings)
        let connect = tunnel.send("CONNECT \(host):8080 HTTP/1.1\r\nHost: \(host):8080\r\n\r\n")
        #expect(Self.status(connect) == "HTTP/1.1 508", "\(host)")
        #expect(Transcript(connect).connects.isEmpty)
        let plain = try ProxySessionTests.Harness(settings: settings)
        let get = plain.send("GET http://\(host):8080/ HTTP/1.1\r\nHost: \(host):8080\r\n\r\n")
        #expect(Self.status(get) == "HTTP/1.1 508", "\(host)")
        #expect(Transcript(get).connects.isEmpty)
    }

    @Test func aLegacyNumberIsConnectedToAndDecidedAsTheAddressItMeans() throws {
        let harness = try ProxySessionTests.Harness()
        let commands = harness.send("GET http://2130706433:9000/x HTTP/1.1\r\nHost: 2130706433:9000\r\n\r\n")
        // Loopback: exempt from ATS like 127.0.0.1 (and not an unqualified name), connected by its address.
        #expect(Transcript(commands).connects.map(\.authority) == ["127.0.0.1:9000"])
    }

    // MARK: - Finding 5: host names that are no DNS names

    @Test(arguments: [
        "ex%61mple.test:443", "a!b.test:443", "a..b:443", "a,b:443", "[fe80::1%25en0]:443", "[1::2::3]:443",
    ])
    func aHostThatIsNoDNSNameGets400BeforeAnyLeaf(target: String) throws {
        let harness = try ProxySessionTests.Harness()
        let commands = harness.send("CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n\r\n")
        #expect(Self.status(commands) == "HTTP/1.1 400", "\(target)")
        #expect(Transcript(commands).connects.isEmpty)
        #expect(Transcript(commands).closesClient)
    }

    @Test func aHostFieldThatIsNoDNSNameGets400() throws {
        let harness = try ProxySessionTests.Harness()
        let commands = harness.send("GET /x HTTP/1.1\r\nHost: ex%61mple.test\r\n\r\n")
        #expect(Self.status(commands) == "HTTP/1.1 400")
    }

    // MARK: - Finding 3: another authority inside a tunnel

    /// Sends `request` inside an intercepted tunnel to api.example.com:443 and returns the client's plaintext.
    static func insideTunnel(_ request: String) throws -> (answer: String, commands: [ProxyCommand]) {
        let harness = try ProxySessionTests.Harness()
        let client = try Support.establishTunnel(harness, host: "api.example.com")
        #expect(client.write(Array(request.utf8)) > 0)
        let commands = harness.send(.clientBytes(client.takeOutbound()))
        client.receive(Transcript(commands).clientBytes)
        return (Support.text(Support.readAll(client)), commands)
    }

    @Test(arguments: [
        "GET /x HTTP/1.1\r\nHost: b.test:8443\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: api.example.com.evil.test\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: api.example.com:4430\r\n\r\n",
        "GET https://b.test:8443/x HTTP/1.1\r\nHost: b.test:8443\r\n\r\n",
        "GET https://b.test/x HTTP/1.1\r\nHost: b.test\r\n\r\n",
        "GET http://api.example.com:443/x HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
    ])
    func aRequestForAnotherOriginInsideTheTunnelGets421(request: String) throws {
        let (answer, commands) = try Self.insideTunnel(request)
        #expect(answer.hasPrefix("HTTP/1.1 421 Misdirected Request\r\n"), "\(answer)")
        #expect(Transcript(commands).connects.isEmpty)
        let record = try #require(Transcript(commands).records.first)
        #expect(record.status == 421 && record.result == .refused)
        #expect(LoadOutcome(record) == .blocked && record.errorCode == -1004)
        #expect(Transcript(commands).records.count == 1)
    }

    @Test func anotherSchemeInsideTheTunnelGets400() throws {
        let (answer, commands) = try Self.insideTunnel(
            "GET ftp://api.example.com:443/ HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
        #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer)")
        #expect(Transcript(commands).connects.isEmpty)
        #expect(Transcript(commands).records.first?.status == 400)
        #expect(Transcript(commands).records.first?.errorCode == -1002)
    }

    @Test(arguments: [
        "GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "GET /x HTTP/1.1\r\nHost: API.example.com:443\r\n\r\n",
        "GET https://api.example.com/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "GET /x HTTP/1.0\r\n\r\n",
    ])
    func theTunnelsOwnOriginInAnySpellingIsForwarded(request: String) throws {
        let (_, commands) = try Self.insideTunnel(request)
        #expect(Transcript(commands).connects.map(\.authority) == ["api.example.com:443"], "\(request)")
    }

    // MARK: - Finding 2: one Content-Length

    static func contentLengthFields(_ text: String) -> [String] {
        text.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("content-length:") }.map(String.init)
    }

    @Test(arguments: [
        "Content-Length: 5, 5\r\n", "Content-Length: 5\r\nContent-Length: 5\r\n", "Content-Length: 005\r\n",
    ])
    func agreeingContentLengthsAreForwardedAsOneField(fields: String) throws {
        let harness = try ProxySessionTests.Harness()
        _ = harness.send("POST http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\(fields)\r\nhello")
        let forwarded = Transcript(harness.send(.upstreamConnected)).upstreamText
        #expect(Self.contentLengthFields(forwarded) == ["Content-Length: 5"], "\(forwarded)")
        #expect(forwarded.hasSuffix("\r\n\r\nhello"))
        let answer = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\n\(fields)\r\nworld".utf8)))
        let response = Transcript(answer).clientText
        #expect(Self.contentLengthFields(response) == ["Content-Length: 5"], "\(response)")
        #expect(response.hasSuffix("\r\n\r\nworld"))
    }

    @Test func differingContentLengthsAreRefusedBothWays() throws {
        let request = try ProxySessionTests.Harness()
        let refused = request.send(
            "POST http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\nContent-Length: 5, 6\r\n\r\nhello")
        #expect(Self.status(refused) == "HTTP/1.1 400")
        #expect(Transcript(refused).connects.isEmpty)
        let response = try ProxySessionTests.Harness()
        _ = response.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        _ = response.send(.upstreamConnected)
        let answer = response.send(
            .upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nworld".utf8)))
        #expect(Self.status(answer) == "HTTP/1.1 502")
        #expect(Transcript(answer).records.first?.errorCode == -1011)
    }

    // MARK: - Finding 7: every exchange ends in exactly one record

    /// Runs `steps` after a cleartext GET to localhost:9000 and returns every record written on the way.
    static func records(after steps: [ProxyEvent], settings: ProxySettings = ProxySettings()) throws
        -> (records: [RequestRecord], closed: Bool)
    {
        let harness = try ProxySessionTests.Harness(settings: settings)
        var playbook = Playbook(harness.session, now: harness.now)
        let request = ProxyEvent.clientBytes(
            Array("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n".utf8))
        // Whatever happens later (the client leaving, another timer) adds nothing.
        let all = playbook.play([request] + steps + [.clientGone])
        return (all.records, all.closesClient)
    }

    /// A response head and part of its body (computed: a stored static's buffer reads as a leak to LeakSanitizer).
    static var head: ProxyEvent {
        .upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf".utf8))
    }

    @Test func aCompletedExchangeHasOneRecord() throws {
        let (records, _) = try Self.records(after: [
            .upstreamConnected, .upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)),
        ])
        #expect(records.map(\.result) == [.completed])
    }

    @Test func aBlockedLoadHasOneRecord() throws {
        let harness = try ProxySessionTests.Harness()
        var all = harness.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        all += harness.send(.clientGone)
        #expect(Transcript(all).records.map(\.result) == [.blockedCleartext])
    }

    @Test func anUpstreamFailureHasOneRecord() throws {
        let (records, _) = try Self.records(after: [.upstreamConnectFailed(.refused)])
        #expect(records.map(\.result) == [.failed])
        #expect(records.first?.errorCode == -1004)
    }

    @Test func aClientGoneMidResponseHasOneRecord() throws {
        let (records, _) = try Self.records(after: [.upstreamConnected, Self.head])
        #expect(records.map(\.result) == [.failed])
        #expect(records.first?.status == 200)
    }

    @Test func anExchangeTimeoutAfterTheHeadHasOneRecord() throws {
        var settings = ProxySettings()
        settings.exchangeTimeout = 7
        let harness = try ProxySessionTests.Harness(settings: settings)
        var all = harness.send("GET http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\n\r\n")
        all += harness.send(.upstreamConnected)
        all += harness.send(Self.head)
        var fired: [ProxyCommand] = []
        // The first firing may be the quiet stage that frees TLS buffers; the timeout follows.
        for _ in 0..<3 where !Transcript(fired).closesClient { fired += harness.send(.timerFired) }
        #expect(Transcript(fired).closesClient)
        all += fired + harness.send(.clientGone)
        let records = Transcript(all).records
        #expect(records.count == 1)
        let record = try #require(records.first)
        #expect(record.result == .failed && record.status == 200 && record.errorCode == -1001)
        #expect(record.rule.contains("--exchange-timeout") && record.rule.contains("after the response head"))
        #expect(record.bytesToClient == 4)
    }

    @Test func aClientThatStopsSendingItsBodyIsRecordedAtTheTimeout() throws {
        let harness = try ProxySessionTests.Harness()
        var all = harness.send(
            "POST http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\nContent-Length: 10\r\n\r\nabc")
        all += harness.send(.upstreamConnected)
        all += harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)))
        for _ in 0..<3 where !Transcript(all).closesClient { all += harness.send(.timerFired) }
        #expect(Transcript(all).closesClient)
        #expect(Transcript(all).records.map(\.result) == [.failed])
    }

    @Test func anExchangeDrainedAtShutdownIsRecordedOnceWhetherItFinishesOrIsCut() throws {
        let finished = try Self.records(after: [
            .upstreamConnected, .drain, .upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)),
        ])
        #expect(finished.records.map(\.result) == [.completed])
        #expect(finished.closed)
        // The grace period ends (a second drain) before the origin finishes.
        let cut = try Self.records(after: [.upstreamConnected, Self.head, .drain, .drain])
        #expect(cut.records.map(\.result) == [.failed])
        #expect(cut.records.first?.rule.contains("grace period") == true)
        #expect(cut.closed)
    }

    @Test func aMalformedRequestBodyIsRecordedOnce() throws {
        let harness = try ProxySessionTests.Harness()
        var all = harness.send(
            "POST http://localhost:9000/ HTTP/1.1\r\nHost: localhost:9000\r\nTransfer-Encoding: chunked\r\n\r\n")
        all += harness.send(.upstreamConnected)
        all += harness.send(.clientBytes(Array("zz\r\n".utf8)))
        all += harness.send(.clientGone)
        #expect(Transcript(all).closesClient)
        #expect(Transcript(all).records.count == 1)
    }
}
