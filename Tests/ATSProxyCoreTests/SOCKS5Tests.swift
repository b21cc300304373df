import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// SOCKS5 on the proxy's port: `SOCKS5Negotiation` (greeting, method selection, request; every malformed or
/// unsupported input answered with the reply RFC 1928 gives it) and the session's SOCKS5 tunnels, which are decided
/// like CONNECT ones and recorded with `SOCKS5+…` routes; SOCKS4 is refused with a record.
@Suite struct SOCKS5Tests {
    typealias Harness = ProxySessionTests.Harness
    typealias S = ProxySessionTests

    static let greeting: [UInt8] = [0x05, 0x01, 0x00]
    static let selected: [UInt8] = [0x05, 0x00]
    static let success = SOCKS5Reply.bytes(.succeeded)

    /// A CONNECT request for a domain name (ATYP 3).
    static func request(domain: String, port: Int, command: UInt8 = 0x01) -> [UInt8] {
        [0x05, command, 0x00, 0x03, UInt8(domain.utf8.count)] + Array(domain.utf8) + [
            UInt8(port >> 8), UInt8(port & 0xFF),
        ]
    }

    // MARK: - The negotiation

    @Test func aGreetingAndADomainRequestByteByByte() {
        var negotiation = SOCKS5Negotiation()
        let bytes = Self.greeting + Self.request(domain: "api.example.test", port: 443)
        var replies: [UInt8] = []
        for (index, byte) in bytes.enumerated() {
            switch negotiation.feed([byte]) {
            case .needMore(let reply):
                #expect(index < bytes.count - 1, "needs more after the last byte")
                replies += reply
            case .connect(let target, let reply, let rest):
                #expect(index == bytes.count - 1, "a target before the request was whole (byte \(index))")
                replies += reply
                #expect(target == SOCKS5Target(host: "api.example.test", port: 443, addressType: 3))
                #expect(rest.isEmpty)
            case .failed(_, let reason):
                Issue.record("failed at byte \(index): \(reason)")
                return
            }
        }
        // The method selection went out as soon as the greeting was whole, and only once.
        #expect(replies == Self.selected)
    }

