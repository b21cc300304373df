import ATSHTTP2
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// Floods against the HTTP/2 client side, played with raw frames through the intercepted tunnel of an
/// `HTTP2FrontendTests.Harness`. What reaches an origin is read from the proxy's own commands: every request the
/// proxy would send upstream starts with its lane's `connectUpstream`.
extension HTTP2FrontendTests {
    /// The HPACK block of a GET / on the tunnel host (no dynamic-table entries, so blocks can be sent in any order).
    static let rawGet: [UInt8] = [0x82, 0x87, 0x84, 0x01] + RawH2.hpackString(host)

    /// A stream's HEADERS, then a WINDOW_UPDATE that overflows its send window: nghttp2 resets the stream with
    /// FLOW_CONTROL_ERROR (MadeYouReset, CVE-2025-8671).
    static func madeYouReset(stream: UInt32) -> (headers: [UInt8], overflow: [UInt8]) {
        (RawH2.headers(stream: stream, block: rawGet), RawH2.windowUpdate(stream: stream, increment: 0x7fff_ffff))
    }

    @Test func resetsTheClientMakesTheProxySendAreCutAtTheBudgetAndStartNoMoreRequests() throws {
        let harness = try Harness(client: nil)
        harness.rawToProxy = RawH2.clientStart
        harness.flushClient()
        // Each stream's HEADERS arrives alone (its lane starts), the overflowing WINDOW_UPDATE in the next read.
        let limit = HTTP2Configuration().maxResetsPerSecond
        var connects = 0
        var closedClient = false
        for index in 0..<(3 * limit) where !closedClient {
            let frames = Self.madeYouReset(stream: UInt32(2 * index + 1))
            harness.rawToProxy = frames.headers
            connects += Transcript(harness.flushClient()).laneConnects.count
            harness.rawToProxy = frames.overflow
            closedClient = Transcript(harness.flushClient()).names.contains("closeClient")
        }
        #expect(closedClient, "the connection was never cut")
        #expect(RawH2.goAwayCodes(in: harness.rawFromProxy) == [HTTP2ErrorCode.enhanceYourCalm.rawValue])
        let flowControlResets = RawH2.resets(in: harness.rawFromProxy).filter {
            $0.code == HTTP2ErrorCode.flowControlError.rawValue
        }
        #expect(flowControlResets.count == limit + 1)
        #expect(connects == limit + 1, "requests started: \(connects)")
        // Every lane those streams opened was closed again.
        let closedLanes = Set(
            harness.commands.compactMap { if case .stream(let lane, .closeClient) = $0 { lane } else { nil } })
        #expect(closedLanes == Set((1...Int32(limit + 1)).map { $0 }))
    }

    @Test func aStreamResetInTheSameReadAsItsHeadersNeverStartsARequest() throws {
        let harness = try Harness(client: nil)
        var input = RawH2.clientStart
        for index in 0..<20 {
            let frames = Self.madeYouReset(stream: UInt32(2 * index + 1))
            input += frames.headers + frames.overflow
        }
        harness.rawToProxy = input
        let commands = harness.flushClient()
        #expect(Transcript(commands).laneConnects.isEmpty)
        #expect(!Transcript(commands).touchesALane)
        #expect(RawH2.resets(in: harness.rawFromProxy).count == 20)
        #expect(RawH2.goAwayCodes(in: harness.rawFromProxy).isEmpty)

        // The connection still serves a well-formed stream.
        harness.rawToProxy = RawH2.headers(stream: 41, block: Self.rawGet)
        #expect(Transcript(harness.flushClient()).laneConnects.map(\.lane) == [1])
    }

    @Test func aReadThatCutsTheConnectionStartsNoneOfItsRequests() throws {
        let harness = try Harness(client: nil)
        let limit = HTTP2Configuration().maxResetsPerSecond
        var input = RawH2.clientStart
        // Streams the client resets itself, past the per-second limit, every other one followed by a stream that
        // would live (fewer than the 100 concurrent streams allowed).
        for index in 0..<(limit + 1) {
            let stream = UInt32(4 * index + 1)
            input += RawH2.headers(stream: stream, block: Self.rawGet) + RawH2.rst(stream: stream)
            if index % 2 == 0 { input += RawH2.headers(stream: stream + 2, block: Self.rawGet) }
        }
        harness.rawToProxy = input
        let commands = harness.flushClient()
        #expect(RawH2.goAwayCodes(in: harness.rawFromProxy) == [HTTP2ErrorCode.enhanceYourCalm.rawValue])
        #expect(Transcript(commands).names.contains("closeClient"))
        #expect(
            Transcript(commands).laneConnects.isEmpty, "requests started: \(Transcript(commands).laneConnects.count)")
    }
}

// MARK: - Memory per stalled connection

