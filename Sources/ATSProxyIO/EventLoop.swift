internal import CATSPoll
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Something registered with a loop (`LoopCore.register`): it receives readiness reports on the loop.
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

/// How a loop waits for sockets and timers. Chosen per `EventLoopGroup` (`--event-loop`).
///
/// Both backends keep the same contracts (`EventLoop`, `LoopCore`): watchers get `ATS_POLL_*`
/// reports on the loop, one at a time, and share the loop's read buffer.
public enum EventLoopBackend: String, Sendable, CaseIterable, CustomStringConvertible {
    /// A dedicated thread per loop waiting in the kernel poller (epoll on Linux, kqueue on Darwin),
    /// with sockets registered once, edge-triggered. The cheapest per event on Linux.
    case epoll
    /// A serial `DispatchQueue` per loop, with a `DispatchSourceRead`/`DispatchSourceWrite` per
    /// socket and one `DispatchSourceTimer` driving the loop's timer heap: the design the product
    /// brief names, and the natural choice on Darwin, where Dispatch sources are kqueue-native.
    case dispatch

    /// The default for this platform: `epoll` on Linux (libdispatch there hops every source event
    /// from its epoll manager thread to a worker and re-arms the fd twice), `dispatch` elsewhere.
    public static var platformDefault: EventLoopBackend {
        #if os(Linux)
            return .epoll
        #else
            return .dispatch
        #endif
    }

    public var description: String { rawValue }
}

/// One I/O loop: every socket handler, timer and task of the connections assigned to it runs here,
/// one at a time, plus a read buffer those connections share.
///
/// The backend decides what "here" is (see `EventLoopBackend`): a dedicated thread waiting in
/// epoll/kqueue (`EpollLoopCore`), or a serial `DispatchQueue` fed by Dispatch sources
/// (`DispatchLoopCore`). Why the epoll thread is the Linux default: on Linux every Dispatch source
/// event travels from libdispatch's epoll manager thread to a worker thread (a context switch and
/// two `epoll_ctl` re-arms per event), and every timer re-arm is a timerfd syscall on the manager.
/// The epoll thread waits, handles what is ready and waits again: a keep-alive request through the
/// proxy costs two poller reports and no `epoll_ctl` at all (connections are registered once,
/// edge-triggered).
///
/// Threading: `execute` (and `executeOrRun`) may be called from any thread; everything else that
/// touches loop state (registrations, timers, `readBuffer`) runs on the loop, checked with
/// `assertInLoop` in debug builds. That confinement is the invariant behind `@unchecked Sendable`.
/// The loop stops once it is released (connections and armed timers keep it alive).
public final class EventLoop: @unchecked Sendable, CustomStringConvertible {
    /// The loop's index within its group (0-based), used in thread names and logs.
    public let index: Int
    /// The size of the shared read buffer: the most bytes one `onRead` callback delivers.
    public let readBufferSize: Int
    /// Shared read buffer, reused by every connection on this loop (no per-read allocation).
    let readBuffer: UnsafeMutableRawBufferPointer
    /// The backend the loop runs on; its thread or queue holds only this, never the `EventLoop`.
    let core: any LoopCore
    /// `core.state`, kept here so that loop-confined callers (timers, writes) reach it directly.
    let state: LoopState

    /// Creates a loop with its own thread (`epoll`) or queue (`dispatch`). `readBufferSize`
    /// defaults to 64 KiB.
    public init(
        index: Int = 0, readBufferSize: Int = 64 * 1024, label: String = "ats-loop",
        backend: EventLoopBackend = .platformDefault
    ) {
        precondition(readBufferSize > 0, "read buffer must not be empty")
        self.index = index
        self.readBufferSize = readBufferSize
        self.readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readBufferSize, alignment: 16)
        switch backend {
        case .epoll: core = EpollLoopCore(name: "\(label).\(index)")
        case .dispatch: core = DispatchLoopCore(name: "\(label).\(index)")
        }
        state = core.state
    }

    deinit {
        core.requestStop()
        readBuffer.deallocate()
    }

    /// The backend driving this loop.
    public var backend: EventLoopBackend { core.backend }

    /// Runs `work` on the loop asynchronously, after the current handler returns when called on the
    /// loop. The block is `@Sendable` because it may cross threads. Blocks submitted from one
    /// thread run in submission order.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        core.enqueue(work)
    }

    /// Runs `work` on the loop after `delay`; a one-shot `LoopTimer` nobody can cancel.
    public func execute(after delay: Duration, _ work: @escaping @Sendable () -> Void) {
        execute { [self] in _ = LoopTimer.oneShot(on: self, after: delay, handler: work) }
    }

    /// True when called on this loop (its thread, or a block running on its queue).
    public var inLoop: Bool { core.isCurrentThread }

    /// Traps (in debug builds) unless running on the loop.
    @inline(__always)
    public func assertInLoop() {
        assert(core.isCurrentThread, "\(self): called off its loop")
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

    // MARK: Loop-internal API (on the loop)

    /// Runs `work` on the loop after the current handler returns, without the `@Sendable`
    /// requirement (for loop-confined callers).
    func runSoon(_ work: @escaping () -> Void) {
        assertInLoop()
        state.local.append(work)
    }

    /// The loop's clock: monotonic nanoseconds as of the current iteration.
    var now: UInt64 { state.now }
}