    @Test func aGreetingRequestAndDataInOneSegment() {
        var negotiation = SOCKS5Negotiation()
        let data = Array("GET / HTTP/1.1\r\n".utf8)
        let progress = negotiation.feed(Self.greeting + Self.request(domain: "a.test", port: 80) + data)
        #expect(
            progress
                == .connect(SOCKS5Target(host: "a.test", port: 80, addressType: 3), reply: Self.selected, rest: data))
    }

    @Test func ipv4AndIPv6Addresses() {
        var four = SOCKS5Negotiation()
        _ = four.feed(Self.greeting)
        #expect(
            four.feed([0x05, 0x01, 0x00, 0x01, 127, 0, 0, 1, 0x1F, 0x90])
                == .connect(SOCKS5Target(host: "127.0.0.1", port: 8080, addressType: 1), reply: [], rest: []))
        var six = SOCKS5Negotiation()
        _ = six.feed(Self.greeting)
        let loopback: [UInt8] = Array(repeating: 0, count: 15) + [1]
        #expect(
            six.feed([0x05, 0x01, 0x00, 0x04] + loopback + [0x01, 0xBB])
                == .connect(SOCKS5Target(host: "::1", port: 443, addressType: 4), reply: [], rest: []))
    }

    @Test func ipv6TextIsRFC5952() {
        func text(_ groups: [UInt16]) -> String {
            SOCKS5Target.ipv6Text(groups.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] })
        }
        #expect(text([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]) == "2001:db8::1")
        #expect(text([0, 0, 0, 0, 0, 0, 0, 0]) == "::")
        #expect(text([0x2001, 0xdb8, 0, 1, 0, 0, 0, 1]) == "2001:db8:0:1::1")
        #expect(text([0x2001, 0xdb8, 0, 1, 1, 1, 1, 1]) == "2001:db8:0:1:1:1:1:1")
        #expect(text([0xfe80, 0, 0, 0xabcd, 0, 0, 0, 0]) == "fe80:0:0:abcd::")
    }

    /// Each malformed or unsupported input gets the reply RFC 1928 (or the method selection) gives it.
    @Test(
        arguments: [
            ([0x05, 0x00], [0x05, 0xFF], "no authentication method"),
            ([0x05, 0x01, 0x02], [0x05, 0xFF], "username/password"),
            ([0x05, 0x02, 0x01, 0x80], [0x05, 0xFF], "GSSAPI, method 128"),
            (Self.greeting + request(domain: "a.test", port: 80, command: 0x02), Self.selected + [0x05, 0x07], "BIND"),
            (
                Self.greeting + request(domain: "a.test", port: 80, command: 0x03), Self.selected + [0x05, 0x07],
                "UDP ASSOCIATE"
            ),
            (Self.greeting + [0x05, 0x01, 0x00, 0x09, 1, 2], Self.selected + [0x05, 0x08], "address type 9"),
            (Self.greeting + [0x05, 0x01, 0x00, 0x03, 0x00, 0, 80], Self.selected + [0x05, 0x01], "empty domain"),
            (Self.greeting + [0x04, 0x01, 0x00, 0x01], Self.selected + [0x05, 0x01], "version byte 4"),
            (Self.greeting + request(domain: "a b", port: 80), Self.selected + [0x05, 0x01], "not a host name"),
            (
                Self.greeting + request(domain: "x@pinned.example", port: 443), Self.selected + [0x05, 0x01],
                "not a host name"
            ),
            (Self.greeting + request(domain: "127.0.0.1/", port: 80), Self.selected + [0x05, 0x01], "not a host name"),
            (Self.greeting + request(domain: "a.test", port: 0), Self.selected + [0x05, 0x01], "port 0"),
        ] as [([UInt8], [UInt8], String)])
    func refusedInputs(input: [UInt8], replyPrefix: [UInt8], reason: String) {
        var negotiation = SOCKS5Negotiation()
        guard case .failed(let reply, let why) = negotiation.feed(input) else {
            Issue.record("\(input) was not refused")
            return
        }
        #expect(Array(reply.prefix(replyPrefix.count)) == replyPrefix)
        #expect(why.contains(reason), "\(why)")
    }

    /// Truncated greetings and requests only ever wait: nothing is granted, nothing is refused early.
    @Test func truncatedInputsWait() {
        let whole = Self.greeting + Self.request(domain: String(repeating: "a", count: 255), port: 443)
        for count in 1..<whole.count {
            var negotiation = SOCKS5Negotiation()
            let progress = negotiation.feed(Array(whole.prefix(count)))
            guard case .needMore = progress else {
                Issue.record("after \(count) bytes: \(progress)")
                return
            }
        }
    }

    // MARK: - The session

    static func socksConnect(_ harness: Harness, _ domain: String, _ port: Int) -> [ProxyCommand] {
        let greeting = harness.send(.clientBytes(Self.greeting))
        #expect(Transcript(greeting).clientBytes == Self.selected)
        let commands = harness.send(.clientBytes(Self.request(domain: domain, port: port)))
        #expect(Transcript(commands).clientBytes == Self.success)
        #expect(Transcript(commands).connects.isEmpty, "nothing is connected before the client's first bytes")
        return commands
    }

    @Test func cleartextHTTPInsideASOCKS5TunnelIsDecidedAndRecordedAsSOCKS5PlusHTTP() throws {
        let harness = try Harness(ats: TunnelDetectionTests.allowing)
        _ = Self.socksConnect(harness, "plain.test", 8081)
        let commands = harness.send("GET /feed HTTP/1.1\r\nHost: plain.test:8081\r\n\r\n")
        let response = Transcript(commands).clientText
        #expect(response.hasPrefix("HTTP/1.1 403 Forbidden\r\n"), "\(response)")
        #expect(response.contains("X-ATS-Error: -1022\r\n"))
        let record = try #require(Transcript(commands).records.first)
        #expect(record.result == .blockedCleartext)
        #expect(record.url == "http://plain.test:8081/feed")
        #expect(record.route == .socks5HTTP)
        var formatter = DiagnosticsFormatter(level: .summary)
        #expect(formatter.text(record).last?.contains("/feed [via SOCKS5+HTTP] → blocked -1022") == true)

        // An allowed host on another connection: relayed.
        let allowed = try Harness(ats: TunnelDetectionTests.allowing)
        _ = Self.socksConnect(allowed, "allowed.test", 80)
        let request = allowed.send("GET /a HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        #expect(Transcript(request).connects.map(\.authority) == ["allowed.test:80"])
    }

    @Test func aTLSClientInsideASOCKS5TunnelIsInterceptedWithAMintedLeaf() throws {
        let harness = try Harness()
        _ = Self.socksConnect(harness, "api.example.test", 443)
        let clientContext = try TLSContext(role: .client)
        try clientContext.setVersions(minimum: .tls12, maximum: .tls13)
        let client = try TLSConnection(context: clientContext, serverName: "api.example.test")
        for _ in 0..<10 {
            let progress = client.handshake()
            if progress == .complete && !client.hasOutbound { break }
            if case .failed(let failure) = progress { Issue.record("client handshake failed: \(failure)") }
            client.receive(Transcript(harness.send(.clientBytes(client.takeOutbound()))).clientBytes)
        }
        #expect(client.state == .established)
        #expect(harness.session.leg.route == .socks5TLS)
    }

    @Test func everythingTheClientSendsAtOnceIsHandled() throws {
        let harness = try Harness(ats: TunnelDetectionTests.allowing)
        let commands = harness.send(
            .clientBytes(
                Self.greeting + Self.request(domain: "plain.test", port: 80)
                    + Array("GET /x HTTP/1.1\r\nHost: plain.test\r\n\r\n".utf8)))
        let written = Transcript(commands).clientBytes
        #expect(Array(written.prefix(12)) == Self.selected + Self.success)
        #expect(S.text(Array(written.dropFirst(12))).hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        #expect(Transcript(commands).records.map(\.route) == [.socks5HTTP])
    }

    @Test func aBINDIsRefusedAndClosedWithoutARecord() throws {
        let harness = try Harness()
        _ = harness.send(.clientBytes(Self.greeting))
        let commands = harness.send(.clientBytes(Self.request(domain: "a.test", port: 80, command: 0x02)))
        #expect(Transcript(commands).clientBytes == SOCKS5Reply.bytes(.commandNotSupported))
        #expect(Transcript(commands).closesClient)
        #expect(Transcript(commands).records.isEmpty)
    }

    @Test func aSilentClientAfterTheReplyIsClosedAndRecorded() throws {
        let harness = try Harness()
        _ = Self.socksConnect(harness, "quiet.test", 443)
        harness.now += 61
        let commands = harness.send(.timerFired)
        #expect(Transcript(commands).closesClient)
        let record = try #require(Transcript(commands).records.first)
        #expect(record.route == .socks5Raw)
        #expect(
            record.rule.contains("the client sent nothing within 60 s after the SOCKS5 success reply"), "\(record.rule)"
        )
    }

    @Test func aHandshakeThatStallsEndsAtTheHeaderTimeout() throws {
        let harness = try Harness()
        let first = harness.send(.clientBytes([0x05, 0x02]))
        #expect(Transcript(first).armedTimers.contains(30), "\(first)")
        harness.now += 31
        let commands = harness.send(.timerFired)
        #expect(Transcript(commands).closesClient)
        #expect(Transcript(commands).clientBytes.isEmpty)
    }

    @Test func aLoopToTheProxyItselfIsASOCKS5Refusal() throws {
        var settings = ProxySettings()
        settings.selfAuthorities = ["127.0.0.1:8080"]
        let harness = try Harness(settings: settings)
        _ = harness.send(.clientBytes(Self.greeting))
        let commands = harness.send(.clientBytes([0x05, 0x01, 0x00, 0x01, 127, 0, 0, 1, 0x1F, 0x90]))
        let written = Transcript(commands).clientBytes
        // 508 Loop Detected for an HTTP client: "not allowed by ruleset" for a SOCKS5 one, and no HTTP text.
        #expect(written == SOCKS5Reply.bytes(.notAllowedByRuleset))
        #expect(Transcript(commands).closesClient)
    }

    @Test func socks4IsRefusedWithARecordThatNamesTheWayOut() throws {
        let harness = try Harness()
        // SOCKS4a: CONNECT to example.test:80, user "u".
        let request: [UInt8] =
            [0x04, 0x01, 0x00, 0x50, 0, 0, 0, 1, UInt8(ascii: "u"), 0] + Array("example.test".utf8) + [0]
        let commands = harness.send(.clientBytes(request))
        #expect(Transcript(commands).clientBytes == [0x00, 0x5B, 0, 0, 0, 0, 0, 0])
        #expect(Transcript(commands).closesClient)
        let record = try #require(Transcript(commands).records.first)
        #expect(record.route == .socks4)
        #expect(record.result == .refused)
        #expect(record.url == "socks4://example.test:80/")
        #expect(record.rule.contains("not SOCKS4"))
        #expect(record.fix?.contains("socks5h://") == true)
    }

    @Test func anHTTPClientIsUnaffected() throws {
        let harness = try Harness()
        let commands = harness.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        #expect(Transcript(commands).clientText.hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        #expect(Transcript(commands).records.first?.route == .absoluteForm)
    }
}

