import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// `TunnelSniffer` (what a client speaks after CONNECT) and the session's protocol detection: TLS is intercepted,
/// cleartext HTTP is decided as the `http://` load it is, anything else is refused or relayed raw, a silent client
/// is closed after the bounded wait; every outcome is recorded with its route.
@Suite struct TunnelDetectionTests {
    typealias Harness = ProxySessionTests.Harness
    typealias S = ProxySessionTests

    // MARK: - The sniffer

    static func classify(_ text: String) -> TunnelSniffer.Verdict {
        TunnelSniffer.classify(Array(text.utf8)[...])
    }

    @Test func aTLSRecordHeaderIsTLSAssoonAsItsVersionByteIsIn() {
        #expect(TunnelSniffer.classify([0x16][...]) == .needMore)
        #expect(TunnelSniffer.classify([0x16, 0x03][...]) == .tls)
        #expect(TunnelSniffer.classify([0x16, 0x03, 0x01, 0x02, 0x00][...]) == .tls)
        guard case .unknown(let seen) = TunnelSniffer.classify([0x16, 0x42][...]) else {
            Issue.record("0x16 0x42 is no TLS record")
            return
        }
        #expect(seen == "first bytes 16 42 (\".B\")")
    }

    @Test func anHTTP1RequestLineIsRecognizedAtItsVersionDigit() {
        let line = "GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n"
        let bytes = Array(line.utf8)
        let digit = Array("GET /index.html HTTP/1.".utf8).count
        for count in 1...digit {
            #expect(TunnelSniffer.classify(bytes.prefix(count)) == .needMore, "after \(count) bytes")
        }
        #expect(TunnelSniffer.classify(bytes.prefix(digit + 1)) == .http1)
        #expect(Self.classify("OPTIONS * HTTP/1.0\r\n") == .http1)
        #expect(Self.classify("GET http://a/ HTTP/1.1\r\n") == .http1)
    }

    @Test func theHTTP2PrefaceIsPriorKnowledgeOnlyWhole() {
        let preface = TunnelSniffer.http2Preface
        for count in 1..<preface.count {
            #expect(TunnelSniffer.classify(preface.prefix(count)) == .needMore, "after \(count) bytes")
        }
        #expect(TunnelSniffer.classify(preface[...]) == .http2PriorKnowledge)
        // `PRI` that goes on as an HTTP/1 request line is one.
        #expect(Self.classify("PRI /x HTTP/1.1\r\n") == .http1)
    }

    @Test func anythingElseIsUnknownWithWhatWasSeen() {
        for text in [
            "SSH-2.0-OpenSSH_9.2\r\n", "GET  / HTTP/1.1\r\n", "GET / HTTP/2.0\r\n", "\u{0}\u{1}abc", "GET /\u{7f}",
        ] {
            guard case .unknown = Self.classify(text) else {
                Issue.record("\(text.debugDescription) is neither TLS nor HTTP/1.x")
                continue
            }
        }
        guard case .unknown(let seen) = Self.classify("SSH-2.0-OpenSSH_9.2p1 Debian\r\n") else {
            Issue.record("SSH is unknown")
            return
        }
        #expect(seen == "first bytes 53 53 48 2d 32 2e 30 2d 4f 70 65 6e 53 53 48 5f … (\"SSH-2.0-OpenSSH_\")")
        // A method token longer than any method is not waited for.
        guard case .unknown = Self.classify(String(repeating: "A", count: TunnelSniffer.maximumMethodLength + 1))
        else {
            Issue.record("an overlong method is unknown")
            return
        }
    }

    @Test func aRequestLineNotDoneWithinTheLimitIsUnknown() {
        var sniffer = TunnelSniffer()
        #expect(sniffer.feed(Array("GET /".utf8)) == .needMore)
        let verdict = sniffer.feed([UInt8](repeating: UInt8(ascii: "a"), count: TunnelSniffer.limit))
        guard case .unknown(let seen) = verdict else {
            Issue.record("an endless target is unknown, got \(verdict)")
            return
        }
        #expect(seen.hasPrefix("no request line within 8192 bytes; first bytes 47 45 54 20 2f 61"), "\(seen)")
        #expect(sniffer.takeHeld().count == TunnelSniffer.limit + 5)
        #expect(sniffer.held.isEmpty)
    }

    // MARK: - The route in the text log