/// Carries a result from the loop back to a waiting thread (the semaphore orders the accesses).
private final class ResultBox<T>: @unchecked Sendable {
    var work: (@Sendable () -> T)?
    var value: T?
}

/// A loop backend: what waits for sockets and timers and runs the loop's work. `EpollLoopCore` and
/// `DispatchLoopCore` conform; watchers (connections, connectors, listeners) register through it,
/// and everything the backends share (registrations' slots, the timer heap, loop-local tasks, the
/// clock, held writes) is its `state`, a `LoopState`.
///
/// Registration contract (both backends):
/// - `register` starts reports for `fd` to the watcher; `interest` is what the watcher wants now.
/// - `setInterest` changes that. Only backends with `state.tracksInterest` need it: the epoll backend
///   watches an edge-triggered registration for both directions for its whole life (a watcher
///   ignores reports it has no use for, and edges do not repeat), while a Dispatch source keeps
///   firing while its condition holds, so a direction nobody waits for must be switched off.
/// - `unregister` stops reports and leaves the fd open; `unregisterAndClose` also closes it, at
///   once (epoll) or once Dispatch has cancelled the fd's sources (the fd must stay open until
///   their cancel handlers ran), and then runs `then` on the loop. The token is dead either way.
///
/// Threading: `enqueue`, `requestStop` and `isCurrentThread` may be called from any thread;
/// everything else only on the loop. Conforming types are classes whose other state is confined to
/// the loop, which is why they may be `@unchecked Sendable`.
protocol LoopCore: AnyObject, Sendable {
    /// Which backend this is.
    var backend: EventLoopBackend { get }
    /// The bookkeeping every backend shares; created with the core, confined to the loop.
    var state: LoopState { get }

    /// True when called on the loop.
    var isCurrentThread: Bool { get }

    /// Queues `work` to run on the loop; any thread. Called on the loop, it runs after the current
    /// handler returns (a loop-local task).
    func enqueue(_ work: @escaping @Sendable () -> Void)

    /// Asks the loop to stop once it has no registrations and no timers left; any thread.
    func requestStop()

    /// Starts reports for `fd` (see the type's contract). `edgeTriggered` applies to the epoll
    /// backend, which then watches both directions regardless of `interest`.
    func register(fd: Int32, interest: UInt32, edgeTriggered: Bool, watcher: any LoopWatcher) throws(IOError)
        -> LoopToken

    /// Reports the watcher wants from now on (`ATS_POLL_IN`/`ATS_POLL_OUT` bits). Does nothing unless
    /// `state.tracksInterest`; a stale token is ignored.
    func setInterest(_ token: LoopToken, interest: UInt32)

    /// Forgets a registration and leaves `fd` open (the listener backing off). `then` runs on the loop
    /// once the backend has let go of `fd` (never within this call): only then may it be closed or
    /// registered again (Dispatch sources still own it until their cancel handlers have run).
    func unregister(_ token: LoopToken, fd: Int32, then: @escaping () -> Void)

    /// Forgets a registration and closes `fd` (now or once the backend lets go of it); `then`
    /// runs on the loop afterwards, never within this call. The caller must not touch `fd` again.
    func unregisterAndClose(_ token: LoopToken, fd: Int32, then: (() -> Void)?)
}

