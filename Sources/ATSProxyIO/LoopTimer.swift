import Dispatch

/// A one-shot or repeating timer on a loop (a `DispatchSourceTimer` targeting the loop's queue):
/// header-read, idle keep-alive and connect timeouts.
///
/// Contract: the handler runs on the loop, never after `cancel()` returns (cancel is called on
/// the loop, so a pending event is dropped by the state check). A one-shot timer cancels its
/// source before calling the handler. The source retains the timer until it is cancelled, so an
/// armed timer needs no other owner.
///
/// Threading: create, reschedule and cancel on the loop (`dispatchPrecondition`). That
/// confinement is the invariant behind `@unchecked Sendable`.
public final class LoopTimer: @unchecked Sendable {
    /// Lifecycle of the timer.
    enum State {
        /// Scheduled; the handler will run.
        case armed
        /// Fired (one-shot) or cancelled; the source is cancelled.
        case done
    }

    /// The loop the timer runs on.
    public let loop: EventLoop
    private let source: any DispatchSourceTimer
    private let repeats: Bool
    private var state = State.armed
    private var handler: LoopBound<() -> Void>?

    private init(loop: EventLoop, delay: Duration, interval: Duration?, handler: @escaping () -> Void) {
        loop.assertInLoop()
        self.loop = loop
        self.repeats = interval != nil
        self.handler = LoopBound(handler, loop: loop)
        source = DispatchSource.makeTimerSource(queue: loop.queue)
        if let interval {
            source.schedule(deadline: .now() + delay.dispatchInterval, repeating: interval.dispatchInterval)
        } else {
            source.schedule(deadline: .now() + delay.dispatchInterval)
        }
        source.setEventHandler { [self] in fire() }
        source.resume()
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

    /// Pushes an armed one-shot timer's deadline to `delay` from now (idle timeouts reset on
    /// activity). Returns false when the timer is no longer armed.
    @discardableResult
    public func reschedule(after delay: Duration) -> Bool {
        loop.assertInLoop()
        switch state {
        case .armed:
            if repeats {
                source.schedule(deadline: .now() + delay.dispatchInterval, repeating: delay.dispatchInterval)
            } else {
                source.schedule(deadline: .now() + delay.dispatchInterval)
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
            source.cancel()
        case .done:
            return
        }
    }

    private func fire() {
        switch state {
        case .armed:
            guard let work = handler?.value else { return }
            if !repeats {
                state = .done
                handler = nil
                source.cancel()
            }
            work()
        case .done:
            return
        }
    }
}

extension Duration {
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
