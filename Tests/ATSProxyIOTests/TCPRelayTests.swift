import Dispatch
import Foundation
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

/// A repeating byte pattern of prime length, stored twice so any window of up to `period` bytes
/// starting at `offset % period` is contiguous. Lets both ends verify content and order with memcmp.
struct Pattern: Sendable {
    let period: Int
    let doubled: [UInt8]

    init(period: Int = 1_000_003) {
        var state: UInt64 = 0x9e37_79b9_7f4a_7c15
        var bytes = [UInt8](repeating: 0, count: period)
        for index in 0..<period {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes[index] = UInt8(truncatingIfNeeded: state >> 56)
        }
        self.period = period
        self.doubled = bytes + bytes
    }

    /// True when `bytes` equal the pattern at stream position `position`.
    func matches(_ bytes: UnsafeRawBufferPointer, at position: UInt64) -> Bool {
        var offset = 0
        var position = position
        while offset < bytes.count {
            let start = Int(position % UInt64(period))
            let length = min(period, bytes.count - offset)
            let equal = doubled.withUnsafeBytes { pattern in
                memcmp(pattern.baseAddress! + start, bytes.baseAddress! + offset, length) == 0
            }
            if !equal { return false }
            offset += length
            position += UInt64(length)
        }
        return true
    }
}

/// Writes `total` pattern bytes as fast as the connection's watermarks allow, then half-closes.
final class PatternProducer: TCPConnectionHandler {
    let pattern: Pattern
    let total: UInt64
    var sent: UInt64 = 0

    init(pattern: Pattern, total: UInt64) {
        self.pattern = pattern
        self.total = total
    }

    func pump(_ connection: TCPConnection) {
        while connection.isWritable, sent < total {
            let start = Int(sent % UInt64(pattern.period))
            let length = Int(min(UInt64(256 * 1024), total - sent))
            pattern.doubled.withUnsafeBytes {
                connection.write(UnsafeRawBufferPointer(rebasing: $0[start..<(start + length)]))
            }
            sent += UInt64(length)
        }
        if sent == total { connection.shutdownWrite() }
    }

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {}
    func connectionDidReadEOF(_ connection: TCPConnection) {}
    func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool) {
        if isWritable { pump(connection) }
    }
    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {}
}

/// Reads one buffer, then pauses for a millisecond: a deliberately slow consumer.
final class SlowSink: TCPConnectionHandler {
    let pattern: Pattern
    let result: Expectation<(UInt64, Bool)>
    var received: UInt64 = 0
    var intact = true

    init(pattern: Pattern, result: Expectation<(UInt64, Bool)>) {
        self.pattern = pattern
        self.result = result
    }

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        if intact, !pattern.matches(bytes, at: received) { intact = false }
        received += UInt64(bytes.count)
        connection.pauseReading()
        _ = LoopTimer.oneShot(on: connection.loop, after: .milliseconds(1)) { connection.resumeReading() }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        result.fulfill((received, intact))
        connection.close()
    }

    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {}
}

@Suite("TCPRelay")
struct TCPRelayTests {
    @Test("64 MiB through the relay to a slow reader: intact, and the relay's queue stays bounded")
    func relayBackPressure() throws {
        let pattern = Pattern()
        let total: UInt64 = 64 << 20
        let group = EventLoopGroup(loopCount: 2)
        let sinkResult = Expectation<(UInt64, Bool)>()
        let relayStats = Expectation<TCPRelay.Statistics>()
        let sink = try TCPListener(
            configuration: .init(address: ListenAddress(parsing: "127.0.0.1:0")!), group: group,
            onAccept: { connection in connection.handler = SlowSink(pattern: pattern, result: sinkResult) })
        sink.start()
        defer { stopAndWait(sink) }
        let sinkAddress = sink.boundAddress
        let relay = try TCPListener(
            configuration: .init(address: ListenAddress(parsing: "127.0.0.1:0")!), group: group,
            onAccept: { client in
                // Hold the client's bytes until the upstream side exists.
                client.pauseReading()
                TCPConnector.connect(to: [sinkAddress], on: client.loop) { result in
                    guard case .success(let upstream) = result else {
                        client.close()
                        return
                    }
                    TCPRelay(client, upstream) { relayStats.fulfill($0) }.start()
                    client.resumeReading()
                }
            })
        relay.start()
        defer { stopAndWait(relay) }
        let relayAddress = relay.boundAddress
        let producerLoop = EventLoop()
        producerLoop.execute {
            TCPConnector.connect(to: [relayAddress], on: producerLoop) { result in
                guard case .success(let connection) = result else { return }
                let producer = PatternProducer(pattern: pattern, total: total)
                connection.handler = producer
                producer.pump(connection)
            }
        }
        let outcome = try #require(sinkResult.wait(seconds: 25))
        #expect(outcome.0 == total)
        #expect(outcome.1, "bytes arrived out of order or corrupted")
        let stats = try #require(relayStats.wait(seconds: 5))
        #expect(stats.bytesFirstToSecond == total)
        let bound = 256 * 1024 + group.loops[0].readBufferSize
        #expect(stats.maxQueuedSecond <= bound, "relay queued \(stats.maxQueuedSecond) bytes, bound \(bound)")
        // More than the epoll loop holds for the end of a batch: the queue really backed up.
        #expect(
            stats.maxQueuedSecond > TCPConnection.batchedWriteLimit,
            "the slow reader never made the relay queue more than \(stats.maxQueuedSecond) bytes")
    }

    @Test("a reset on one side closes the other side of the relay")
    func relayPropagatesClose() throws {
        let group = EventLoopGroup(loopCount: 1)
        let echo = try startEchoServer(group: group)
        defer { stopAndWait(echo) }
        let echoAddress = echo.boundAddress
        let relayStats = Expectation<TCPRelay.Statistics>()
        let relay = try TCPListener(
            configuration: .init(address: ListenAddress(parsing: "127.0.0.1:0")!), group: group,
            onAccept: { client in
                client.pauseReading()
                TCPConnector.connect(to: [echoAddress], on: client.loop) { result in
                    guard case .success(let upstream) = result else {
                        client.close()
                        return
                    }
                    TCPRelay(client, upstream) { relayStats.fulfill($0) }.start()
                    client.resumeReading()
                }
            })
        relay.start()
        defer { stopAndWait(relay) }
        let client = try BlockingClient(connectingTo: relay.boundAddress)
        client.send("through the tunnel")
        #expect(String(decoding: client.read(atLeast: 18), as: UTF8.self) == "through the tunnel")
        client.reset()
        let stats = try #require(relayStats.wait(seconds: 5))
        #expect(stats.firstCloseReason == .reset)
        #expect(stats.bytesFirstToSecond == 18)
        #expect(stats.bytesSecondToFirst == 18)
        #expect(eventually { echo.liveConnections == 0 })
    }
}
