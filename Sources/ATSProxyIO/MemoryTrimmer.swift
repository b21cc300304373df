import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Hands back to the system the memory the allocator keeps after a burst of client connections closed.
///
/// glibc's malloc keeps freed memory in its arenas (one per thread that allocated), so after 2,000 idle
/// intercepted connections close, the proxy's RSS stays at the peak until the next burst reuses it. A proxy
/// left running all day should give it back once things calm down: after `Policy.burst` closes, once no
/// connection closed for `Policy.quiet`, and at most once per `Policy.minimumInterval`, this calls
/// `malloc_trim(0)` (looked up at run time, so other C libraries simply do without).
///
/// Thread-safe (a mutex): every loop reports its closes; each arms its timer on its own loop.
final class MemoryTrimmer: Sendable {
    /// When to trim.
    struct Policy: Sendable {
        /// Closes since the last trim that make a burst worth trimming after.
        var burst = 64
        /// Time without a close before trimming (the burst is over).
        var quiet: Duration = .seconds(2)
        /// The least time between two trims (`malloc_trim` walks every arena).
        var minimumInterval: Duration = .seconds(30)
    }

    /// What the trimmer has seen since its last trim.
    private struct State {
        var closes = 0
        var lastClose: UInt64 = 0
        /// Loop-clock nanoseconds of the last trim; nil before the first.
        var lastTrim: UInt64?
        /// A timer is armed on some loop to check again.
        var armed = false
        var trims = 0
    }

    let policy: Policy
    private let state = Mutex(State())
    private let release: @Sendable () -> Void

    /// - Parameter release: what a trim does (`malloc_trim(0)` by default; tests count calls).
    init(policy: Policy = Policy(), release: @escaping @Sendable () -> Void = MemoryTrimmer.releaseFreeMemory) {
        self.policy = policy
        self.release = release
    }

    /// How many trims ran.
    var trims: Int { state.withLock { $0.trims } }

    /// A client connection closed on `loop` (call on that loop).
    func connectionClosed(on loop: EventLoop) {
        loop.assertInLoop()
        let arm = state.withLock { state -> Bool in
            state.closes += 1
            state.lastClose = loop.now
            guard state.closes >= policy.burst, !state.armed else { return false }
            state.armed = true
            return true
        }
        if arm { schedule(on: loop, after: policy.quiet) }
    }

    private func schedule(on loop: EventLoop, after delay: Duration) {
        _ = LoopTimer.oneShot(on: loop, after: delay) { [self] in check(on: loop) }
    }

    /// Trims when the burst is over and the last trim is long enough ago; otherwise looks again later.
    private func check(on loop: EventLoop) {
        let quiet = UInt64(policy.quiet.nanoseconds)
        let interval = UInt64(policy.minimumInterval.nanoseconds)
        let now = loop.now
        let wait = state.withLock { state -> UInt64? in
            let sinceClose = now &- state.lastClose
            if sinceClose < quiet { return quiet - sinceClose }
            if let last = state.lastTrim, now &- last < interval { return interval - (now &- last) }
            state.closes = 0
            state.armed = false
            state.lastTrim = now
            state.trims += 1
            return nil
        }
        if let wait {
            schedule(on: loop, after: .nanoseconds(Int64(clamping: wait)))
        } else {
            release()
        }
    }

    /// `malloc_trim(0)` where the C library has it (glibc); nothing elsewhere.
    @Sendable static func releaseFreeMemory() {
        #if canImport(Glibc)
            typealias Trim = @convention(c) (Int) -> Int32
            guard let symbol = dlsym(nil, "malloc_trim") else { return }
            _ = unsafeBitCast(symbol, to: Trim.self)(0)
        #endif
    }
}

extension Duration {
    /// The duration in whole nanoseconds (negative durations count as zero).
    fileprivate var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
