import COpenSSLShims
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Something registered with a loop's poller: it receives readiness reports on the loop thread.
protocol LoopWatcher: AnyObject {
    /// `events` holds `ATS_POLL_*` bits.
    func loopEvent(_ events: UInt32)
}

/// A registration with a loop's poller: the watcher's slot and a generation that makes reports
/// for an earlier occupant of the slot harmless.
struct LoopToken: Equatable {
    let slot: Int
    let generation: UInt32

    var raw: UInt64 { UInt64(generation) << 32 | UInt64(slot) }
}

/// One I/O loop: a dedicated thread that waits in the poller (epoll on Linux, kqueue on Darwin)
/// and runs every socket handler, timer and task of the connections assigned to it, plus a read
/// buffer those connections share.
///
/// Why not Dispatch sources: on Linux every source event travels from libdispatch's epoll manager
/// thread to a worker thread (a context switch and two `epoll_ctl` re-arms per event), and every
/// timer re-arm is a timerfd syscall on the manager. Here one thread waits, handles what is ready
/// and waits again: a keep-alive request through the proxy costs two poller reports and no
/// `epoll_ctl` at all (connections are registered once, edge-triggered).
///
/// Threading: `execute` (and `executeOrRun`) may be called from any thread; everything else that
/// touches loop state (registrations, timers, `readBuffer`) runs on the loop thread, checked with
/// `assertInLoop` in debug builds. That confinement is the invariant behind `@unchecked Sendable`.
/// The thread exits once the loop is released (connections and armed timers keep it alive).
public final class EventLoop: @unchecked Sendable, CustomStringConvertible {
    /// The loop's index within its group (0-based), used in thread names and logs.
    public let index: Int
    /// The size of the shared read buffer: the most bytes one `onRead` callback delivers.
    public let readBufferSize: Int
    /// Shared read buffer, reused by every connection on this loop (no per-read allocation).
    let readBuffer: UnsafeMutableRawBufferPointer
    /// The state the loop thread owns; the thread holds only this, never the `EventLoop`.
    let core: LoopCore

    /// Creates a loop with its own thread. `readBufferSize` defaults to 64 KiB.
    public init(index: Int = 0, readBufferSize: Int = 64 * 1024, label: String = "ats-proxy.loop") {
        precondition(readBufferSize > 0, "read buffer must not be empty")
        self.index = index
        self.readBufferSize = readBufferSize
        self.readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readBufferSize, alignment: 16)
        core = LoopCore(name: "\(label).\(index)")
    }

    deinit {
        core.requestStop()
        readBuffer.deallocate()
    }

    /// Runs `work` on the loop asynchronously, after the current handler returns when called on the
    /// loop. The block is `@Sendable` because it may cross threads.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        core.enqueue(work)
    }

    /// Runs `work` on the loop after `delay`; a one-shot `LoopTimer` nobody can cancel.
    public func execute(after delay: Duration, _ work: @escaping @Sendable () -> Void) {
        execute { [self] in _ = LoopTimer.oneShot(on: self, after: delay, handler: work) }
    }

    /// True when called on this loop's thread.
    public var inLoop: Bool { core.isCurrentThread }

    /// Traps (in debug builds) unless running on the loop's thread.
    @inline(__always)
    public func assertInLoop() {
        assert(core.isCurrentThread, "\(self): called off its loop thread")
    }

    /// Runs `work` on the loop: immediately when already on it, otherwise asynchronously.
    public func executeOrRun(_ work: @escaping @Sendable () -> Void) {
        if inLoop { work() } else { execute(work) }
    }

    /// Runs `work` on the loop and waits for it. Never call it on the loop itself (it would wait
    /// forever); meant for tests and shutdown paths.
    public func submitAndWait<T: Sendable>(_ work: @Sendable () -> T) -> T {
        precondition(!inLoop, "submitAndWait on the loop's own thread would deadlock")
        let box = ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        withoutActuallyEscaping(work) { work in
            // The task drops `work` before signalling, so it has not escaped once the wait ends.
            box.work = work
            execute {
                box.value = box.work?()
                box.work = nil
                done.signal()
            }
            done.wait()
        }
        return box.value!
    }

    public var description: String { "EventLoop(\(index))" }

    // MARK: Loop-internal API (on the loop thread)

    /// Runs `work` on the loop after the current handler returns, without the `@Sendable`
    /// requirement (for loop-confined callers).
    func runSoon(_ work: @escaping () -> Void) {
        assertInLoop()
        core.local.append(work)
    }

    /// The loop's clock: monotonic nanoseconds as of the current iteration.
    var now: UInt64 { core.now }
}

