import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// `ExchangeLeg` on its own, as both of its owners use it: requests in, upstream commands, response parts (a
/// stream's) or text (an HTTP/1.1 client's), and the signals that tell the owner what only it can do.
@Suite struct ExchangeLegTests {
    typealias Session = ProxySessionTests

    /// A leg of the test harness's services, delivering as `delivery`.
    static func leg(_ delivery: ExchangeLeg.Delivery, settings: ProxySettings = ProxySettings()) throws -> ExchangeLeg {
        let harness = try Session.Harness(settings: settings)
        let uuid = UUID()
        var leg = ExchangeLeg(
            services: harness.session.services,
            client: ExchangeLeg.Client(
                address: "127.0.0.1:5000", connectionNumber: 1, taskUUID: uuid, taskIDPrefix: uuid.uuidString + ".",
                protocolName: delivery.isStream ? "h2" : "http/1.1"),
            delivery: delivery)
        leg.now = harness.now
        return leg
    }

    /// A GET for a cleartext origin on localhost (ATS allows local names) as task `number`.
    static func request(_ path: String = "/x", number: Int = 1, keepAlive: Bool = true) throws -> ExchangeLeg.Request {
        var headers = HTTPFields()
        headers.append(name: "Host", value: "localhost:9000")
        if !keepAlive { headers.append(name: "Connection", value: "close") }
        let url = "http://localhost:9000\(path)"
        return ExchangeLeg.Request(
            head: HTTPRequestHead(
                method: "GET",
                target: .absolute(
                    scheme: "http", authority: .init(host: "localhost", port: 9000),
                    pathAndQuery: path),
                version: .http11, headers: headers),
            framing: .none, url: url, target: try RequestTarget(parsing: url), number: number,
            clientKeepAlive: keepAlive, leftAlone: false)
    }

    static func takeCommands(_ leg: inout ExchangeLeg) -> [ProxyCommand] {
        var taken: [ProxyCommand] = []
        swap(&taken, &leg.commands)
        return taken
    }

    /// Starts a request, connects its upstream and feeds the origin's `response`.
    static func exchange(_ leg: inout ExchangeLeg, response: String, keepAlive: Bool = true) throws -> [ProxyCommand] {
        leg.start(try request(keepAlive: keepAlive))
        leg.requestEnd(trailers: nil)
        leg.handleUpstreamEvent(.upstreamConnected)
        leg.handleUpstreamEvent(.upstreamBytes(Array(response.utf8)))
        return takeCommands(&leg)
    }