/// The state every loop backend shares: registrations with generation-checked tokens, the timer
/// heap, loop-local tasks, the loop clock and the writes held for the end of a batch. A backend
/// (`LoopCore`) creates it and owns it; `EventLoop` keeps a reference for the loop-confined hot
/// paths (`LoopTimer`, `TCPConnection.write`), so they reach it without a protocol call.
///
/// Threading: touched only on the loop (the backend's thread or queue); it is not `Sendable`.
/// Cost: slot allocation and release are O(1); timers are O(log n) (`TimerHeap`).
final class LoopState {
    /// True when watchers must keep `LoopCore.setInterest` current (see `LoopCore`'s contract).
    let tracksInterest: Bool
    /// Tasks queued on the loop itself; they run after the current handler returns.
    var local: [() -> Void] = []
    /// Watchers by slot; slot 0 is reserved (the epoll wakeup channel).
    private(set) var watchers: [(any LoopWatcher)?] = [nil]
    /// Each slot's current generation; a token of an older generation is stale.
    private(set) var generations: [UInt32] = [0]
    private var freeSlots: [Int] = []
    /// Slots in use (registrations not yet unregistered).
    private(set) var liveRegistrations = 0
    /// The loop's timers (`LoopTimer` inserts and removes itself).
    var timers = TimerHeap()
    /// The loop clock: monotonic nanoseconds, refreshed on every loop iteration or turn.
    var now: UInt64 = ats_monotonic_nanoseconds()
    /// Readiness reports handed to watchers so far (for tests: a quiet loop stays quiet).
    var reportsDelivered = 0
    /// True while the epoll backend hands a batch of two or more readiness reports to watchers;
    /// small writes made meanwhile wait for the batch's end (`TCPConnection.write`).
    var deliveringBatch = false
    /// Connections holding writes for the end of the batch. Writing at once would wake the peer
    /// (an origin, a client) while this loop still has ready connections to serve, and on a busy
    /// machine the woken peer preempts the loop: one context switch per write. Measured at
    /// keep-alive c=16 (A/B, both orders): 0.76–0.83 times the proxy CPU per request, 1.12–1.27
    /// times the request rate.
    var batchedWriters: [TCPConnection] = []
    private var flushingWriters: [TCPConnection] = []

    /// Creates empty bookkeeping for a backend that does (Dispatch) or does not (epoll) need
    /// `setInterest` kept current.
    init(tracksInterest: Bool) {
        self.tracksInterest = tracksInterest
    }

    /// Ends a batch: every held write goes to its socket, in the order the connections first wrote.
    func flushBatchedWriters() {
        deliveringBatch = false
        guard !batchedWriters.isEmpty else { return }
        swap(&batchedWriters, &flushingWriters)
        for connection in flushingWriters { connection.flushBatched() }
        flushingWriters.removeAll(keepingCapacity: true)
    }

    /// Hands a registration to another watcher. Traps on a stale token.
    func reassign(_ token: LoopToken, to watcher: any LoopWatcher) {
        precondition(generations[token.slot] == token.generation, "stale loop token")
        watchers[token.slot] = watcher
    }

    /// The watcher `token` still names, or nil when it is stale.
    @inline(__always)
    func watcher(slot: Int, generation: UInt32) -> (any LoopWatcher)? {
        guard slot < watchers.count, generations[slot] == generation else { return nil }
        return watchers[slot]
    }

    /// True when `token` names a live registration (its slot has not been released since).
    @inline(__always)
    func isCurrent(_ token: LoopToken) -> Bool { generations[token.slot] == token.generation }

    /// Takes a slot for `watcher` (a free one first) and returns its token.
    func allocate(_ watcher: any LoopWatcher) -> LoopToken {
        liveRegistrations += 1
        if let slot = freeSlots.popLast() {
            watchers[slot] = watcher
            return LoopToken(slot: slot, generation: generations[slot])
        }
        watchers.append(watcher)
        generations.append(1)
        return LoopToken(slot: watchers.count - 1, generation: 1)
    }

    /// Frees `token`'s slot and makes every token for it stale; a stale token is ignored.
    func release(_ token: LoopToken) {
        guard generations[token.slot] == token.generation else { return }
        liveRegistrations -= 1
        watchers[token.slot] = nil
        generations[token.slot] &+= 1
        if generations[token.slot] == 0 { generations[token.slot] = 1 }
        freeSlots.append(token.slot)
    }

    /// True when nothing keeps the loop busy: no registrations and no armed timers.
    var isIdle: Bool { liveRegistrations == 0 && timers.isEmpty }

    /// Fires every timer whose deadline passed, one at a time (a handler may arm or cancel timers).
    func fireDueTimers() {
        while let first = timers.first, first.deadline <= now {
            timers.remove(first)
            first.fire(now: now)
        }
    }

    /// Runs the tasks queued on the loop itself (and those they queue) until none are left, at most
    /// a few rounds so timers and sockets are not starved by a task that keeps re-queueing.
    func runLocal() {
        var rounds = 0
        while !local.isEmpty && rounds < 16 {
            let batch = local
            local = []
            for work in batch { work() }
            rounds += 1
        }
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

    /// Creates `loopCount` loops (default: one per online core) on `backend`. Also ignores
    /// `SIGPIPE` and tunes the allocator (`IOSystem.tuneAllocator`).
    public init(
        loopCount: Int = IOSystem.coreCount, readBufferSize: Int = 64 * 1024,
        backend: EventLoopBackend = .platformDefault
    ) {
        precondition(loopCount > 0, "an event loop group needs at least one loop")
        IOSystem.ignoreSIGPIPE()
        IOSystem.tuneAllocator()
        loops = (0..<loopCount).map { EventLoop(index: $0, readBufferSize: readBufferSize, backend: backend) }
    }

    /// The backend every loop of the group runs on.
    public var backend: EventLoopBackend { loops[0].backend }

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
