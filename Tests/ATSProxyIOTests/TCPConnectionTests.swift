import Dispatch
import Foundation
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

/// A client that sends a fixed payload, half-closes, and checks that the echo matches.
final class EchoClient: TCPConnectionHandler, @unchecked Sendable {
    let payload: [UInt8]
    let tally: Tally
    var received: [UInt8] = []
    var connection: TCPConnection?

    init(payload: [UInt8], tally: Tally) {
        self.payload = payload
        self.tally = tally
    }

    func begin(_ connection: TCPConnection) {
        connection.handler = self
        self.connection = connection
        tally.register(self)
        // Several small writes exercise queueing and coalescing.
        var offset = 0
        while offset < payload.count {
            let end = min(payload.count, offset + 97)
            connection.write(Array(payload[offset..<end]))
            offset = end
        }
        connection.shutdownWrite()
    }

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        received.append(contentsOf: bytes)
    }

    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
        if reason == .finished, checksum(received) == checksum(payload), received.count == payload.count {
            tally.succeed()
        } else {
            tally.fail("client \(connection.id): \(reason), \(received.count)/\(payload.count) bytes")
        }
    }
}

/// FNV-1a 64 over the bytes.
func checksum(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return hash
}

/// Answers whatever it reads with a small write, a large one and a final small one, then ends
/// the connection in the way the test asks; records the queue length after each write (on the
/// loop).
final class BatchProbe: TCPConnectionHandler, @unchecked Sendable {
    enum Ending { case closeAfterFlush, close, shutdownWrite }
    let ending: Ending
    let large: [UInt8]
    let queued = Expectation<[Int]>()
    init(ending: Ending, large: [UInt8]) {
        self.ending = ending
        self.large = large
    }
    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        var lengths: [Int] = []
        connection.write(Array("head|".utf8))
        lengths.append(connection.queuedBytes)
        connection.write(large)
        lengths.append(connection.queuedBytes)
        connection.write(Array("|tail".utf8))
        lengths.append(connection.queuedBytes)
        queued.fulfill(lengths)
        switch ending {
        case .closeAfterFlush: connection.closeAfterFlush()
        case .close: connection.close()
        case .shutdownWrite: connection.shutdownWrite()
        }
    }
    func connectionDidReadEOF(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {}
}

@Suite("TCPConnection")
struct TCPConnectionTests {
    @Test("200 concurrent clients get their bytes echoed back intact")
    func echoServerWithManyClients() throws {
        let serverGroup = EventLoopGroup(loopCount: 2)
        let clientGroup = EventLoopGroup(loopCount: 2)
        let listener = try startEchoServer(group: serverGroup)
        defer { stopAndWait(listener) }
        let clients = 200
        let tally = Tally(target: clients)
        let address = listener.boundAddress
        for index in 0..<clients {
            var generator = SystemRandomNumberGenerator()
            let size = 200 + Int.random(in: 0..<3000, using: &generator)
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
            let loop = clientGroup.next()
            loop.execute {
                TCPConnector.connect(to: [address], on: loop, timeout: .seconds(10)) { result in
                    switch result {
                    case .success(let connection):
                        EchoClient(payload: payload, tally: tally).begin(connection)
                    case .failure(let error):
                        tally.fail("connect: \(error)")
                    }
                }
            }
        }
        let finished = tally.wait(seconds: 20)
        if !finished {
            print("STUCK live", listener.liveConnections)
            for client in tally.registered {
                guard let c = client.connection else { continue }
                let summary = onLoop(c.loop) { [client] in
                    "\(client.received.count)/\(client.payload.count) \(c.stateSummary)"
                }
                print("STUCK?", summary)
            }
        }
        #expect(finished)
        #expect(tally.failureList.isEmpty, "\(tally.failureList.prefix(5))")
        #expect(tally.successes == clients)
        #expect(eventually { listener.liveConnections == 0 })
    }

    @Test("a peer reset is reported as .reset")
    func peerResetIsDetected() throws {
        let group = EventLoopGroup(loopCount: 1)
        let recorder = CloseRecorder()
        let listener = try startLoopbackListener(group: group) { connection in connection.handler = recorder }
        defer { stopAndWait(listener) }
        let client = try BlockingClient(connectingTo: listener.boundAddress)
        client.send("hello")
        #expect(recorder.gotBytes.wait() == true)
        client.reset()
        #expect(recorder.closed.wait() == .reset)
    }

    @Test("a writer to a reset peer sees .reset, not SIGPIPE")
    func writeToResetPeer() throws {
        let group = EventLoopGroup(loopCount: 1)
        let loop = group.loops[0]
        let accepted = Expectation<TCPConnection>()
        let recorder = CloseRecorder()
        let listener = try startLoopbackListener(group: group) { connection in
            connection.handler = recorder
            accepted.fulfill(connection)
        }
        defer { stopAndWait(listener) }
        let client = try BlockingClient(connectingTo: listener.boundAddress)
        let connection = try #require(accepted.wait())
        client.reset()
        usleep(20_000)
        loop.execute {
            for _ in 0..<64 { connection.write([UInt8](repeating: 1, count: 65536)) }
        }
        #expect(recorder.closed.wait() == .reset)
    }

