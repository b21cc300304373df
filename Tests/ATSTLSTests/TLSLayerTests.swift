import ATSPolicy
import ATSTestSupport
import Dispatch
import Foundation
import Testing

@testable import ATSTLS

/// Tests for: `TLSLayer`, two engines wired back to back in memory through their layers (a client engine as the
/// proxy opens upstream, a server engine with a leaf minted by the tests).
@Suite("TLS layer over two engines in memory")
struct TLSLayerTests {
    /// A client layer for `TestPKI.host` (ALPN h2 and http/1.1) and a server layer serving a leaf for it.
    static func unconnectedPair(maximum: TLSProtocolVersion = .tls13) throws -> (client: TLSLayer, server: TLSLayer) {
        let requirements = Policies.standard.decide(try RequestTarget(parsing: "https://\(TestPKI.host)/"))
            .requirements
        let client = try TestPKI.client().makeConnection(
            requirements: requirements, host: TestPKI.host, alpn: ["h2", "http/1.1"])
        let context = TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), maximum: maximum)
        let server = try TLSConnection(context: context, serverName: nil)
        return (TLSLayer(client), TLSLayer(server))
    }

    /// Hands `bytes` to `layer` the way the proxy does: to the handshake while it runs, else to `decrypt`; returns
    /// the plaintext (and fails the test on an end).
    static func deliver(_ bytes: [UInt8], to layer: TLSLayer) -> [UInt8] {
        switch layer.state {
        case .handshaking:
            if case .failed(let failure) = layer.handshake(bytes) { Issue.record("handshake failed: \(failure)") }
            return []
        case .established:
            let inbound = layer.decrypt(bytes)
            #expect(inbound.end == nil)
            return inbound.plaintext
        case .closed, .failed:
            Issue.record("delivered to a layer in state \(layer.state)")
            return []
        }
    }

    /// Runs both handshakes through the layers, passing each side's records to the other, until neither has
    /// anything to send (the client's first step starts it).
    static func connect(_ client: TLSLayer, _ server: TLSLayer) {
        _ = client.handshake([])
        for _ in 0..<10 {
            let toServer = client.takeRecords()
            let toClient = server.takeRecords()
            if toServer.isEmpty && toClient.isEmpty && server.state != .handshaking { return }
            #expect(deliver(toServer, to: server).isEmpty)
            #expect(deliver(toClient, to: client).isEmpty)
        }
    }

    /// A connected pair, both established.
    static func connectedPair(maximum: TLSProtocolVersion = .tls13) throws -> (client: TLSLayer, server: TLSLayer) {
        let pair = try unconnectedPair(maximum: maximum)
        connect(pair.client, pair.server)
        return pair
    }

    static func pattern(_ count: Int, seed: Int = 0) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed &+ $0 >> 8) }
    }

    @Test func handshakeStepsUntilBothSidesAreEstablished() throws {
        let (client, server) = try Self.unconnectedPair()
        #expect(client.state == .handshaking && server.state == .handshaking)
        // The client speaks first: its ClientHello is waiting, and it needs the server's answer.
        #expect(client.handshake([]) == .needsInput)
        #expect(client.hasRecords)
        let hello = client.takeRecords()
        #expect(hello.first == 0x16)  // a handshake record
        #expect(!client.hasRecords && client.takeRecords().isEmpty)
        #expect(server.handshake(hello) == .needsInput)
        // TLS 1.3: the server's one flight completes the client, the client's Finished the server.
        #expect(client.handshake(server.takeRecords()) == .complete)
        #expect(client.state == .established)
        #expect(server.state == .handshaking)
        #expect(server.handshake(client.takeRecords()) == .complete)
        #expect(server.state == .established)
        #expect(client.engine.negotiatedALPN == "h2" && server.engine.negotiatedALPN == "h2")
        #expect(client.engine.negotiatedVersion == .tls13)
        // What the server sent after completing (its session tickets) decrypts to nothing.
        let tickets = server.takeRecords()
        #expect(!tickets.isEmpty)
        #expect(client.decrypt(tickets) == TLSLayer.Inbound(plaintext: [], end: nil))
    }

    @Test func aTLS12HandshakeCompletesThroughTheLayersToo() throws {
        let (client, server) = try Self.connectedPair(maximum: .tls12)
        #expect(client.state == .established && server.state == .established)
        #expect(client.engine.negotiatedVersion == .tls12)
        #expect(client.seal(Array("ping".utf8)))
        #expect(server.decrypt(client.takeRecords()).plaintext == Array("ping".utf8))
    }

    @Test func applicationDataFlowsBothWays() throws {
        let (client, server) = try Self.connectedPair()
        let request = Array("GET / HTTP/1.1\r\nHost: ats.test\r\n\r\n".utf8)
        #expect(client.seal(request))
        #expect(client.hasRecords)
        let records = client.takeRecords()
        #expect(records.count > request.count)  // sealed, not the plaintext
        #expect(server.decrypt(records) == TLSLayer.Inbound(plaintext: request, end: nil))
        let response = Array("HTTP/1.1 204 No Content\r\n\r\n".utf8)
        #expect(server.seal(response))
        #expect(server.seal([]))  // nothing to seal: still fine, no record
        #expect(client.decrypt(server.takeRecords()) == TLSLayer.Inbound(plaintext: response, end: nil))
        // Nothing buffered: nothing to decrypt.
        #expect(client.decrypt([]) == TLSLayer.Inbound(plaintext: [], end: nil))
    }

    @Test func everyRecordOfOneFeedComesBackInOnePiece() throws {
        let (client, server) = try Self.connectedPair()
        // 300 KiB sealed in pieces of 20,000 bytes: about 20 records, more than one engine read (64 KiB) holds,
        // and more than the layer reads at once (256 KiB).
        let body = Self.pattern(300 * 1024)
        var offset = 0
        while offset < body.count {
            let end = min(offset + 20_000, body.count)
            #expect(server.seal(Array(body[offset..<end])))
            offset = end
        }
        let records = server.takeRecords()
        let inbound = client.decrypt(records)
        #expect(inbound.end == nil)
        #expect(inbound.plaintext.count == body.count)
        #expect(inbound.plaintext == body)
    }

    @Test func aRecordSplitAcrossFeedsIsHeldUntilItCompletes() throws {
        let (client, server) = try Self.connectedPair()
        let first = Self.pattern(10_000, seed: 1)
        let second = Self.pattern(90_000, seed: 2)
        #expect(server.seal(first))
        let firstRecords = server.takeRecords()
        #expect(server.seal(second))
        let secondRecords = server.takeRecords()
        // The first record whole plus part of the next: only the first decrypts.
        let cut = 3_000
        #expect(client.decrypt(firstRecords + secondRecords[..<cut]).plaintext == first)
        // Byte by byte through a header: nothing yet.
        for index in cut..<(cut + 4) {
            #expect(client.decrypt([secondRecords[index]]) == TLSLayer.Inbound(plaintext: [], end: nil))
        }
        // The rest (records buffered inside OpenSSL and in the engine together) in one piece.
        let rest = client.decrypt(Array(secondRecords[(cut + 4)...]))
        #expect(rest == TLSLayer.Inbound(plaintext: second, end: nil))
    }

    @Test func closeNotifyEndsTheStreamAfterTheDataBeforeIt() throws {
        let (client, server) = try Self.connectedPair()
        let last = Array("the last words".utf8)
        #expect(server.seal(last))
        server.close()
        #expect(server.state == .closed)
        #expect(!server.seal(Array("dropped".utf8)))
        let records = server.takeRecords()
        #expect(client.decrypt(records) == TLSLayer.Inbound(plaintext: last, end: .closed))
        #expect(client.state == .closed)
        // After the end: the end again, bytes dropped, nothing sealed.
        #expect(client.decrypt(Array("more".utf8)) == TLSLayer.Inbound(plaintext: [], end: .closed))
        #expect(!client.seal(Array("late".utf8)))
        #expect(!client.hasRecords)
        client.close()  // nothing to close any more
        #expect(client.state == .closed && !client.hasRecords)
    }

    @Test func theTransportsEndAfterTheHandshakeIsAClose() throws {
        let (client, _) = try Self.connectedPair()
        client.receiveEnd()
        #expect(client.decrypt([]) == TLSLayer.Inbound(plaintext: [], end: .closed))
        #expect(client.state == .closed)
    }

    @Test func aGarbageRecordFailsTheConnection() throws {
        let (client, server) = try Self.connectedPair()
        let good = Array("fine".utf8)
        #expect(server.seal(good))
        // An application-data record of 32 random-looking bytes: its tag cannot verify (bad_record_mac).
        let garbage: [UInt8] = [0x17, 0x03, 0x03, 0x00, 0x20] + Self.pattern(32, seed: 7)
        let inbound = client.decrypt(server.takeRecords() + garbage)
        #expect(inbound.plaintext == good)
        guard case .failed(let failure)? = inbound.end else {
            Issue.record("expected a failure, got \(String(describing: inbound.end))")
            return
        }
        #expect(failure.reason == .other || failure.reason == .notTLS, "\(failure)")
        #expect(!failure.errors.isEmpty)
        #expect(client.state == .failed)
        #expect(client.decrypt([]) == TLSLayer.Inbound(plaintext: [], end: .failed(failure)))
        #expect(!client.seal(good))
        // The engine told the peer why (a fatal alert; under TLS 1.3 it travels as an encrypted record).
        #expect(!client.takeRecords().isEmpty)
    }

    @Test func bytesThatAreNotTLSFailTheHandshake() throws {
        let (_, server) = try Self.unconnectedPair()
        guard case .failed(let failure) = server.handshake(Array("GET / HTTP/1.1\r\nHost: ats.test\r\n\r\n".utf8))
        else {
            Issue.record("the handshake did not fail")
            return
        }
        #expect(failure.reason == .notTLS, "\(failure)")
        #expect(server.state == .failed)
        server.close()  // nothing to close: no close_notify
        #expect(server.state == .failed)
    }

    @Test func theTransportsEndDuringTheHandshakeFailsIt() throws {
        let (client, server) = try Self.unconnectedPair()
        #expect(client.handshake([]) == .needsInput)
        _ = server.handshake(client.takeRecords())
        client.receiveEnd()
        guard case .failed(let failure) = client.handshake([]) else {
            Issue.record("the handshake did not fail")
            return
        }
        #expect(failure.reason == .closedWithoutAlert, "\(failure)")
        #expect(client.state == .failed)
    }

    // MARK: - Illegal calls trap (in a child process each, naming the state)

    /// Whether the child's standard error names the trap (`expected`). Optimized builds trap without the
    /// message, so there only the exit itself is checked.
    static func trapNames(_ expected: String, _ result: ExitTest.Result?) -> Bool {
        #if DEBUG
            String(decoding: result?.standardErrorContent ?? [], as: UTF8.self).contains(expected)
        #else
            result != nil
        #endif
    }

    @Test func handshakeOnceEstablishedTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (client, _) = try TLSLayerTests.connectedPair()
            _ = client.handshake([])
        }
        #expect(Self.trapNames("TLSLayer.handshake in state established", result))
    }

    @Test func handshakeAfterAFailureTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (_, server) = try TLSLayerTests.unconnectedPair()
            _ = server.handshake(Array("not TLS at all, clearly".utf8))
            _ = server.handshake([])
        }
        #expect(Self.trapNames("TLSLayer.handshake in state failed", result))
    }

    @Test func decryptBeforeTheHandshakeCompletedTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (client, _) = try TLSLayerTests.unconnectedPair()
            _ = client.decrypt([])
        }
        #expect(Self.trapNames("TLSLayer.decrypt in state handshaking", result))
    }

    @Test func sealBeforeTheHandshakeCompletedTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let (client, _) = try TLSLayerTests.unconnectedPair()
            _ = client.handshake([])
            _ = client.seal(Array("too early".utf8))
        }
        #expect(Self.trapNames("TLSLayer.seal in state handshaking", result))
    }

    @Test func oneReadHoldsWhatALoopReadDelivers() {
        #expect(TLSLayer.readSize(unread: 0) == 64 * 1024)
        #expect(TLSLayer.readSize(unread: 48 * 1024) == 64 * 1024)
        // A full 64 KiB socket read with most of a record left from the last one.
        #expect(TLSLayer.readSize(unread: 64 * 1024 + 16_000) == 128 * 1024)
        #expect(TLSLayer.readSize(unread: 10 * 1024 * 1024) == 256 * 1024)
    }

    // MARK: - Measurement (run with ATS_TLS_BENCH=1, ideally `-c release -Xswiftc -enable-testing`)

    /// Seals `count` messages of `size` bytes on `server` and returns each message's records.
    static func sealedFeeds(_ server: TLSLayer, count: Int, size: Int) -> [[UInt8]] {
        let message = pattern(size)
        return (0..<count).map { _ in
            server.seal(message)
            return server.takeRecords()
        }
    }

    /// CPU seconds of the calling thread.
    static func threadCPU() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    /// The decrypt side, per feed: the loop the session had (receive, read until it needs input, handing each
    /// piece on) against `TLSLayer.decrypt`; small records as in keep-alive requests, 64 KiB feeds as in bulk.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["ATS_TLS_BENCH"] != nil))
    func decryptCostsNoMoreThanTheHandWrittenLoop() throws {
        for (count, size) in [(50_000, 300), (400, 64 * 1024 - 512)] {
            var results: [String] = []
            for round in 0..<2 {
                // Alternate the order so that neither side always runs on a warmer cache.
                for useLayer in round == 0 ? [false, true] : [true, false] {
                    let (client, server) = try Self.connectedPair()
                    let feeds = Self.sealedFeeds(server, count: count, size: size)
                    var total = 0
                    let start = Self.threadCPU()
                    if useLayer {
                        for feed in feeds { total += client.decrypt(feed).plaintext.count }
                    } else {
                        let engine = client.engine
                        for feed in feeds {
                            engine.receive(feed)
                            reading: while true {
                                switch engine.read() {
                                case .data(let bytes): total += bytes.count
                                case .needsInput, .closed, .failed: break reading
                                }
                            }
                        }
                    }
                    let perFeed = (Self.threadCPU() - start) / Double(count) * 1e9
                    #expect(total == count * size)
                    results.append("\(useLayer ? "layer" : "loop") \(Int(perFeed)) ns")
                }
            }
            print("BENCH decrypt \(size) B per feed: \(results.joined(separator: ", "))")
        }
    }
}