/// `--proxy-auth`: the credentials type, and SOCKS5's username/password subnegotiation (RFC 1929).
@Suite struct ProxyCredentialsTests {
    static let alice = ProxyCredentials(parsing: "alice:s3cr:et")!

    @Test func parsing() {
        #expect(Self.alice.user == "alice" && Self.alice.password == "s3cr:et")
        #expect(ProxyCredentials(parsing: "alice:") != nil, "an empty password is allowed")
        #expect(ProxyCredentials(parsing: ":x") == nil)
        #expect(ProxyCredentials(parsing: "alice") == nil)
        #expect(ProxyCredentials(parsing: String(repeating: "u", count: 256) + ":x") == nil)
        #expect(Self.alice.description == "user alice", "the password is never part of its text")
    }

    @Test func basicAuthorization() {
        func basic(_ text: String) -> String { "Basic " + Data(text.utf8).base64EncodedString() }
        #expect(Self.alice.acceptsBasic(basic("alice:s3cr:et")))
        #expect(Self.alice.acceptsBasic("basic " + Data("alice:s3cr:et".utf8).base64EncodedString()))
        #expect(!Self.alice.acceptsBasic(basic("alice:s3cr")))
        #expect(!Self.alice.acceptsBasic(basic("alice:s3cr:et ")))
        #expect(!Self.alice.acceptsBasic(basic("bob:s3cr:et")))
        #expect(!Self.alice.acceptsBasic("Bearer abc"))
        #expect(!Self.alice.acceptsBasic("Basic !!!"))
        #expect(!Self.alice.acceptsBasic(nil))
    }