    @Test("shutdownWrite before start with nothing written still sends FIN; both ends finish")
    func shutdownBeforeStart() throws {
        let group = EventLoopGroup(loopCount: 1)
        let listener = try startEchoServer(group: group)
        defer { stopAndWait(listener) }
        let address = listener.boundAddress
        let recorder = CloseRecorder()
        let loop = group.loops[0]
        loop.execute {
            TCPConnector.connect(to: [address], on: loop) { result in
                guard case .success(let connection) = result else { return }
                connection.handler = recorder
                connection.shutdownWrite()
            }
        }
        #expect(recorder.closed.wait() == .finished)
        #expect(eventually { listener.liveConnections == 0 })
    }

    @Test("half-close: the server's reply still arrives after the client shut down its write side")
    func halfCloseDeliversReply() throws {
        let group = EventLoopGroup(loopCount: 1)
        let listener = try startEchoServer(group: group)
        defer { stopAndWait(listener) }
        let client = try BlockingClient(connectingTo: listener.boundAddress)
        defer { client.close() }
        client.send("ping over half-close")
        client.shutdownWrite()
        #expect(String(decoding: client.readToEnd(), as: UTF8.self) == "ping over half-close")
        #expect(eventually { listener.liveConnections == 0 })
    }

    @Test(
        "small writes made while the epoll loop delivers several reports wait for the batch's end, in order",
        arguments: EventLoopBackend.allCases, [BatchProbe.Ending.closeAfterFlush, .close, .shutdownWrite])
    func writesHeldForTheEndOfTheBatch(backend: EventLoopBackend, ending: BatchProbe.Ending) throws {
        let group = EventLoopGroup(loopCount: 1, backend: backend)
        // Larger than the batching limit, small enough for the socket buffer to take at once.
        let large = [UInt8](repeating: UInt8(ascii: "L"), count: TCPConnection.batchedWriteLimit + 1)
        let pair = try OneBatchPair(group: group) { BatchProbe(ending: ending, large: large) }
        // Every byte arrives, in write order, before the end of the stream, with each ending:
        // close() offers the held bytes to the kernel before it drops the queue.
        let expected = Array("head|".utf8) + large + Array("|tail".utf8)
        for client in pair.clients {
            let received = client.readToEnd()
            let intact = received == expected
            #expect(intact, "received \(received.count) of \(expected.count) bytes")
        }
        for probe in pair.handlers {
            let lengths = try #require(probe.queued.wait())
            switch backend {
            case .epoll:
                // The small write is held; the large one sends it and then itself, at once; the
                // tail is held again.
                #expect(lengths == [5, 0, 5])
            case .dispatch:
                // No batches: each write goes to the socket at once.
                #expect(lengths == [0, 0, 0])
            }
        }
    }

    @Test("a write from a task queued by another thread, alone in its batch, goes out at once")
    func writeFromAnotherThreadsTask() throws {
        let group = EventLoopGroup(loopCount: 1, backend: .epoll)
        let accepted = Expectation<TCPConnection>()
        let listener = try startLoopbackListener(group: group) { connection in
            connection.handler = CloseRecorder()
            accepted.fulfill(connection)
        }
        defer { stopAndWait(listener) }
        let client = try BlockingClient(connectingTo: listener.boundAddress)
        defer { client.close() }
        let connection = try #require(accepted.wait())
        // Let the loop take the new registration's first report, so that the task is alone.
        onLoop(group.loops[0]) {}
        // The task reaches the loop through its cross-thread inbox: a batch of one report (the
        // wake-up), with no other connection to serve first.
        let queued = Expectation<Int>()
        group.loops[0].execute {
            connection.write(Array("from elsewhere".utf8))
            queued.fulfill(connection.queuedBytes)
            connection.closeAfterFlush()
        }
        #expect(queued.wait() == 0)
        #expect(String(decoding: client.readToEnd(), as: UTF8.self) == "from elsewhere")
    }

    @Test("held writes that cross the high watermark are reported writable again after a large write")
    func heldWritesAboveTheHighWatermarkRecover() throws {
        let group = EventLoopGroup(loopCount: 1, backend: .epoll)
        final class WatermarkProbe: TCPConnectionHandler, @unchecked Sendable {
            let changes = Expectation<[Bool]>()
            private var seen: [Bool] = []
            func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
                connection.highWatermark = 4096
                connection.lowWatermark = 1024
                for _ in 0..<3 { connection.write([UInt8](repeating: 1, count: 2048)) }
                connection.write([UInt8](repeating: 2, count: 9000))
            }
            func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool) {
                seen.append(isWritable)
                if isWritable { changes.fulfill(seen) }
            }
            func connectionDidReadEOF(_ connection: TCPConnection) {}
            func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
                changes.fulfill(seen)
            }
        }
        let pair = try OneBatchPair(group: group) { WatermarkProbe() }
        for client in pair.clients { #expect(client.read(atLeast: 3 * 2048 + 9000).count == 3 * 2048 + 9000) }
        // Held past the high watermark: "not writable", then, once the queue drained, "writable".
        for probe in pair.handlers { #expect(probe.changes.wait() == [false, true]) }
    }
}
