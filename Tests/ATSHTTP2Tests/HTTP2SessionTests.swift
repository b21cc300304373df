import ATSHTTP2
import ATSTestSupport
import Testing

/// Playbook tests of `HTTP2Session`: a client and a server session pumped back to back in memory.
@Suite struct HTTP2SessionTests {
    @Test func handshakeExchangesSettingsWithPushDisabled() throws {
        var server = HTTP2Configuration()
        server.maxConcurrentStreams = 7
        server.maxFrameSize = 32_768
        let loop = try HTTP2Loopback(server: server)
        try loop.pump()
        #expect(loop.client.state == .active)
        #expect(loop.server.state == .active)
        #expect(loop.serverEvents.contains(.settingsAcknowledged))
        #expect(loop.clientEvents.contains(.settingsAcknowledged))
        let clientSettings = loop.serverEvents.compactMap { event -> [HTTP2Setting]? in
            if case .settings(let entries) = event { return entries } else { return nil }
        }.first
        #expect(clientSettings?.contains(HTTP2Setting(.enablePush, 0)) == true)
        #expect(loop.server.remoteSetting(.enablePush) == 0)
        #expect(loop.client.remoteSetting(.maxConcurrentStreams) == 7)
        #expect(loop.client.remoteSetting(.maxFrameSize) == 32_768)
        #expect(loop.client.remoteSetting(.maxHeaderListSize) == 65_536)
        #expect(loop.client.wantsRead && loop.server.wantsRead)
        #expect(!loop.client.wantsWrite && !loop.server.wantsWrite)
    }