    /// The byte path of the text log (a completed request at level 1) and the text path name the route alike: only
    /// the routes the URL's scheme does not already tell.
    @Test(arguments: ProxyRoute.allCases)
    func theTextLogNamesTheRouteOnBothPaths(route: ProxyRoute) {
        let record = DiagnosticsFormatterBytesTests.record().updating { $0.route = route }
        DiagnosticsFormatterBytesTests().bytesMatchText(record: record)
        var formatter = DiagnosticsFormatter(level: .summary)
        var bytes: [UInt8] = []
        formatter.appendText(record, to: &bytes)
        let line = String(decoding: bytes, as: UTF8.self)
        let named = line.contains("https://api.example.com/v1?q=é [via \(route.rawValue)] → allowed 200")
        switch route {
        case .absoluteForm, .connectTLS: #expect(!named && line.contains("v1?q=é → allowed 200"), "\(line)")
        case .connect, .connectHTTP, .connectH2C, .connectRaw, .socks5, .socks5TLS, .socks5HTTP, .socks5H2C,
            .socks5Raw, .socks4, .tlsAbsoluteForm, .tlsConnect, .tlsConnectTLS, .tlsConnectHTTP, .tlsConnectH2C,
            .tlsConnectRaw:
            #expect(named, "\(line)")
        }
    }

    // MARK: - The session

    /// An exception for `allowed.test` (cleartext allowed); everything else blocks cleartext.
    static let allowing: [String: PlistValue] = [
        "NSExceptionDomains": .dictionary([
            "allowed.test": .dictionary(["NSExceptionAllowsInsecureHTTPLoads": .bool(true)])
        ])
    ]

    static func connect(_ harness: Harness, _ authority: String) -> [ProxyCommand] {
        let commands = harness.send("CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n")
        #expect(Transcript(commands).clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
        #expect(Transcript(commands).connects.isEmpty, "nothing is connected before the client's first bytes")
        return commands
    }

