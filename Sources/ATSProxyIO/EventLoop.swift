import Dispatch
import Foundation

/// One I/O loop: a serial `DispatchQueue` on which every socket source, timer and handler of the
/// connections assigned to it run, plus a read buffer those connections share.
///
/// Threading: `queue` may be used from anywhere (`execute`); the read buffer is touched only on
/// `queue`. Invariant: `readBuffer` is only accessed from a block running on `queue`, and handlers
/// receive slices of it that are valid only for the duration of the callback. That confinement is
/// why the class is `@unchecked Sendable`.
public final class EventLoop: @unchecked Sendable, CustomStringConvertible {
    /// The serial queue that owns every object confined to this loop.
    public let queue: DispatchQueue
    /// The loop's index within its group (0-based), used in queue labels and logs.
    public let index: Int
    /// The size of the shared read buffer: the most bytes one `onRead` callback delivers.
    public let readBufferSize: Int
    /// Shared read buffer, reused by every connection on this loop (no per-read allocation).
    let readBuffer: UnsafeMutableRawBufferPointer

    /// Creates a loop with its own serial queue. `readBufferSize` defaults to 64 KiB.
    public init(index: Int = 0, readBufferSize: Int = 64 * 1024, label: String = "ats-proxy.loop") {
        precondition(readBufferSize > 0, "read buffer must not be empty")
        self.index = index
        self.readBufferSize = readBufferSize
        self.queue = DispatchQueue(label: "\(label).\(index)")
        self.readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readBufferSize, alignment: 16)
        queue.setSpecific(key: Self.loopKey, value: ObjectIdentifier(self))
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Runs `work` on the loop asynchronously. The block is `@Sendable` because it crosses threads.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }

    /// True when called from a block running on this loop's queue.
    public var inLoop: Bool {
        // dispatchPrecondition cannot be queried; a queue-specific key can.
        DispatchQueue.getSpecific(key: Self.loopKey) == ObjectIdentifier(self)
    }

    /// Traps (in debug builds) unless running on the loop's queue.
    @inline(__always)
    public func assertInLoop() {
        dispatchPrecondition(condition: .onQueue(queue))
    }

    /// Runs `work` on the loop: immediately when already on it, otherwise asynchronously.
    public func executeOrRun(_ work: @escaping @Sendable () -> Void) {
        if inLoop { work() } else { queue.async(execute: work) }
    }

    static let loopKey = DispatchSpecificKey<ObjectIdentifier>()

    public var description: String { "EventLoop(\(index))" }
}

/// A fixed set of `EventLoop`s, one per core by default, that hands out loops round-robin.
///
/// Thread-safe: `next()` may be called from any queue (the listener calls it from its accept
/// queue); the round-robin counter is protected by a lock. Loops live as long as the group.
public final class EventLoopGroup: @unchecked Sendable {
    /// The loops, in index order.
    public let loops: [EventLoop]
    private let lock = NSLock()
    private var nextIndex = 0

    /// Creates `loopCount` loops (default: one per online core). Also ignores `SIGPIPE`.
    public init(loopCount: Int = IOSystem.coreCount, readBufferSize: Int = 64 * 1024) {
        precondition(loopCount > 0, "an event loop group needs at least one loop")
        IOSystem.ignoreSIGPIPE()
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
/// Invariant: `value` is read only on `loop.queue` (checked with `dispatchPrecondition`). Used to hand
/// non-`Sendable` callbacks to other queues (the resolver's worker, the listener's accept queue)
/// and get them back on their loop.
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
