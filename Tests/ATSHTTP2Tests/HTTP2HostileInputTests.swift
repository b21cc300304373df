import ATSHTTP2
import ATSTestSupport
import Testing

/// Hand-crafted hostile input against a server (and one client) `HTTP2Session`: each case must end in the right
/// GOAWAY or RST_STREAM code on the wire, the matching events, and no crash.
@Suite struct HTTP2HostileInputTests {
    /// A server session plus what it said and reported after `input`.
    struct Outcome {
        let session: HTTP2Session
        let events: [HTTP2Event]
        let output: [UInt8]

        var goAwayCodes: [UInt32] { RawH2.goAwayCodes(in: output) }
        var resets: [RawH2.RawReset] { RawH2.resets(in: output) }
        var failure: HTTP2SessionError? {
            for case .sessionFailed(let error) in events { return error }
            return nil
        }
    }

    /// Feeds `chunks` one `receive` each (at `now` + index × `spacing`) and collects everything.
    static func run(
        _ chunks: [[UInt8]], configuration: HTTP2Configuration = HTTP2Configuration(),
        role: HTTP2Role = .server, spacing: Duration = .zero
    ) throws -> Outcome {
        let session = try HTTP2Session(role: role, configuration: configuration)
        var output = session.takeOutbound()
        var events = session.takeEvents()
        let start = ContinuousClock.now
        for (index, chunk) in chunks.enumerated() {
            events += session.receive(chunk, now: start + spacing * index)
            output += session.takeOutbound()
            events += session.takeEvents()
        }
        return Outcome(session: session, events: events, output: output)
    }