    @Test func cleartextHTTPInsideATunnelIsBlockedWithMinus1022AndRecordedAsCONNECTPlusHTTP() throws {
        let harness = try Harness(ats: Self.allowing)
        _ = Self.connect(harness, "plain.test:8081")
        let commands = harness.send("GET /feed?x=1 HTTP/1.1\r\nHost: plain.test:8081\r\n\r\n")
        let response = Transcript(commands).clientText
        #expect(response.hasPrefix("HTTP/1.1 403 Forbidden\r\n"), "\(response)")
        #expect(response.contains("X-ATS-Error: -1022\r\n"))
        #expect(Transcript(commands).connects.isEmpty)
        #expect(!Transcript(commands).closesClient, "a blocked load keeps the connection, as an absolute-form one does")
        let record = try #require(Transcript(commands).records.first)
        #expect(record.result == .blockedCleartext)
        #expect(record.errorCode == -1022)
        #expect(record.url == "http://plain.test:8081/feed?x=1")
        #expect(record.method == "GET")
        #expect(record.route == .connectHTTP)
        #expect(record.taskID.hasSuffix(".1"))
        let json = DiagnosticsFormatter(level: .summary).jsonLine(record)
        #expect(json.contains(#""route":"CONNECT+HTTP""#), "\(json)")
        var formatter = DiagnosticsFormatter(level: .summary)
        #expect(
            formatter.text(record).last?.contains("http://plain.test:8081/feed?x=1 [via CONNECT+HTTP] → blocked -1022")
                == true)
    }

    @Test func allowedCleartextInsideATunnelIsForwardedKeptAliveAndRecorded() throws {
        let harness = try Harness(ats: Self.allowing)
        _ = Self.connect(harness, "allowed.test:80")
        let first = harness.send("GET /a HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        #expect(Transcript(first).connects.map(\.authority) == ["allowed.test:80"])
        let forwarded = Transcript(harness.send(.upstreamConnected)).upstreamText
        #expect(forwarded.hasPrefix("GET /a HTTP/1.1\r\n"), "\(forwarded)")
        #expect(forwarded.contains("Host: allowed.test\r\n"))
        let answer = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)))
        #expect(Transcript(answer).clientText == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        let record = try #require(Transcript(answer).records.first)
        #expect(record.result == .completed)
        #expect(record.url == "http://allowed.test/a")
        #expect(record.route == .connectHTTP)
        #expect(!Transcript(answer).closesClient)
        // The next request on the same tunnel reuses the upstream.
        let second = harness.send("GET /b HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n")
        #expect(Transcript(second).connects.isEmpty)
        #expect(Transcript(second).upstreamText.hasPrefix("GET /b HTTP/1.1\r\n"))
    }

    @Test func requestsPipelinedWithTheCONNECTAreDecidedInOrder() throws {
        let harness = try Harness(ats: Self.allowing)
        // The CONNECT and two requests for the allowed origin, all in one segment.
        let commands = harness.send(
            "CONNECT allowed.test:8080 HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n"
                + "GET /one HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\nGET /two HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n"
        )
        #expect(Transcript(commands).clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
        #expect(Transcript(commands).connects.map(\.authority) == ["allowed.test:8080"])
        let first = Transcript(harness.send(.upstreamConnected)).upstreamText
        #expect(first.hasPrefix("GET /one HTTP/1.1\r\n") && !first.contains("/two"), "\(first)")
        let answer = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1".utf8)))
        #expect(Transcript(answer).records.map(\.url) == ["http://allowed.test:8080/one"])
        #expect(Transcript(answer).upstreamText.hasPrefix("GET /two HTTP/1.1\r\n"), "the second follows the first")
        let second = harness.send(.upstreamBytes(Array("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2".utf8)))
        #expect(Transcript(second).records.map(\.url) == ["http://allowed.test:8080/two"])
        #expect(Transcript(second).records.map(\.route) == [.connectHTTP])
        #expect(S.text(Transcript(answer).clientBytes + Transcript(second).clientBytes).hasSuffix("\r\n\r\n2"))
    }

    @Test func aHostNamingAnotherAuthorityInsideACleartextTunnelGets421() throws {
        let harness = try Harness(ats: Self.allowing)
        _ = Self.connect(harness, "allowed.test:80")
        let commands = harness.send("GET / HTTP/1.1\r\nHost: other.test\r\n\r\n")
        #expect(Transcript(commands).clientText.hasPrefix("HTTP/1.1 421 Misdirected Request\r\n"))
        #expect(Transcript(commands).connects.isEmpty)
        let record = try #require(Transcript(commands).records.first)
        #expect(record.status == 421)
        #expect(record.route == .connectHTTP)
        #expect(record.rule.contains("this tunnel goes to allowed.test:80 only"), "\(record.rule)")
        // https:// inside a cleartext tunnel is misdirected too.
        let again = try Harness(ats: Self.allowing)
        _ = Self.connect(again, "allowed.test:80")
        let https = again.send("GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        #expect(Transcript(https).clientText.hasPrefix("HTTP/1.1 421 "))
    }

    @Test func aClientThatSendsNothingIsClosedAfterTheIdleTimeoutAndRecorded() throws {
        var settings = ProxySettings()
        settings.idleTimeout = 7
        let harness = try Harness(settings: settings)
        let connect = Self.connect(harness, "quiet.test:443")
        #expect(Transcript(connect).armedTimers.contains(7), "\(connect)")
        let fired = harness.send(.timerFired)
        #expect(Transcript(fired).closesClient)
        let record = try #require(Transcript(fired).records.first)
        #expect(record.method == "CONNECT")
        #expect(record.result == .failed)
        #expect(record.route == .connectRaw)
        #expect(record.rule.hasPrefix("the client sent nothing within 7 s after 200 Connection established"))
        #expect(record.result != .clientUntrustedCA)
    }

    @Test func aFewUndecidedBytesMustBeFollowedWithinTheHeaderTimeout() throws {
        var settings = ProxySettings()
        settings.headerTimeout = 3
        let harness = try Harness(settings: settings)
        _ = Self.connect(harness, "slow.test:443")
        let partial = harness.send("GET /")
        #expect(Transcript(partial).armedTimers.contains(3), "\(partial)")
        let more = harness.send("x")
        #expect(Transcript(more).armedTimers.isEmpty, "the header timer is not restarted")
        let fired = harness.send(.timerFired)
        #expect(Transcript(fired).closesClient)
        let record = try #require(Transcript(fired).records.first)
        #expect(record.rule.hasPrefix("the client sent 6 bytes that were neither TLS nor HTTP yet"), "\(record.rule)")
    }

    @Test func garbageAfterCONNECTIsRefusedAndRecordedByDefault() throws {
        let harness = try Harness(ats: Self.allowing)
        _ = Self.connect(harness, "allowed.test:22")
        let commands = harness.send("SSH-2.0-OpenSSH_9.2\r\n")
        #expect(Transcript(commands).closesClient)
        #expect(Transcript(commands).connects.isEmpty)
        #expect(Transcript(commands).clientBytes.isEmpty, "no HTTP answer to a client that speaks none")
        let record = try #require(Transcript(commands).records.first)
        #expect(record.route == .connectRaw)
        #expect(record.result == .failed)
        #expect(record.rule.hasPrefix("not TLS, not HTTP: first bytes 53 53 48"), "\(record.rule)")
        #expect(record.rule.hasSuffix("refused (--tunnel-unknown refuse)"))
        #expect(record.fix?.contains("--tunnel-unknown relay") == true)
    }

    @Test func garbageIsRelayedRawWithTunnelUnknownRelayWhenThePolicyAllowsCleartext() throws {
        var settings = ProxySettings()
        settings.tunnelUnknown = .relay
        let harness = try Harness(ats: Self.allowing, settings: settings)
        _ = Self.connect(harness, "allowed.test:22")
        let first = harness.send("SSH-2.0-x\r\n")
        #expect(Transcript(first).connects.map(\.authority) == ["allowed.test:22"])
        let open = harness.send(.upstreamConnected)
        #expect(Transcript(open).upstreamText == "SSH-2.0-x\r\n")
        #expect(Transcript(open).clientBytes.isEmpty, "the CONNECT was answered once, before detection")
        let record = try #require(Transcript(open).records.first)
        #expect(record.route == .connectRaw)
        #expect(record.result == .completed)
        #expect(record.rule.contains("relayed raw (--tunnel-unknown relay"), "\(record.rule)")
        let back = harness.send(.upstreamBytes(Array("SSH-2.0-y\r\n".utf8)))
        #expect(Transcript(back).clientText == "SSH-2.0-y\r\n")
        #expect(Transcript(harness.send("more")).upstreamText == "more")

        // A host ATS keeps on TLS gets no raw relay.
        let blocked = try Harness(ats: Self.allowing, settings: settings)
        _ = Self.connect(blocked, "example.com:22")
        let refused = blocked.send("SSH-2.0-x\r\n")
        #expect(Transcript(refused).connects.isEmpty)
        #expect(Transcript(refused).closesClient)
        let refusal = try #require(Transcript(refused).records.first)
        #expect(refusal.rule.contains("refused: ATS does not allow cleartext to example.com"), "\(refusal.rule)")
    }

    @Test func aClientHelloWrittenAFewBytesAtATimeIsIntercepted() throws {
        let harness = try Harness()
        _ = Self.connect(harness, "api.example.com:443")
        let clientContext = try TLSContext(role: .client)
        try clientContext.setVersions(minimum: .tls12, maximum: .tls13)
        let client = try TLSConnection(context: clientContext, serverName: "api.example.com")
        for _ in 0..<10 {
            let progress = client.handshake()
            if progress == .complete && !client.hasOutbound { break }
            let flight = client.takeOutbound()
            var reply: [ProxyCommand] = []
            // Three bytes per segment: the record header itself arrives split.
            var index = 0
            while index < flight.count {
                reply += harness.send(.clientBytes(Array(flight[index..<min(index + 3, flight.count)])))
                index += 3
            }
            client.receive(Transcript(reply).clientBytes)
        }
        #expect(client.state == .established)
        #expect(client.write(Array("GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n".utf8)) > 0)
        let request = harness.send(.clientBytes(client.takeOutbound()))
        #expect(Transcript(request).connects.map(\.authority) == ["api.example.com:443"])
    }

    @Test func aClientThatClosesAfterAFewUndecidedBytesIsRecorded() throws {
        let harness = try Harness()
        _ = Self.connect(harness, "api.example.com:443")
        _ = harness.send("GE")
        let closed = harness.send(.clientEOF)
        #expect(Transcript(closed).closesClient)
        let record = try #require(Transcript(closed).records.first)
        #expect(record.route == .connectRaw)
        #expect(record.rule.hasPrefix("not TLS, not HTTP: the client closed its side after 2 bytes"))
        // Nothing at all: closed quietly, as an abandoned handshake always was.
        let quiet = try Harness()
        _ = Self.connect(quiet, "api.example.com:443")
        let nothing = quiet.send(.clientEOF)
        #expect(Transcript(nothing).closesClient)
        #expect(Transcript(nothing).records.isEmpty)
    }
}