extension HTTP2FrontendTests {
    @Test func aClientThatReadsNoneOfItsResponsesNeverMakesTheConnectionHoldMoreThanTheCap() throws {
        let harness = try Harness()
        harness.clientConsumes = false
        // 40 streams, each answered with 300,000 bytes at once: what upstreams had in flight when their streams
        // paused arrives anyway (an HTTP/2 origin may send a whole stream window after the pause).
        let count = 40
        var streams: [Int32] = []
        for _ in 0..<count { streams.append(try harness.request("/large").stream) }
        let frontend = try #require(harness.session.h2)
        let head = Array("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n".utf8)
        var peak = 0
        var records: [RequestRecord] = []
        for lane in 1...count {
            records += Transcript(harness.connect(lane: Int32(lane))).records
            records +=
                Transcript(harness.respond(lane: Int32(lane), head + testBody(seed: lane, count: 300_000))).records
            peak = max(peak, frontend.session.bufferedOutboundTotal)
        }
        #expect(peak <= HTTP2Frontend.connectionResponseCap, "the connection held \(peak) bytes")
        #expect(peak > HTTP2Frontend.connectionResponseHighWatermark, "the scenario never passed the high mark")
        let calmed = streams.filter { harness.stream($0).reset == .enhanceYourCalm }
        #expect(!calmed.isEmpty)
        // Streams are reset only as far as needed: the rest stay open and paused, to be read later.
        let open = streams.filter { harness.stream($0).reset == nil }
        #expect(open.count >= HTTP2Frontend.connectionResponseHighWatermark / 300_000 - 1, "\(open.count) left")
        #expect(frontend.tally.streamsOverBudget == calmed.count)
        // Each stream the proxy reset is recorded as the proxy's reset, with its code: to the client, a lost
        // connection (-1005), not its own cancel.
        let resetRecords = records.filter { $0.rule.hasPrefix("the proxy reset the stream") }
        #expect(resetRecords.count == calmed.count, "\(records.map(\.rule))")
        #expect(
            resetRecords.allSatisfy {
                $0.errorCode == -1005 && $0.rule.contains("RST_STREAM ENHANCE_YOUR_CALM")
            })
        #expect(frontend.session.state == .active, "the connection itself lives on")
    }
}

// MARK: - Timeouts

extension HTTP2FrontendTests {
    @Test func aHeaderBlockLeftOpenIsTimedByTheHeaderTimeoutWhichContinuationsDoNotPushBack() throws {
        let harness = try Harness(client: nil)
        let settings = ProxySettings()
        #expect(settings.headerTimeout != settings.idleTimeout)
        let header = "armTimer(\(Int(settings.headerTimeout)))"
        let idle = "armTimer(\(Int(settings.idleTimeout)))"
        harness.rawToProxy = RawH2.clientStart
        #expect(Transcript(harness.flushClient()).names.contains(idle))

        harness.rawToProxy = RawH2.headers(stream: 1, block: Self.rawGet, endHeaders: false)
        #expect(Transcript(harness.flushClient()).names.contains(header))
        for index in 0..<3 {
            harness.rawToProxy = RawH2.continuation(stream: 1, block: RawH2.literal("x-\(index)", "v"))
            let names = Transcript(harness.flushClient()).names
            #expect(!names.contains { $0.hasPrefix("armTimer") }, "a CONTINUATION re-armed the timer: \(names)")
        }
        #expect(Transcript(harness.send(.timerFired)).names.contains("closeClient"))
    }

    @Test func aCompletedHeaderBlockGoesBackToTheIdleTimer() throws {
        let harness = try Harness(client: nil)
        harness.rawToProxy = RawH2.clientStart + RawH2.headers(stream: 1, block: Self.rawGet, endHeaders: false)
        harness.flushClient()
        harness.rawToProxy = RawH2.continuation(stream: 1, block: RawH2.literal("x-a", "v"), endHeaders: true)
        let names = Transcript(harness.flushClient()).names
        // The stream is served: its lane times it, the connection's timer stops.
        #expect(names.contains("cancelTimer"), "\(names)")
        #expect(Transcript(harness.commands).laneConnects.map(\.lane) == [1])
    }
}

extension HTTP2FrontendTests {
    @Test func aSilentUpstreamTLSHandshakeTimesOutAfterTheConnectTimeoutWithMinus1001() throws {
        let harness = try Harness()
        let settings = ProxySettings()
        #expect(settings.connectTimeout < settings.exchangeTimeout)
        let (stream, _) = try harness.request("/silent")
        // The origin accepts the TCP connection and never answers the ClientHello.
        harness.upstream(1).mode = .plaintext
        let connected = harness.send(.stream(1, .upstreamConnected))
        let armed = Transcript(connected).lane(1).armedTimers
        #expect(!armed.isEmpty && armed.allSatisfy { $0 <= settings.connectTimeout }, "timers armed: \(armed)")
        var records: [RequestRecord] = []
        for _ in 0..<3 where harness.stream(stream).head == nil {
            records += Transcript(harness.send(.stream(1, .timerFired))).records
        }
        #expect(harness.stream(stream).head?.first { $0.name == ":status" }?.value == "504")
        #expect(records.first?.errorCode == -1001, "\(records.map(\.rule))")
    }
}