    @Test func simpleGetKeepsHeaderOrderAndEndsStream() throws {
        let loop = try HTTP2Loopback()
        loop.onServerEvent = { [unowned loop] event in
            if case .headers(let stream, .request, _) = event {
                try loop.server.submitResponse(
                    stream: stream, headers: [HTTP2Header(":status", "200"), HTTP2Header("x-b", "2")], endStream: false)
                try loop.server.submitData(stream: stream, bytes: Array("hello".utf8), endStream: true)
            }
        }
        let stream = try loop.client.submitRequest(getRequest("/a?b=1") + [HTTP2Header("x-a", "1")], endStream: true)
        #expect(stream == 1)
        try loop.pump()
        #expect(
            loop.serverEvents.contains(
                .headers(
                    stream: 1, kind: .request, fields: getRequest("/a?b=1") + [HTTP2Header("x-a", "1")])))
        #expect(loop.serverEvents.contains(.streamEnded(stream: 1)))
        let clientStreamEvents = loop.clientEvents.filter {
            if case .streamClosed = $0 { return true }
            return $0.isMessagePart
        }
        #expect(
            clientStreamEvents == [
                .headers(stream: 1, kind: .response, fields: [HTTP2Header(":status", "200"), HTTP2Header("x-b", "2")]),
                .data(stream: 1, bytes: Array("hello".utf8)),
                .streamEnded(stream: 1),
                .streamClosed(stream: 1, error: .noError),
            ])
        #expect(loop.client.streamState(1) == .idle)
    }

    @Test func multiplexedStreamsCarryChecksummedBodiesBothWays() throws {
        let streams = 32
        let size = 256 * 1024
        let loop = try HTTP2Loopback()
        var serverBodies: [Int32: [UInt8]] = [:]
        var clientBodies: [Int32: [UInt8]] = [:]
        var serverSeed: [Int32: Int] = [:]
        loop.onServerEvent = { [unowned loop] event in
            if case .headers(let stream, .request, let fields) = event {
                let seed = Int(fields.first { $0.name == "x-seed" }!.value)!
                serverSeed[stream] = seed
                try loop.server.submitResponse(
                    stream: stream, headers: [HTTP2Header(":status", "200")], endStream: false)
                try loop.server.submitData(
                    stream: stream, bytes: testBody(seed: seed + 1000, count: size), endStream: true)
            } else if case .data(let stream, let bytes) = event {
                serverBodies[stream, default: []] += bytes
            }
        }
        loop.onClientEvent = { event in
            if case .data(let stream, let bytes) = event { clientBodies[stream, default: []] += bytes }
        }
        var seeds: [Int32: Int] = [:]
        for seed in 0..<streams {
            let id = try loop.client.submitRequest(
                getRequest("/upload/\(seed)", method: "POST") + [HTTP2Header("x-seed", String(seed))], endStream: false)
            try loop.client.submitData(stream: id, bytes: testBody(seed: seed, count: size), endStream: true)
            seeds[id] = seed
        }
        try loop.pump()
        #expect(serverBodies.count == streams)
        #expect(clientBodies.count == streams)
        for (id, seed) in seeds {
            #expect(serverSeed[id] == seed)
            #expect(serverBodies[id] == testBody(seed: seed, count: size), "request body of stream \(id)")
            #expect(clientBodies[id] == testBody(seed: seed + 1000, count: size), "response body of stream \(id)")
            #expect(loop.clientEvents.contains(.streamClosed(stream: id, error: .noError)))
        }
        #expect(loop.client.state == .active)
    }

    @Test func slowReaderStallsSenderAtTheWindowUntilItConsumes() throws {
        let loop = try HTTP2Loopback()
        loop.serverConsumes = false
        let total = 1024 * 1024
        let stream = try loop.client.submitRequest(getRequest("/up", method: "PUT"), endStream: false)
        try loop.client.submitData(stream: stream, bytes: testBody(seed: 7, count: total), endStream: true)
        try loop.pump()

        func received() -> Int {
            loop.serverEvents.reduce(0) { sum, event in
                if case .data(_, let bytes) = event { return sum + bytes.count } else { return sum }
            }
        }
        // Nothing consumed: exactly the initial window (65,535) crosses, the rest waits in the client's buffer.
        #expect(received() == 65_535)
        #expect(loop.client.sendWindow(stream: stream) == 0)
        #expect(loop.client.bufferedOutboundBytes(stream: stream) == total - 65_535)
        #expect(loop.client.streamState(stream) == .open)

        // Consuming releases WINDOW_UPDATEs, one window at a time, until the body is complete.
        var consumed = 0
        var rounds = 0
        while consumed < total, rounds < 1000 {
            let now = received()
            loop.server.consume(stream: stream, bytes: now - consumed)
            consumed = now
            try loop.pump()
            rounds += 1
        }
        #expect(received() == total)
        #expect(rounds > 10)
        #expect(loop.serverEvents.contains(.streamEnded(stream: stream)))
        #expect(loop.client.bufferedOutboundBytes(stream: stream) == 0)
    }

    @Test func trailersAndInterimResponsesTravelBothWays() throws {
        let loop = try HTTP2Loopback()
        loop.onServerEvent = { [unowned loop] event in
            if case .streamEnded(let stream) = event {
                try loop.server.submitInformational(stream: stream, headers: [HTTP2Header(":status", "103")])
                try loop.server.submitResponse(
                    stream: stream, headers: [HTTP2Header(":status", "200")], endStream: false)
                try loop.server.submitData(stream: stream, bytes: [1, 2, 3], endStream: false)
                try loop.server.submitTrailers(stream: stream, headers: [HTTP2Header("grpc-status", "0")])
            }
        }
        let stream = try loop.client.submitRequest(
            getRequest("/rpc", method: "POST") + [HTTP2Header("te", "trailers")], endStream: false)
        try loop.client.submitData(stream: stream, bytes: [9, 9], endStream: false)
        try loop.client.submitTrailers(stream: stream, headers: [HTTP2Header("x-checksum", "abc")])
        try loop.pump()

        let serverSide = loop.serverEvents.filter(\.isMessagePart)
        #expect(
            serverSide == [
                .headers(
                    stream: stream, kind: .request,
                    fields: getRequest("/rpc", method: "POST") + [HTTP2Header("te", "trailers")]),
                .data(stream: stream, bytes: [9, 9]),
                .headers(stream: stream, kind: .trailers, fields: [HTTP2Header("x-checksum", "abc")]),
                .streamEnded(stream: stream),
            ])
        let clientSide = loop.clientEvents.filter(\.isMessagePart)
        #expect(
            clientSide == [
                .headers(stream: stream, kind: .informational, fields: [HTTP2Header(":status", "103")]),
                .headers(stream: stream, kind: .response, fields: [HTTP2Header(":status", "200")]),
                .data(stream: stream, bytes: [1, 2, 3]),
                .headers(stream: stream, kind: .trailers, fields: [HTTP2Header("grpc-status", "0")]),
                .streamEnded(stream: stream),
            ])
    }

    @Test func clientResetReachesServerAndOtherStreamsContinue() throws {
        let loop = try HTTP2Loopback()
        let doomed = try loop.client.submitRequest(getRequest("/doomed", method: "POST"), endStream: false)
        let kept = try loop.client.submitRequest(getRequest("/kept"), endStream: true)
        try loop.client.submitData(stream: doomed, bytes: [1, 2, 3], endStream: false)
        try loop.pump()
        try loop.client.resetStream(stream: doomed, error: .cancel)
        try loop.pump()
        #expect(loop.clientEvents.contains(.streamResetSent(stream: doomed, error: .cancel)))
        #expect(loop.serverEvents.contains(.streamReset(stream: doomed, error: .cancel)))
        #expect(loop.serverEvents.contains(.streamClosed(stream: doomed, error: .cancel)))
        #expect(throws: HTTP2SessionError.self) {
            try loop.client.submitData(stream: doomed, bytes: [4], endStream: true)
        }
        try loop.server.submitResponse(stream: kept, headers: [HTTP2Header(":status", "204")], endStream: true)
        try loop.pump()
        #expect(loop.clientEvents.contains(.streamClosed(stream: kept, error: .noError)))
        #expect(loop.client.state == .active && loop.server.state == .active)
    }

    @Test func serverResetReachesClient() throws {
        let loop = try HTTP2Loopback()
        loop.onServerEvent = { [unowned loop] event in
            if case .headers(let stream, .request, _) = event {
                try loop.server.resetStream(stream: stream, error: .refusedStream)
            }
        }
        let stream = try loop.client.submitRequest(getRequest(), endStream: true)
        try loop.pump()
        #expect(loop.serverEvents.contains(.streamResetSent(stream: stream, error: .refusedStream)))
        #expect(loop.clientEvents.contains(.streamReset(stream: stream, error: .refusedStream)))
        #expect(loop.clientEvents.contains(.streamClosed(stream: stream, error: .refusedStream)))
    }

    @Test func gracefulGoAwayLetsInFlightStreamsFinish() throws {
        let loop = try HTTP2Loopback()
        var requests: [Int32] = []
        loop.onServerEvent = { event in
            if case .headers(let stream, .request, _) = event { requests.append(stream) }
        }
        for index in 0..<3 { _ = try loop.client.submitRequest(getRequest("/\(index)"), endStream: true) }
        try loop.pump()
        #expect(requests == [1, 3, 5])

        try loop.server.goAway(error: .noError)
        try loop.pump()
        #expect(loop.serverEvents.contains(.goAwaySent(lastStreamID: 5, error: .noError)))
        #expect(loop.clientEvents.contains(.goAway(lastStreamID: 5, error: .noError, debugData: [])))
        #expect(loop.client.state == .goingAway)
        #expect(loop.server.state == .goingAway)

        for stream in requests {
            try loop.server.submitResponse(stream: stream, headers: [HTTP2Header(":status", "200")], endStream: false)
            try loop.server.submitData(stream: stream, bytes: [UInt8(stream)], endStream: true)
        }
        try loop.pump()
        for stream in requests {
            #expect(loop.clientEvents.contains(.data(stream: stream, bytes: [UInt8(stream)])))
            #expect(loop.clientEvents.contains(.streamClosed(stream: stream, error: .noError)))
        }
        #expect(loop.server.state == .finished)
        #expect(loop.client.state == .finished)
    }

    @Test func pingIsAnsweredByThePeer() throws {
        let loop = try HTTP2Loopback()
        try loop.pump()
        try loop.client.ping(0x0102_0304_0506_0708)
        try loop.server.ping(42)
        try loop.pump()
        #expect(loop.clientEvents.contains(.pingAcknowledged(payload: 0x0102_0304_0506_0708)))
        #expect(loop.serverEvents.contains(.pingAcknowledged(payload: 42)))
    }

    @Test func clientHonoursServerMaxConcurrentStreams() throws {
        var server = HTTP2Configuration()
        server.maxConcurrentStreams = 4
        let loop = try HTTP2Loopback(server: server)
        try loop.pump()
        var waiting: [Int32] = []
        var answered = 0
        var maxOpen = 0
        loop.onServerEvent = { event in
            if case .headers(let stream, .request, _) = event {
                waiting.append(stream)
                maxOpen = max(maxOpen, waiting.count)
            }
        }
        for index in 0..<10 { _ = try loop.client.submitRequest(getRequest("/\(index)"), endStream: true) }
        try loop.pump()
        #expect(waiting.count == 4)
        while !waiting.isEmpty {
            let batch = waiting
            waiting.removeAll()
            for stream in batch {
                try loop.server.submitResponse(
                    stream: stream, headers: [HTTP2Header(":status", "200")], endStream: true)
                answered += 1
            }
            try loop.pump()
        }
        #expect(answered == 10)
        #expect(maxOpen == 4)
        #expect(!loop.serverEvents.contains { if case .streamResetSent = $0 { true } else { false } })
    }

    @Test func largeHeadersWithinTheLimitArriveWhole() throws {
        let loop = try HTTP2Loopback()
        let big = String(repeating: "v", count: 40_000)
        _ = try loop.client.submitRequest(getRequest() + [HTTP2Header("x-big", big)], endStream: true)
        try loop.pump()
        #expect(
            loop.serverEvents.contains(
                .headers(stream: 1, kind: .request, fields: getRequest() + [HTTP2Header("x-big", big)])))
    }

    @Test func bytesOfAResetStreamStillReturnTheConnectionWindow() throws {
        let loop = try HTTP2Loopback()
        loop.serverConsumes = false
        let first = try loop.client.submitRequest(getRequest("/a", method: "PUT"), endStream: false)
        try loop.client.submitData(stream: first, bytes: testBody(seed: 1, count: 60_000), endStream: false)
        try loop.pump()
        // The server drops the stream without consuming, then acknowledges the bytes it held.
        try loop.server.resetStream(stream: first, error: .cancel)
        try loop.pump()
        loop.server.consume(stream: first, bytes: 60_000)
        loop.serverConsumes = true
        let second = try loop.client.submitRequest(getRequest("/b", method: "PUT"), endStream: false)
        try loop.client.submitData(stream: second, bytes: testBody(seed: 2, count: 200_000), endStream: true)
        try loop.pump()
        #expect(loop.serverEvents.contains(.streamEnded(stream: second)))
        #expect(loop.client.bufferedOutboundBytes(stream: second) == 0)
    }

    @Test func commandsOnUnknownStreamsThrowWithoutHarm() throws {
        let loop = try HTTP2Loopback()
        #expect(throws: HTTP2SessionError.self) { try loop.client.submitData(stream: 99, bytes: [1], endStream: true) }
        #expect(throws: HTTP2SessionError.self) { try loop.client.submitTrailers(stream: 99, headers: []) }
        try loop.pump()
        #expect(loop.client.state == .active)
    }
}