    @Test func aStreamsLegAnswersInPartsAndSignalsTheEnd() throws {
        var leg = try Self.leg(.stream)
        let commands = try Self.exchange(&leg, response: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
        #expect(Transcript(commands).connects.map(\.authority) == ["localhost:9000"])
        #expect(Transcript(commands).upstreamText.hasPrefix("GET /x HTTP/1.1\r\n"))
        let parts = Transcript(commands).responseParts
        guard case .response(let head, _)? = parts.first else {
            Issue.record("no response head in \(parts)")
            return
        }
        #expect(head.status == 200)
        #expect(parts.contains { if case .body(let body) = $0 { Array(body) == Array("hi".utf8) } else { false } })
        #expect(parts.last.map { if case .messageEnd = $0 { true } else { false } } == true)
        #expect(Transcript(commands).clientBytes.isEmpty, "a stream's leg writes no text")
        #expect(Transcript(commands).records.map(\.httpProtocol) == ["h2"])
        #expect(leg.takeSignals().map(\.name) == ["finished(keepAlive: true)"])
        #expect(leg.isIdleForReuse && leg.upstream.idle)
    }

    @Test func anHTTP1ClientsLegWritesTextAndAClosingAnswerEndsTheConnection() throws {
        var leg = try Self.leg(.http1(encrypted: false))
        let commands = try Self.exchange(
            &leg, response: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", keepAlive: false)
        let text = Transcript(commands).clientText
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n") && text.contains("Connection: close\r\n") && text.hasSuffix("hi"))
        #expect(leg.takeSignals().map(\.name) == ["finished(keepAlive: false)"])
        #expect(Transcript(commands).responseParts.isEmpty)
    }

    @Test func anEncryptedClientsTextWaitsForTheOwnerToSealIt() throws {
        var leg = try Self.leg(.http1(encrypted: true))
        let commands = try Self.exchange(&leg, response: "HTTP/1.1 204 No Content\r\n\r\n")
        #expect(Transcript(commands).clientBytes.isEmpty)
        #expect(String(decoding: leg.takeClientPlain(), as: UTF8.self).hasPrefix("HTTP/1.1 204 No Content\r\n"))
        #expect(leg.takeClientPlain().isEmpty)
    }

    @Test func aLostUpstreamBeforeAnyResponseIsA502AndTheLegStaysUsable() throws {
        var leg = try Self.leg(.stream)
        leg.start(try Self.request())
        leg.requestEnd(trailers: nil)
        leg.handleUpstreamEvent(.upstreamConnectFailed(.refused))
        let commands = Self.takeCommands(&leg)
        var status: Int?
        for case .response(let head, _) in Transcript(commands).responseParts { status = head.status }
        #expect(status == 502)
        #expect(Transcript(commands).records.first?.errorCode == NSURLErrorCode.cannotConnectToHost.rawValue)
        #expect(leg.takeSignals().map(\.name) == ["finished(keepAlive: true)"])
        // The next request starts on the same leg.
        leg.start(try Self.request("/y", number: 2))
        #expect(Transcript(Self.takeCommands(&leg)).connects.map(\.authority) == ["localhost:9000"])
    }

    @Test func anIdleStreamLegGivesItsUpstreamBackThenEnds() throws {
        var settings = ProxySettings()
        settings.upstreamLinger = 1
        settings.idleTimeout = 5
        var leg = try Self.leg(.stream, settings: settings)
        _ = try Self.exchange(&leg, response: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        _ = leg.takeSignals()
        leg.updateOwnTimer()
        let armed = Transcript(Self.takeCommands(&leg)).armedTimers
        #expect(armed.last.map { $0 <= 1 } == true, "the first idle stage is due within the linger: \(armed)")
        // Stages fire until the upstream went back to the pool; then the idle timeout ends the leg.
        var released = false
        for _ in 0..<4 where !released {
            leg.ownTimerFired()
            released = !Transcript(Self.takeCommands(&leg)).releases.isEmpty
        }
        #expect(released)
        #expect(leg.takeSignals().isEmpty)
        leg.ownTimerFired()
        #expect(leg.takeSignals().map(\.name) == ["closeClient"])
        #expect(!leg.carriesExchanges)
    }

    @Test func anUpgradeRelaysRawBytesBothWaysAndSaysSo() throws {
        var leg = try Self.leg(.http1(encrypted: false))
        var headers = HTTPFields()
        headers.append(name: "Host", value: "localhost:9000")
        headers.append(name: "Connection", value: "Upgrade")
        headers.append(name: "Upgrade", value: "websocket")
        let url = "http://localhost:9000/ws"
        leg.start(
            ExchangeLeg.Request(
                head: HTTPRequestHead(method: "GET", target: .origin("/ws"), version: .http11, headers: headers),
                framing: .none, url: url, target: try RequestTarget(parsing: url), number: 1, clientKeepAlive: true,
                leftAlone: false))
        leg.requestEnd(trailers: nil)
        leg.handleUpstreamEvent(.upstreamConnected)
        leg.handleUpstreamEvent(
            .upstreamBytes(
                Array("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nok".utf8)))
        let commands = Self.takeCommands(&leg)
        #expect(Transcript(commands).clientText.hasSuffix("\r\n\r\nok"))
        #expect(leg.takeSignals().map(\.name) == ["upgraded"])
        #expect(leg.isRelaying)
        leg.relayFromClient(Array("ping".utf8))
        #expect(Transcript(Self.takeCommands(&leg)).upstreamText == "ping")
    }

    @Test("misuse by an owner traps", arguments: LegMisuse.allCases)
    func misuseTraps(_ misuse: LegMisuse) async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) { [misuse] in
            do { try misuse.run() } catch { print("setup failed: \(error)") }
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains(misuse.expectedMessage), "\(message.suffix(400))")
    }
}

/// Calls a leg's owner must never make (each runs in its own child process).
enum LegMisuse: String, CaseIterable, Codable, Sendable, CustomStringConvertible {
    case secondRequestWhileOneIsInFlight
    case clientEventToTheLeg
    case rawBytesToALegCarryingExchanges
    case textToAStream

    var description: String { rawValue }

    var expectedMessage: String {
        switch self {
        case .secondRequestWhileOneIsInFlight: "ExchangeLeg.start"
        case .clientEventToTheLeg: "is not an event of the upstream"
        case .rawBytesToALegCarryingExchanges: "relays no raw bytes"
        case .textToAStream: "a stream takes response parts"
        }
    }

    func run() throws {
        var leg = try ExchangeLegTests.leg(.stream)
        switch self {
        case .secondRequestWhileOneIsInFlight:
            leg.start(try ExchangeLegTests.request())
            leg.start(try ExchangeLegTests.request("/y", number: 2))
        case .clientEventToTheLeg:
            leg.handleUpstreamEvent(.clientEOF)
        case .rawBytesToALegCarryingExchanges:
            leg.relayFromClient([1])
        case .textToAStream:
            leg.sendToClient([1])
        }
    }
}

extension ExchangeLeg.Delivery {
    var isStream: Bool {
        if case .stream = self { return true }
        return false
    }
}

extension ExchangeLeg.Signal {
    /// A stable name for assertions.
    var name: String {
        switch self {
        case .finished(let keepAlive): "finished(keepAlive: \(keepAlive))"
        case .closeClient: "closeClient"
        case .upgraded: "upgraded"
        case .tunnelOpened: "tunnelOpened"
        case .tunnelRefused(let code): "tunnelRefused(\(code))"
        }
    }
}

extension ExchangeLeg {
    /// The signals raised so far, taken (as an owner takes them, one by one).
    mutating func takeSignals() -> [Signal] {
        var taken: [Signal] = []
        while !signals.isEmpty { taken.append(signals.removeFirst()) }
        return taken
    }
}