/// Carries a result from the loop back to a waiting thread (the semaphore orders the accesses).
private final class ResultBox<T>: @unchecked Sendable {
    var work: (@Sendable () -> T)?
    var value: T?
}

/// The loop thread's state. Not `Sendable` in spirit: everything except the task inbox (behind
/// `inboxLock`) and `stopRequested` is touched only by the loop thread.
final class LoopCore: @unchecked Sendable {
    let poller: Int32
    private let wakeup: Int32
    private var thread: pthread_t?
    private let started = DispatchSemaphore(value: 0)

    // Cross-thread inbox.
    private let inboxLock = NSLock()
    private var inbox: [@Sendable () -> Void] = []
    private var wakeupPending = false
    private var stopRequested = false

    // Loop-thread state.
    var local: [() -> Void] = []
    private var watchers: [(any LoopWatcher)?] = [nil]  // slot 0 is the wakeup channel
    private var generations: [UInt32] = [0]
    private var freeSlots: [Int] = []
    var timers = TimerHeap()
    private(set) var now: UInt64 = ats_monotonic_nanoseconds()
    private var events = [ats_poll_event](repeating: ats_poll_event(), count: 256)

    init(name: String) {
        poller = ats_poll_create()
        precondition(poller >= 0, "cannot create the poller: \(IOError.current("poll create"))")
        wakeup = ats_wakeup_create(poller, 0)
        precondition(wakeup >= 0, "cannot create the loop wakeup: \(IOError.current("wakeup create"))")
        let start = ThreadStart(core: self)
        let thread = Thread { start.run() }
        thread.name = name
        thread.start()
        started.wait()
    }

