import Dispatch
import Foundation
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

@Suite("LoopTimer, SignalWatcher, GracefulShutdown")
struct TimerSignalTests {
    final class Counter: @unchecked Sendable {
        let lock = NSLock()
        var value = 0
        func bump() { lock.withLock { value += 1 } }
        var current: Int { lock.withLock { value } }
    }

    @Test("a one-shot timer fires once; a cancelled one never fires")
    func oneShot() {
        let loop = EventLoop()
        let fired = Counter()
        let cancelledFired = Counter()
        let armedAfterFire = Expectation<Bool>()
        loop.execute {
            var timer: LoopTimer?
            timer = LoopTimer.oneShot(on: loop, after: .milliseconds(20)) {
                fired.bump()
                armedAfterFire.fulfill(timer?.isArmed ?? true)
            }
            let doomed = LoopTimer.oneShot(on: loop, after: .milliseconds(10)) { cancelledFired.bump() }
            doomed.cancel()
        }
        #expect(armedAfterFire.wait(seconds: 5) == false)
        usleep(100_000)
        #expect(fired.current == 1)
        #expect(cancelledFired.current == 0)
    }

    @Test("a repeating timer fires until cancelled")
    func repeating() {
        let loop = EventLoop()
        let ticks = Counter()
        let done = Expectation<Bool>()
        loop.execute {
            var timer: LoopTimer?
            timer = LoopTimer.repeating(on: loop, every: .milliseconds(10)) {
                ticks.bump()
                if ticks.current == 3 {
                    timer?.cancel()
                    done.fulfill(true)
                }
            }
        }
        #expect(done.wait(seconds: 5) == true)
        usleep(60_000)
        #expect(ticks.current == 3)
    }

    @Test("rescheduling pushes an idle timeout back")
    func reschedule() {
        let loop = EventLoop()
        let firedAt = Expectation<Date>()
        let start = Date()
        loop.execute {
            let timer = LoopTimer.oneShot(on: loop, after: .milliseconds(50)) { firedAt.fulfill(Date()) }
            loop.execute(after: .milliseconds(30)) {
                #expect(timer.reschedule(after: .milliseconds(100)))
            }
        }
        let fired = firedAt.wait(seconds: 5)
        #expect(fired.map { $0.timeIntervalSince(start) >= 0.12 } == true)
    }

    @Test("a timeout pushed back and then brought forward fires at the earlier deadline")
    func rescheduleLaterThenEarlier() {
        let loop = EventLoop()
        let firedAt = Expectation<Date>()
        let start = Date()
        loop.execute {
            let timer = LoopTimer.oneShot(on: loop, after: .seconds(2)) { firedAt.fulfill(Date()) }
            // Later: the timer keeps its heap slot at 2 s and only notes 4 s.
            #expect(timer.reschedule(after: .seconds(4)))
            // Earlier than its slot: it must move up, not wait for 2 s (nor 4 s).
            #expect(timer.reschedule(after: .milliseconds(40)))
        }
        let fired = firedAt.wait(seconds: 8)
        let elapsed = fired.map { $0.timeIntervalSince(start) } ?? 99
        // Generous for a loaded machine, and still well before the 2 s slot.
        #expect(elapsed >= 0.04 && elapsed < 1.5, "fired after \(elapsed) s")
    }

    @Test("SIGUSR1 and SIGHUP reach their callbacks instead of killing the process")
    func signals() {
        let watcher = SignalWatcher()
        defer { watcher.cancelAll() }
        let user1 = Expectation<Bool>()
        let reload = Expectation<Bool>()
        watcher.watch(SIGUSR1) { user1.fulfill(true) }
        watcher.watch(SIGHUP) { reload.fulfill(true) }
        // Sources register asynchronously; until then the signals are ignored, so keep sending.
        var delivered = false
        for _ in 0..<100 where !delivered {
            kill(getpid(), SIGUSR1)
            kill(getpid(), SIGHUP)
            delivered = user1.wait(seconds: 0.05) == true && reload.wait(seconds: 0.05) == true
        }
        #expect(delivered)
    }

    @Test("graceful shutdown stops accepting and waits for in-flight connections")
    func gracefulShutdownDrains() throws {
        let group = EventLoopGroup(loopCount: 1)
        let listener = try startEchoServer(group: group)
        let client = try BlockingClient(connectingTo: listener.boundAddress)
        #expect(eventually { listener.liveConnections == 1 })
        let finished = Expectation<Bool>()
        let shutdown = GracefulShutdown(
            gracePeriod: .seconds(5), stopAccepting: { listener.stop() }, inFlight: { listener.liveConnections },
            onFinished: { finished.fulfill($0) })
        shutdown.begin()
        usleep(50_000)
        #expect(throws: IOError.self) { _ = try BlockingClient(connectingTo: listener.boundAddress) }
        // The in-flight connection still works.
        client.send("last words")
        client.shutdownWrite()
        #expect(String(decoding: client.readToEnd(), as: UTF8.self) == "last words")
        client.close()
        #expect(finished.wait(seconds: 5) == true)
    }

    @Test("graceful shutdown gives up at the grace period; a second begin() finishes at once")
    func gracefulShutdownDeadline() throws {
        let stuck = Expectation<Bool>()
        let shutdown = GracefulShutdown(
            gracePeriod: .milliseconds(100), stopAccepting: {}, inFlight: { 1 }, onFinished: { stuck.fulfill($0) })
        shutdown.begin()
        #expect(stuck.wait(seconds: 5) == false)
        let impatient = Expectation<Bool>()
        let second = GracefulShutdown(
            gracePeriod: .seconds(60), stopAccepting: {}, inFlight: { 1 }, onFinished: { impatient.fulfill($0) })
        second.begin()
        second.begin()
        #expect(impatient.wait(seconds: 5) == false)
    }
}
