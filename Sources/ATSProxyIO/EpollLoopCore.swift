internal import CATSPoll
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `epoll` backend: a dedicated thread waits in the kernel poller (epoll on Linux, kqueue on
/// Darwin), reports ready registrations to their watchers, fires due timers and runs queued tasks.
///
/// Registrations: edge-triggered ones watch input and output for the fd's whole life (so
/// `setInterest` is never needed: `tracksInterest` is false); level-triggered ones (the listener)
/// watch what `register` asked for. Closing an fd removes it from the poller, so
/// `unregisterAndClose` saves the `epoll_ctl`.
///
/// Threading: `enqueue` and `requestStop` may be called from any thread (the inbox is behind
/// `inboxLock`, and an eventfd wakes the poller); everything else runs on the loop thread. The
/// thread exits once a stop was requested and no registration or timer is left.
final class EpollLoopCore: LoopCore, @unchecked Sendable {
    let backend = EventLoopBackend.epoll
    let state = LoopState(tracksInterest: false)
    let poller: Int32
    private let wakeup: Int32
    private var thread: pthread_t?
    private let started = DispatchSemaphore(value: 0)

    // Cross-thread inbox.
    private let inboxLock = NSLock()
    private var inbox: [@Sendable () -> Void] = []
    private var wakeupPending = false
    private var stopRequested = false

    private var events = [ats_poll_event](repeating: ats_poll_event(), count: 256)
    /// Held small writes (`LoopState.batchedWriters`) go out at least every this many reports, so
    /// that the first connection of a long batch does not wait for all the others.
    static let reportsPerFlush = 32
    private var reportsSinceFlush = 0

    init(name: String) {
        poller = ats_poll_create()
        precondition(poller >= 0, "cannot create the poller: \(IOError.current("poll create"))")
        wakeup = ats_wakeup_create(poller, 0)
        precondition(wakeup >= 0, "cannot create the loop wakeup: \(IOError.current("wakeup create"))")
        let start = ThreadStart(core: self, name: name)
        let thread = Thread { start.run() }
        thread.name = name
        thread.start()
        started.wait()
    }

    /// The thread's entry: the only strong reference to the core for the thread's life.
    private final class ThreadStart: @unchecked Sendable {
        let core: EpollLoopCore
        let name: String
        init(core: EpollLoopCore, name: String) {
            self.core = core
            self.name = name
        }
        func run() {
            // `Thread.name` does not reach the OS thread on Linux; name it for top, perf and /proc.
            ats_set_current_thread_name(name)
            core.thread = pthread_self()
            core.started.signal()
            core.run()
        }
    }

    var isCurrentThread: Bool {
        guard let thread else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    func enqueue(_ work: @escaping @Sendable () -> Void) {
        if isCurrentThread {
            state.local.append(work)
            return
        }
        let signal: Bool = inboxLock.withLock {
            inbox.append(work)
            defer { wakeupPending = true }
            return !wakeupPending
        }
        if signal { _ = ats_wakeup_signal(wakeup) }
    }

    func requestStop() {
        let signal: Bool = inboxLock.withLock {
            stopRequested = true
            defer { wakeupPending = true }
            return !wakeupPending
        }
        if signal { _ = ats_wakeup_signal(wakeup) }
    }

    // MARK: Registrations

    func register(fd: Int32, interest: UInt32, edgeTriggered: Bool, watcher: any LoopWatcher)
        throws(IOError) -> LoopToken
    {
        let token = state.allocate(watcher)
        let bits = edgeTriggered ? UInt32(ATS_POLL_IN | ATS_POLL_OUT) : interest
        if ats_poll_add(poller, fd, bits, edgeTriggered ? 1 : 0, token.raw) != 0 {
            let error = IOError.current("poll add")
            state.release(token)
            throw error
        }
        return token
    }

    /// Nothing to do: an edge-triggered registration watches both directions for its whole life,
    /// and a level-triggered one (the listener) keeps what `register` asked for.
    func setInterest(_ token: LoopToken, interest: UInt32) {}

    func unregister(_ token: LoopToken, fd: Int32, then: @escaping () -> Void) {
        _ = ats_poll_remove(poller, fd)
        state.release(token)
        state.local.append(then)
    }

    func unregisterAndClose(_ token: LoopToken, fd: Int32, then: (() -> Void)?) {
        state.release(token)
        sysClose(fd)
        if let then { state.local.append(then) }
    }

    // MARK: Running

    private func run() {
        let state = state
        while true {
            state.runLocal()
            let timeout: Int32
            if !state.local.isEmpty {
                timeout = 0
            } else if let deadline = state.timers.earliestDeadline {
                state.now = ats_monotonic_nanoseconds()
                timeout = deadline <= state.now ? 0 : Int32(clamping: (deadline - state.now + 999_999) / 1_000_000)
            } else {
                timeout = -1
            }
            let count = events.withUnsafeMutableBufferPointer {
                ats_poll_wait(poller, $0.baseAddress, Int32($0.count), timeout)
            }
            state.now = ats_monotonic_nanoseconds()
            if count < 0 {
                let code = errno
                precondition(code == EINTR, "poll wait failed: \(IOError(call: "poll wait", errno: code))")
                continue
            }
            // A lone report has no other connection to serve first: its writes go out at once.
            state.deliveringBatch = count > 1
            reportsSinceFlush = 0
            for index in 0..<Int(count) {
                let event = events[index]
                if event.token == 0 {
                    if drainInbox() {
                        state.flushBatchedWriters()
                        return shutDown()
                    }
                    continue
                }
                let slot = Int(truncatingIfNeeded: event.token & 0xFFFF_FFFF)
                let generation = UInt32(truncatingIfNeeded: event.token >> 32)
                guard let watcher = state.watcher(slot: slot, generation: generation) else { continue }
                state.reportsDelivered &+= 1
                watcher.loopEvent(event.events)
                reportsSinceFlush += 1
                if reportsSinceFlush == Self.reportsPerFlush {
                    reportsSinceFlush = 0
                    state.flushBatchedWriters()
                    state.deliveringBatch = true
                }
            }
            state.flushBatchedWriters()
            state.fireDueTimers()
        }
    }

    /// Takes the cross-thread tasks and runs them. Returns true when the loop must stop.
    private func drainInbox() -> Bool {
        ats_wakeup_drain(wakeup)
        let (tasks, stop) = inboxLock.withLock { () -> ([@Sendable () -> Void], Bool) in
            let tasks = inbox
            inbox = []
            wakeupPending = false
            return (tasks, stopRequested)
        }
        for work in tasks { work() }
        return stop && state.isIdle
    }

    private func shutDown() {
        ats_wakeup_close(wakeup, poller)
        _ = close(poller)
    }
}