    /// The thread's entry: the only strong reference to the core for the thread's life.
    private final class ThreadStart: @unchecked Sendable {
        let core: LoopCore
        init(core: LoopCore) { self.core = core }
        func run() {
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
            local.append(work)
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

    func register(fd: Int32, interest: UInt32, edgeTriggered: Bool, watcher: any LoopWatcher) throws(IOError)
        -> LoopToken
    {
        let token = allocate(watcher)
        if ats_poll_add(poller, fd, interest, edgeTriggered ? 1 : 0, token.raw) != 0 {
            let error = IOError.current("poll add")
            release(token)
            throw error
        }
        return token
    }

    func modify(fd: Int32, token: LoopToken, interest: UInt32, edgeTriggered: Bool) {
        _ = ats_poll_modify(poller, fd, interest, edgeTriggered ? 1 : 0, token.raw)
    }

    /// Hands a registration to another watcher (a connector's socket becoming a connection).
    func reassign(_ token: LoopToken, to watcher: any LoopWatcher) {
        precondition(generations[token.slot] == token.generation, "stale loop token")
        watchers[token.slot] = watcher
    }

    /// Forgets a registration. `fd` is removed from the poller unless it is about to be closed
    /// (closing removes it, and saves the syscall).
    func unregister(_ token: LoopToken, fd: Int32, closing: Bool) {
        if !closing { _ = ats_poll_remove(poller, fd) }
        release(token)
    }

    private func allocate(_ watcher: any LoopWatcher) -> LoopToken {
        if let slot = freeSlots.popLast() {
            watchers[slot] = watcher
            return LoopToken(slot: slot, generation: generations[slot])
        }
        watchers.append(watcher)
        generations.append(1)
        return LoopToken(slot: watchers.count - 1, generation: 1)
    }

    private func release(_ token: LoopToken) {
        guard generations[token.slot] == token.generation else { return }
        watchers[token.slot] = nil
        generations[token.slot] &+= 1
        if generations[token.slot] == 0 { generations[token.slot] = 1 }
        freeSlots.append(token.slot)
    }

    // MARK: Running

    private func run() {
        while true {
            runLocal()
            let timeout: Int32
            if !local.isEmpty {
                timeout = 0
            } else if let deadline = timers.earliestDeadline {
                now = ats_monotonic_nanoseconds()
                timeout = deadline <= now ? 0 : Int32(clamping: (deadline - now + 999_999) / 1_000_000)
            } else {
                timeout = -1
            }
            let count = events.withUnsafeMutableBufferPointer {
                ats_poll_wait(poller, $0.baseAddress, Int32($0.count), timeout)
            }
            now = ats_monotonic_nanoseconds()
            if count < 0 {
                let code = errno
                precondition(code == EINTR, "poll wait failed: \(IOError(call: "poll wait", errno: code))")
                continue
            }
            for index in 0..<Int(count) {
                let event = events[index]
                if event.token == 0 {
                    if drainInbox() { return shutDown() }
                    continue
                }
                let slot = Int(truncatingIfNeeded: event.token & 0xFFFF_FFFF)
                let generation = UInt32(truncatingIfNeeded: event.token >> 32)
                guard slot < watchers.count, generations[slot] == generation, let watcher = watchers[slot] else {
                    continue
                }
                watcher.loopEvent(event.events)
            }
            fireDueTimers()
        }
    }

    /// Fires every timer whose deadline passed, one at a time (a handler may arm or cancel timers).
    private func fireDueTimers() {
        while let first = timers.first, first.deadline <= now {
            timers.remove(first)
            first.fire(now: now)
        }
    }

    /// Runs the tasks queued on the loop itself (and those they queue) until none are left, at most
    /// a few rounds so timers and sockets are not starved by a task that keeps re-queueing.
    private func runLocal() {
        var rounds = 0
        while !local.isEmpty && rounds < 16 {
            let batch = local
            local = []
            for work in batch { work() }
            rounds += 1
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
        return stop && watchers.dropFirst().allSatisfy { $0 == nil } && timers.isEmpty
    }

    private func shutDown() {
        ats_wakeup_close(wakeup, poller)
        _ = close(poller)
    }
}

/// The loop's timers: a binary min-heap on deadlines whose entries know their index, so that
/// rescheduling and cancelling are O(log n) without leaving dead entries behind.
struct TimerHeap {
    private var heap: [LoopTimer] = []

    var isEmpty: Bool { heap.isEmpty }
    var first: LoopTimer? { heap.first }
    var earliestDeadline: UInt64? { heap.first?.deadline }

    mutating func insert(_ timer: LoopTimer) {
        timer.heapIndex = heap.count
        heap.append(timer)
        siftUp(heap.count - 1)
    }

    mutating func remove(_ timer: LoopTimer) {
        let index = timer.heapIndex
        guard index >= 0, index < heap.count, heap[index] === timer else { return }
        timer.heapIndex = -1
        let last = heap.removeLast()
        guard index < heap.count else { return }
        heap[index] = last
        last.heapIndex = index
        siftDown(index)
        siftUp(index)
    }

    /// Re-sorts `timer` after its deadline changed.
    mutating func update(_ timer: LoopTimer) {
        let index = timer.heapIndex
        guard index >= 0, index < heap.count, heap[index] === timer else { return }
        siftDown(index)
        siftUp(index)
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { return }
            swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count, heap[left + 1].deadline < heap[left].deadline { smallest = left + 1 }
            guard heap[smallest].deadline < heap[parent].deadline else { return }
            swapAt(parent, smallest)
            parent = smallest
        }
    }

    private mutating func swapAt(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        heap[a].heapIndex = a
        heap[b].heapIndex = b
    }
}

/// A fixed set of `EventLoop`s, one per core by default, that hands out loops round-robin.
///
/// Thread-safe: `next()` may be called from any thread; the round-robin counter is protected by a
/// lock. Loops live as long as the group (or longer, while they still have connections).
public final class EventLoopGroup: @unchecked Sendable {
    /// The loops, in index order.
    public let loops: [EventLoop]
    private let lock = NSLock()
    private var nextIndex = 0

    /// Creates `loopCount` loops (default: one per online core). Also ignores `SIGPIPE` and tunes
    /// the allocator (`IOSystem.tuneAllocator`).
    public init(loopCount: Int = IOSystem.coreCount, readBufferSize: Int = 64 * 1024) {
        precondition(loopCount > 0, "an event loop group needs at least one loop")
        IOSystem.ignoreSIGPIPE()
        IOSystem.tuneAllocator()
        loops = (0..<loopCount).map { EventLoop(index: $0, readBufferSize: readBufferSize) }
    }

    /// The next loop in round-robin order.
    public func next() -> EventLoop {
        lock.lock()
        defer { lock.unlock() }
        let loop = loops[nextIndex]
        nextIndex = (nextIndex + 1) % loops.count
        return loop
    }
}

/// A value that may only be used on one loop, carried across a `@Sendable` boundary.
///
/// Invariant: `value` is read only on `loop`'s thread (checked in debug builds). Used to hand
/// non-`Sendable` callbacks to other threads (the resolver's worker, other loops) and get them
/// back on their loop.
struct LoopBound<Value>: @unchecked Sendable {
    private let stored: Value
    let loop: EventLoop

    init(_ value: Value, loop: EventLoop) {
        self.stored = value
        self.loop = loop
    }

    var value: Value {
        loop.assertInLoop()
        return stored
    }
}
