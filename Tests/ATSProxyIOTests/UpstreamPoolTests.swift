import ATSHTTP2
import ATSPolicy
import ATSProxyCore
import Foundation
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

/// `UpstreamPool` lets go of what it parks: shutdown closes every parked connection and releases its entry,
/// and an entry whose idle timer is still armed keeps nothing alive once the pool and the connection dropped
/// it (issue 17, finding 8: the timer closure held its owner strongly, a cycle LeakSanitizer saw at exit).
@Suite struct UpstreamPoolTests {
    /// A connected socket pair: the pool's side as a `TCPConnection` on `loop`, the origin's side as an fd.
    static func pair(on loop: EventLoop) -> (TCPConnection, Int32) {
        var fds: [Int32] = [0, 0]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (TCPConnection(adopting: fds[0], loop: loop), fds[1])
    }

    /// Whether the peer of `fd` closed (read returns 0) within `seconds`.
    static func sawEOF(_ fd: Int32, seconds: Double = 5) -> Bool {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var byte: UInt8 = 0
        return read(fd, &byte, 1) == 0
    }

    static func lease(_ host: String) -> UpstreamLease {
        UpstreamLease(
            key: UpstreamKey(host: host, port: 443, requirements: nil, permissive: false), tls: nil, facts: nil,
            wire: .http1, shareable: true)
    }

    /// Runs `body` on `loop` and waits for it.
    static func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) -> T? {
        let result = Expectation<T>()
        loop.execute { result.fulfill(body()) }
        return result.wait(seconds: 10)
    }

    /// A weak reference readable from any thread.
    final class WeakBox: @unchecked Sendable {
        weak var object: AnyObject?
    }

    @Test func shutdownClosesEveryParkedConnectionAndReleasesItsEntry() {
        let loop = EventLoop()
        let pool = UpstreamPool(loop: loop, idleTime: .seconds(60))
        let (first, firstPeer) = Self.pair(on: loop)
        let (second, secondPeer) = Self.pair(on: loop)
        defer {
            close(firstPeer)
            close(secondPeer)
        }
        let entries = [WeakBox(), WeakBox()]
        _ = Self.onLoop(loop) {
            for (index, connection) in [first, second].enumerated() {
                connection.start()
                pool.park(connection, lease: Self.lease("origin\(index).test"))
                entries[index].object = connection.handler
            }
            return true
        }
        #expect(entries.allSatisfy { $0.object != nil }, "the pool parked both")
        _ = Self.onLoop(loop) { pool.shutdown() }
        #expect(Self.sawEOF(firstPeer) && Self.sawEOF(secondPeer))
        // Once the loop has handled the closes, nothing holds the entries (their idle timers are gone too).
        let released = E2EPoll.until(seconds: 5) {
            Self.onLoop(loop) { entries.allSatisfy { $0.object == nil } } == true
        }
        #expect(released)
        let acquired = Self.onLoop(loop) {
            pool.acquire(Self.lease("origin0.test").key, owner: NoOwner(), lane: 0) == nil
        }
        #expect(acquired == true, "a pool that shut down hands nothing out")
    }

    @Test func aParkedEntryIsNotKeptAliveByItsArmedIdleTimer() {
        let loop = EventLoop()
        let box = WeakBox()
        let (connection, peer) = Self.pair(on: loop)
        defer { close(peer) }
        _ = Self.onLoop(loop) {
            // A pool that goes away without shutdown (its server was released) while an entry waits.
            let pool = UpstreamPool(loop: loop, idleTime: .seconds(3600))
            connection.start()
            pool.park(connection, lease: Self.lease("origin.test"))
            box.object = connection.handler
            // The connection forgets its handler (as it does once closed): only the armed timer could hold it.
            connection.handler = nil
            return true
        }
        let released = E2EPoll.until(seconds: 5) { Self.onLoop(loop) { box.object == nil } == true }
        #expect(released, "the idle timer's closure kept the parked entry alive")
    }

    /// An owner for `acquire` that never gets a channel.
    final class NoOwner: UpstreamChannelOwner {
        func channelParts(lane: Int32, _ parts: [HTTPPart]) {}
        func channelReset(lane: Int32, code: HTTP2ErrorCode) {}
        func channelWritable(lane: Int32, _ writable: Bool) {}
        func pendingLinkSettled(lane: Int32, linked: Bool) {}
    }
}

/// Polls a condition until it holds or time runs out.
enum E2EPoll {
    static func until(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return condition()
    }
}