    @Test func badPrefaceFailsTheSession() throws {
        let outcome = try Self.run([Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)])
        #expect(outcome.failure?.libraryCode == -903)  // NGHTTP2_ERR_BAD_CLIENT_MAGIC
        #expect(outcome.session.state == .failed(outcome.failure!))
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.protocolError.rawValue])
        #expect(!outcome.session.wantsRead)
        // Further input is ignored, not a crash.
        #expect(outcome.session.receive(RawH2.clientStart).isEmpty)
    }

    @Test func dataOnStreamZeroIsAConnectionProtocolError() throws {
        let outcome = try Self.run([RawH2.clientStart + RawH2.data(stream: 0, [1, 2, 3])])
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.protocolError.rawValue])
        #expect(outcome.events.contains(.goAwaySent(lastStreamID: 0, error: .protocolError)))
        #expect(outcome.failure != nil)
        #expect(!outcome.session.wantsRead)
    }

    @Test func uppercaseHeaderNameResetsOnlyThatStream() throws {
        let outcome = try Self.run([
            RawH2.clientStart + RawH2.headers(stream: 1, block: RawH2.requestBlock(extra: [("X-Upper", "1")])),
            RawH2.headers(stream: 3, block: RawH2.requestBlock(extra: [("x-lower", "1")])),
        ])
        #expect(outcome.resets == [RawH2.RawReset(stream: 1, code: HTTP2ErrorCode.protocolError.rawValue)])
        #expect(outcome.events.contains(.streamResetSent(stream: 1, error: .protocolError)))
        #expect(!outcome.events.contains { if case .headers(1, _, _) = $0 { true } else { false } })
        #expect(outcome.events.contains { if case .headers(3, .request, _) = $0 { true } else { false } })
        #expect(outcome.goAwayCodes.isEmpty)
        #expect(outcome.session.state == .active)
    }

    @Test func oversizedHeaderListResetsTheStreamWithEnhanceYourCalm() throws {
        var configuration = HTTP2Configuration()
        configuration.maxHeaderListSize = 4096
        let big = String(repeating: "a", count: 8000)
        let outcome = try Self.run(
            [
                RawH2.clientStart + RawH2.headers(stream: 1, block: RawH2.requestBlock(extra: [("x-big", big)])),
                RawH2.headers(stream: 3, block: RawH2.requestBlock()),
            ], configuration: configuration)
        #expect(outcome.resets == [RawH2.RawReset(stream: 1, code: HTTP2ErrorCode.enhanceYourCalm.rawValue)])
        #expect(!outcome.events.contains { if case .headers(1, _, _) = $0 { true } else { false } })
        #expect(outcome.events.contains { if case .headers(3, .request, _) = $0 { true } else { false } })
        #expect(outcome.session.state == .active)
    }

    @Test func continuationFloodIsCutOff() throws {
        var chunks = [RawH2.clientStart + RawH2.headers(stream: 1, block: RawH2.requestBlock(), endHeaders: false)]
        for index in 0..<50 {
            chunks.append(RawH2.continuation(stream: 1, block: RawH2.literal("x-\(index)", "v")))
        }
        let outcome = try Self.run(chunks)
        #expect(outcome.failure?.libraryCode == -905)  // NGHTTP2_ERR_TOO_MANY_CONTINUATIONS
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.enhanceYourCalm.rawValue])
        #expect(!outcome.events.contains { if case .headers = $0 { true } else { false } })
        #expect(!outcome.session.wantsRead)
    }

    @Test func rapidResetFloodGetsGoAwayEnhanceYourCalm() throws {
        var configuration = HTTP2Configuration()
        configuration.maxResetsPerSecond = 50
        var chunks = [RawH2.clientStart]
        for index in 0..<200 {
            let stream = UInt32(2 * index + 1)
            chunks.append(RawH2.headers(stream: stream, block: RawH2.requestBlock()) + RawH2.rst(stream: stream))
        }
        let outcome = try Self.run(chunks, configuration: configuration)
        #expect(outcome.failure?.libraryCode == HTTP2SessionError.atsResetFloodCode)
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.enhanceYourCalm.rawValue])
        let resetsSeen = outcome.events.filter { if case .streamReset = $0 { true } else { false } }.count
        #expect(resetsSeen == 51)
        #expect(!outcome.session.wantsRead)
    }

    @Test func nghttp2BuiltInResetLimitIsTheBackstop() throws {
        // Debian's 1.52.0-1+deb12u3 carries the CVE-2023-44487 token bucket (burst 1000, 33/s); with our own limit
        // out of the way, nghttp2 itself tears the connection down.
        var configuration = HTTP2Configuration()
        configuration.maxResetsPerSecond = 1_000_000
        configuration.maxConcurrentStreams = 2000
        var chunks = [RawH2.clientStart]
        for index in 0..<1200 {
            let stream = UInt32(2 * index + 1)
            chunks.append(RawH2.headers(stream: stream, block: RawH2.requestBlock()) + RawH2.rst(stream: stream))
        }
        let outcome = try Self.run(chunks, configuration: configuration)
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.internalError.rawValue])
        #expect(outcome.failure != nil)
        #expect(!outcome.session.wantsRead)
    }

    /// MadeYouReset input: `count` streams, each a GET whose stream window a WINDOW_UPDATE then overflows, so that
    /// nghttp2 itself resets it with FLOW_CONTROL_ERROR.
    static func madeYouResetChunks(count: Int) -> [[UInt8]] {
        var chunks = [RawH2.clientStart]
        for index in 0..<count {
            let stream = UInt32(2 * index + 1)
            chunks.append(
                RawH2.headers(stream: stream, block: RawH2.requestBlock())
                    + RawH2.windowUpdate(stream: stream, increment: 0x7fff_ffff))
        }
        return chunks
    }

    @Test func resetsTheServerIsMadeToSendCountAgainstTheSameBudget() throws {
        var configuration = HTTP2Configuration()
        configuration.maxResetsPerSecond = 50
        configuration.countsSentResets = true
        let outcome = try Self.run(Self.madeYouResetChunks(count: 200), configuration: configuration)
        #expect(outcome.failure?.libraryCode == HTTP2SessionError.atsResetFloodCode)
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.enhanceYourCalm.rawValue])
        let flowControlResets = outcome.resets.filter { $0.code == HTTP2ErrorCode.flowControlError.rawValue }
        #expect(flowControlResets.count == 51)
        #expect(outcome.session.resetCount == 51)
        #expect(!outcome.session.wantsRead)
    }

    @Test func sentResetsAreNotCountedUnlessAsked() throws {
        // The default (an upstream link's session): resets we send are our own clients' cancellations.
        var configuration = HTTP2Configuration()
        configuration.maxResetsPerSecond = 50
        let outcome = try Self.run(Self.madeYouResetChunks(count: 200), configuration: configuration)
        #expect(outcome.failure == nil)
        #expect(outcome.resets.count == 200)
        #expect(outcome.session.resetCount == 0)
        #expect(outcome.session.state == .active)
    }

    @Test func theLifetimeResetBudgetCutsAPacedFlood() throws {
        var configuration = HTTP2Configuration()
        configuration.maxResetsPerSecond = 50
        configuration.maxResetsPerSession = 120
        configuration.countsSentResets = true
        var chunks = [RawH2.clientStart]
        for index in 0..<200 {
            let stream = UInt32(2 * index + 1)
            chunks.append(RawH2.headers(stream: stream, block: RawH2.requestBlock()) + RawH2.rst(stream: stream))
        }
        // 40 resets per second stay under the rate; the 121st of the connection's life ends it.
        let outcome = try Self.run(chunks, configuration: configuration, spacing: .milliseconds(25))
        #expect(outcome.failure?.libraryCode == HTTP2SessionError.atsResetBudgetCode)
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.enhanceYourCalm.rawValue])
        let resetsSeen = outcome.events.filter { if case .streamReset = $0 { true } else { false } }.count
        #expect(resetsSeen == 121)
    }

    @Test func resetsBelowTheRateAreFine() throws {
        var configuration = HTTP2Configuration()
        configuration.maxResetsPerSecond = 50
        var chunks = [RawH2.clientStart]
        for index in 0..<200 {
            let stream = UInt32(2 * index + 1)
            chunks.append(RawH2.headers(stream: stream, block: RawH2.requestBlock()) + RawH2.rst(stream: stream))
        }
        // 40 resets per second: 200 resets over 5 seconds.
        let outcome = try Self.run(chunks, configuration: configuration, spacing: .milliseconds(25))
        #expect(outcome.failure == nil)
        #expect(outcome.goAwayCodes.isEmpty)
        #expect(outcome.session.state == .active)
    }

    @Test func streamsBeyondThePendingLimitAreRefused() throws {
        // The peer has not acknowledged our SETTINGS yet: nghttp2 refuses the extra stream, the connection lives.
        var configuration = HTTP2Configuration()
        configuration.maxConcurrentStreams = 2
        var input = RawH2.preface + RawH2.settings()
        for stream in [UInt32(1), 3, 5] { input += RawH2.headers(stream: stream, block: RawH2.requestBlock()) }
        let outcome = try Self.run([input], configuration: configuration)
        #expect(outcome.resets == [RawH2.RawReset(stream: 5, code: HTTP2ErrorCode.refusedStream.rawValue)])
        #expect(outcome.events.contains(.streamResetSent(stream: 5, error: .refusedStream)))
        #expect(outcome.events.contains { if case .headers(3, .request, _) = $0 { true } else { false } })
        #expect(outcome.goAwayCodes.isEmpty)
        #expect(outcome.session.state == .active)
    }

    @Test func streamsBeyondTheAcknowledgedLimitAreAConnectionError() throws {
        // After the SETTINGS ACK the limit is binding: nghttp2 1.52 treats excess as a connection PROTOCOL_ERROR.
        var configuration = HTTP2Configuration()
        configuration.maxConcurrentStreams = 2
        var input = RawH2.clientStart
        for stream in [UInt32(1), 3, 5] { input += RawH2.headers(stream: stream, block: RawH2.requestBlock()) }
        let outcome = try Self.run([input], configuration: configuration)
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.protocolError.rawValue])
        #expect(outcome.events.contains(.goAwaySent(lastStreamID: 3, error: .protocolError)))
        #expect(outcome.events.contains { if case .headers(3, .request, _) = $0 { true } else { false } })
        #expect(!outcome.events.contains { if case .headers(5, _, _) = $0 { true } else { false } })
        #expect(outcome.failure != nil)
    }

    @Test func evenStreamIdFromClientIsAConnectionError() throws {
        let outcome = try Self.run([RawH2.clientStart + RawH2.headers(stream: 2, block: RawH2.requestBlock())])
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.protocolError.rawValue])
        #expect(outcome.failure != nil)
    }

    @Test func lowerStreamIdAfterAHigherOneIsIgnored() throws {
        // nghttp2 cannot tell a skipped idle id from a forgotten closed stream, so it drops the block silently.
        let outcome = try Self.run([
            RawH2.clientStart + RawH2.headers(stream: 5, block: RawH2.requestBlock())
                + RawH2.headers(stream: 3, block: RawH2.requestBlock())
        ])
        #expect(outcome.events.contains { if case .headers(5, .request, _) = $0 { true } else { false } })
        #expect(!outcome.events.contains { if case .headers(3, _, _) = $0 { true } else { false } })
        #expect(outcome.goAwayCodes.isEmpty)
        #expect(outcome.resets.isEmpty)
        #expect(outcome.session.state == .active)
    }

    @Test func headersOnAHalfClosedStreamAreAStreamClosedError() throws {
        let outcome = try Self.run([
            RawH2.clientStart + RawH2.headers(stream: 1, block: RawH2.requestBlock())
                + RawH2.headers(stream: 1, block: RawH2.requestBlock())
        ])
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.streamClosed.rawValue])
        #expect(outcome.failure != nil)
    }

    @Test func dataOnAnIdleStreamIsAConnectionError() throws {
        let outcome = try Self.run([RawH2.clientStart + RawH2.data(stream: 7, [1, 2, 3])])
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.protocolError.rawValue])
        #expect(outcome.failure != nil)
    }

    @Test func tooManySettingsEntriesAreRejected() throws {
        let entries = (0..<40).map { _ in (UInt16(0x3), UInt32(100)) }
        let outcome = try Self.run([RawH2.preface + RawH2.settings(entries)])
        #expect(outcome.goAwayCodes == [HTTP2ErrorCode.enhanceYourCalm.rawValue])
        #expect(outcome.failure != nil)
    }

    @Test func pingFloodWithoutReadingAnswersIsFlooded() throws {
        // More than 1000 PING ACKs pending (the peer never reads): nghttp2 reports NGHTTP2_ERR_FLOODED.
        var input = RawH2.clientStart
        for index in 0..<1500 {
            input += RawH2.frame(type: 0x6, stream: 0, payload: RawH2.be32(0) + RawH2.be32(UInt32(index)))
        }
        let session = try HTTP2Session(role: .server)
        let events = session.receive(input)
        let output = session.takeOutbound()
        #expect(
            events.contains {
                if case .sessionFailed(let error) = $0 { error.libraryCode == -904 } else { false }  // ERR_FLOODED
            })
        #expect(RawH2.goAwayCodes(in: output).last == HTTP2ErrorCode.enhanceYourCalm.rawValue)
        #expect(!session.wantsRead)
    }

    @Test func zeroWindowPeerStallsTheResponseInOurBufferNotNghttp2s() throws {
        let input =
            RawH2.preface + RawH2.settings([(0x4, 0)]) + RawH2.settingsAck
            + RawH2.headers(stream: 1, block: RawH2.requestBlock())
        let session = try HTTP2Session(role: .server)
        _ = session.receive(input)
        try session.submitResponse(stream: 1, headers: [HTTP2Header(":status", "200")], endStream: false)
        try session.submitData(stream: 1, bytes: [UInt8](repeating: 7, count: 100_000), endStream: true)
        let output = session.takeOutbound()
        let frames = RawH2.frames(in: output)
        #expect(frames.contains { $0.type == 0x1 && $0.stream == 1 })
        #expect(!frames.contains { $0.type == 0x0 })
        #expect(session.sendWindow(stream: 1) == 0)
        #expect(session.bufferedOutboundBytes(stream: 1) == 100_000)
        #expect(session.state == .active)
        // A WINDOW_UPDATE on the stream lets exactly that much through.
        _ = session.receive(RawH2.frame(type: 0x8, stream: 1, payload: RawH2.be32(1000)))
        let more = RawH2.frames(in: session.takeOutbound()).filter { $0.type == 0x0 }
        #expect(more.reduce(0) { $0 + $1.payload.count } == 1000)
        #expect(session.bufferedOutboundBytes(stream: 1) == 99_000)
    }

    @Test func pushPromiseToClientIsAProtocolError() throws {
        let client = try HTTP2Session(role: .client)
        _ = try client.submitRequest(getRequest(), endStream: true)
        _ = client.takeOutbound()
        let events = client.receive(
            RawH2.settings() + RawH2.settingsAck
                + RawH2.pushPromise(stream: 1, promised: 2, block: RawH2.requestBlock()))
        let output = client.takeOutbound()
        #expect(!events.contains { if case .headers = $0 { true } else { false } })
        #expect(RawH2.goAwayCodes(in: output) == [HTTP2ErrorCode.protocolError.rawValue])
        #expect(client.takeEvents().contains { if case .sessionFailed = $0 { true } else { false } })
    }

    @Test func garbageAfterAValidStartDoesNotCrash() throws {
        var garbage: [UInt8] = []
        for index in 0..<4096 { garbage.append(UInt8(truncatingIfNeeded: index &* 7919 >> 3)) }
        let outcome = try Self.run([RawH2.clientStart, garbage, garbage])
        #expect(outcome.goAwayCodes.count == 1)
        #expect(outcome.failure != nil)
    }
}
