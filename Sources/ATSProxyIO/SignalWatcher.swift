import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Delivers POSIX signals as callbacks on a serial queue (`DispatchSourceSignal`): SIGINT/SIGTERM
/// for graceful shutdown, SIGHUP for reload, SIGUSR1 for a status dump.
///
/// Contract: `watch` sets the signal's disposition to `SIG_IGN` (so the default action no longer
/// kills the process) and installs a source; handlers run on `queue`, one at a time. `cancelAll`
/// removes the sources but leaves the signals ignored.
///
/// Threading: any method may be called from any thread; the source table is lock-protected
/// (the invariant behind `@unchecked Sendable`).
public final class SignalWatcher: @unchecked Sendable {
    /// The queue handlers run on.
    public let queue: DispatchQueue
    private let lock = NSLock()
    private var sources: [any DispatchSourceSignal] = []

    public init(queue: DispatchQueue = DispatchQueue(label: "ats-proxy.signals")) {
        self.queue = queue
    }

    /// Calls `handler` on `queue` each time `signal` arrives.
    public func watch(_ signalNumber: Int32, handler: @escaping @Sendable () -> Void) {
        _ = signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
        source.setEventHandler(handler: handler)
        lock.withLock { sources.append(source) }
        source.resume()
    }

    /// The standard set: SIGINT and SIGTERM → `shutdown`, SIGHUP → `reload`, SIGUSR1 → `user1`.
    public func watchStandardSignals(
        shutdown: @escaping @Sendable (_ signal: Int32) -> Void,
        reload: (@Sendable () -> Void)? = nil,
        user1: (@Sendable () -> Void)? = nil
    ) {
        watch(SIGINT) { shutdown(SIGINT) }
        watch(SIGTERM) { shutdown(SIGTERM) }
        if let reload { watch(SIGHUP, handler: reload) }
        if let user1 { watch(SIGUSR1, handler: user1) }
    }

    /// Cancels every source (signals stay ignored).
    public func cancelAll() {
        let removed = lock.withLock {
            let all = sources
            sources = []
            return all
        }
        for source in removed { source.cancel() }
    }
}

/// Graceful shutdown: stop accepting, wait for in-flight work to finish within a grace period,
/// then report whether everything drained. A second `begin()` (e.g. a second ^C) finishes at once.
///
/// Threading: `begin` may be called from any thread; all state lives on a private serial queue
/// (the invariant behind `@unchecked Sendable`). Callbacks run on that queue.
public final class GracefulShutdown: @unchecked Sendable {
    /// Progress of the shutdown.
    enum State {
        /// Not begun.
        case running
        /// Accepting stopped; polling `inFlight` until zero or the deadline.
        case draining(deadline: DispatchTime)
        /// `onFinished` delivered.
        case finished
    }

    /// The time in-flight work gets before `onFinished(false)`.
    public let gracePeriod: Duration
    private let queue = DispatchQueue(label: "ats-proxy.shutdown")
    private var state = State.running
    private let stopAccepting: @Sendable () -> Void
    private let inFlight: @Sendable () -> Int
    private let onFinished: @Sendable (_ drained: Bool) -> Void
    private let pollInterval: Duration

    /// - Parameters:
    ///   - stopAccepting: stops every listener (called once, on `begin`).
    ///   - inFlight: the number of connections or exchanges still running (polled).
    ///   - onFinished: `true` when everything drained, `false` at the deadline or on a second
    ///     `begin`; typically exits the process.
    public init(
        gracePeriod: Duration = .seconds(10), pollInterval: Duration = .milliseconds(50),
        stopAccepting: @escaping @Sendable () -> Void, inFlight: @escaping @Sendable () -> Int,
        onFinished: @escaping @Sendable (_ drained: Bool) -> Void
    ) {
        self.gracePeriod = gracePeriod
        self.pollInterval = pollInterval
        self.stopAccepting = stopAccepting
        self.inFlight = inFlight
        self.onFinished = onFinished
    }

    /// Starts draining, or (when already draining) gives up waiting and finishes now.
    public func begin() {
        queue.async { [self] in
            switch state {
            case .running:
                state = .draining(deadline: .now() + gracePeriod.dispatchInterval)
                stopAccepting()
                poll()
            case .draining:
                finish(drained: inFlight() == 0)
            case .finished:
                return
            }
        }
    }

    private func poll() {
        guard case .draining(let deadline) = state else { return }
        if inFlight() == 0 {
            finish(drained: true)
        } else if DispatchTime.now() >= deadline {
            finish(drained: false)
        } else {
            queue.asyncAfter(deadline: .now() + pollInterval.dispatchInterval) { [self] in poll() }
        }
    }

    private func finish(drained: Bool) {
        state = .finished
        onFinished(drained)
    }
}