    static func authentication(_ user: String, _ password: String) -> [UInt8] {
        [0x01, UInt8(user.utf8.count)] + Array(user.utf8) + [UInt8(password.utf8.count)] + Array(password.utf8)
    }

    @Test func socks5UsernamePasswordIsRequiredAndChecked() {
        var negotiation = SOCKS5Negotiation(credentials: Self.alice)
        #expect(negotiation.feed([0x05, 0x02, 0x00, 0x02]) == .needMore(reply: [0x05, 0x02]))
        let auth = Self.authentication("alice", "s3cr:et")
        #expect(negotiation.feed(Array(auth.prefix(4))) == .needMore(reply: []))
        #expect(negotiation.feed(Array(auth.dropFirst(4))) == .needMore(reply: [0x01, 0x00]))
        #expect(
            negotiation.feed(SOCKS5Tests.request(domain: "a.test", port: 80))
                == .connect(SOCKS5Target(host: "a.test", port: 80, addressType: 3), reply: [], rest: []))

        var wrong = SOCKS5Negotiation(credentials: Self.alice)
        let refused = wrong.feed([0x05, 0x01, 0x02] + Self.authentication("alice", "guess"))
        guard case .failed(let reply, let reason) = refused else {
            Issue.record("wrong credentials were accepted: \(refused)")
            return
        }
        #expect(reply == [0x05, 0x02, 0x01, 0x01])
        #expect(reason.contains("rejected") && !reason.contains("guess"), "\(reason)")

        var anonymous = SOCKS5Negotiation(credentials: Self.alice)
        guard case .failed(let none, let why) = anonymous.feed([0x05, 0x01, 0x00]) else {
            Issue.record("a client without credentials was accepted")
            return
        }
        #expect(none == [0x05, 0xFF])
        #expect(why.contains("requires username/password"), "\(why)")
    }

    @Test func httpClientsWithoutTheCredentialsGet407AndTheProxyOwnPagesStayOpen() throws {
        var settings = ProxySettings()
        settings.proxyCredentials = Self.alice
        let harness = try ProxySessionTests.Harness(settings: settings)
        let commands = harness.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        let response = Transcript(commands).clientText
        #expect(response.hasPrefix("HTTP/1.1 407 Proxy Authentication Required\r\n"), "\(response)")
        #expect(response.contains("Proxy-Authenticate: Basic realm=\"ats-proxy\""))
        #expect(Transcript(commands).records.first?.status == 407)

        let connect = try ProxySessionTests.Harness(settings: settings)
        let refused = connect.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        #expect(Transcript(refused).clientText.hasPrefix("HTTP/1.1 407 "))
        let authorized = try ProxySessionTests.Harness(settings: settings)
        let granted = authorized.send(
            "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: Basic "
                + Data("alice:s3cr:et".utf8).base64EncodedString() + "\r\n\r\n")
        #expect(
            Transcript(granted).clientText
                == "HTTP/1.1 200 Connection established\r\n\r\n")

        let info = try ProxySessionTests.Harness(settings: settings)
        let page = info.send("GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
        #expect(!Transcript(page).clientText.hasPrefix("HTTP/1.1 407"))
    }
}
