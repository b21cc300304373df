import Dispatch

/// A one-shot or repeating timer on a loop: header-read, idle keep-alive and connect timeouts.
/// An entry in the loop's timer heap, so arming, rescheduling and cancelling cost no syscall
/// (rescheduling an idle timeout on every event is the common case). Pushing a deadline later does
/// not even touch the heap: the timer keeps its place, and when that earlier deadline comes it goes
/// back in for the rest of the time instead of firing (a timeout is pushed back on every event).
///
/// Contract: the handler runs on the loop, never after `cancel()` returns (cancel is called on
/// the loop). A one-shot timer is disarmed before its handler runs. The loop retains an armed
/// timer, so it needs no other owner.
///
/// Threading: create, reschedule and cancel on the loop (checked in debug builds). That
/// confinement is the invariant behind `@unchecked Sendable`.
public final class LoopTimer: @unchecked Sendable {
    /// Lifecycle of the timer.
    enum State {
        /// In the loop's heap; the handler will run.
        case armed
        /// Fired (one-shot) or cancelled; out of the heap.
        case done
    }

    /// The loop the timer runs on.
    public let loop: EventLoop
    /// Monotonic nanoseconds of the timer's place in the loop's heap (loop clock): when it fires,
    /// unless `pushedDeadline` moved it later.
    private(set) var deadline: UInt64
    /// A later deadline set by `reschedule` while the timer sits in the heap at `deadline`: applied
    /// when `deadline` comes, so that the heap is touched once per timeout rather than once per event.
    private var pushedDeadline: UInt64?
    /// Position in the loop's heap, -1 when not in it (maintained by `TimerHeap`).
    var heapIndex = -1
    private let interval: UInt64?
    private var state = State.armed
    private var handler: (() -> Void)?

    private init(loop: EventLoop, delay: Duration, interval: Duration?, handler: @escaping () -> Void) {
        loop.assertInLoop()
        self.loop = loop
        self.interval = interval.map(\.loopNanoseconds)
        self.handler = handler
        deadline = loop.state.now &+ delay.loopNanoseconds
        loop.state.timers.insert(self)
    }

    /// Runs `handler` once on `loop` after `delay`. Call on the loop.
    public static func oneShot(on loop: EventLoop, after delay: Duration, handler: @escaping () -> Void) -> LoopTimer {
        LoopTimer(loop: loop, delay: delay, interval: nil, handler: handler)
    }

    /// Runs `handler` on `loop` every `interval` (first after `interval`) until cancelled.
    public static func repeating(on loop: EventLoop, every interval: Duration, handler: @escaping () -> Void)
        -> LoopTimer
    {
        LoopTimer(loop: loop, delay: interval, interval: interval, handler: handler)
    }

    /// True until the timer fired (one-shot) or was cancelled.
    public var isArmed: Bool {
        loop.assertInLoop()
        switch state {
        case .armed: return true
        case .done: return false
        }
    }

    /// Pushes an armed timer's deadline to `delay` from now (idle timeouts reset on activity); a
    /// repeating timer then repeats every `delay`. Returns false when the timer is no longer armed.
    @discardableResult
    public func reschedule(after delay: Duration) -> Bool {
        loop.assertInLoop()
        switch state {
        case .armed:
            let next = loop.state.now &+ delay.loopNanoseconds
            if next >= deadline {
                pushedDeadline = next
            } else {
                pushedDeadline = nil
                deadline = next
                loop.state.timers.update(self)
            }
            return true
        case .done:
            return false
        }
    }

    /// Stops the timer; the handler will not run again. Idempotent.
    public func cancel() {
        loop.assertInLoop()
        switch state {
        case .armed:
            state = .done
            handler = nil
            pushedDeadline = nil
            loop.state.timers.remove(self)
        case .done:
            return
        }
    }

    /// Called by the loop once the deadline passed (the timer is already out of the heap).
    func fire(now: UInt64) {
        switch state {
        case .armed:
            guard let work = handler else { return }
            if let pushed = pushedDeadline {
                pushedDeadline = nil
                if pushed > now {
                    // Pushed back since it was placed: wait for the rest of the time.
                    deadline = pushed
                    loop.state.timers.insert(self)
                    return
                }
            }
            if let interval {
                deadline = now &+ max(interval, 1)
                loop.state.timers.insert(self)
            } else {
                state = .done
                handler = nil
            }
            work()
        case .done:
            return
        }
    }
}

extension Duration {
    /// The duration in nanoseconds for the loop clock (negative as 0, saturating).
    var loopNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 || seconds > 0 else { return 0 }
        let nanos = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if nanos.overflow { return UInt64(Int64.max) }
        let total = nanos.partialValue.addingReportingOverflow(attoseconds / 1_000_000_000)
        return total.overflow ? UInt64(Int64.max) : UInt64(max(0, total.partialValue))
    }

    /// The duration as a `DispatchTimeInterval` in nanoseconds (saturating).
    var dispatchInterval: DispatchTimeInterval {
        let (seconds, attoseconds) = components
        let nanos = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if nanos.overflow || nanos.partialValue > Int64(Int.max) { return .never }
        return .nanoseconds(Int(nanos.partialValue + attoseconds / 1_000_000_000))
    }
}

/// The proxy's default timeouts (issue 4, item 8); flags may override them.
public enum IOTimeouts {
    /// Time allowed for a client to send a complete request head.
    public static let headerRead: Duration = .seconds(30)
    /// Time an idle keep-alive connection is kept open.
    public static let idleKeepAlive: Duration = .seconds(60)
    /// Time allowed to resolve and connect upstream.
    public static let connect: Duration = .seconds(15)
}
