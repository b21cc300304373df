internal import CATSPoll
import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `dispatch` backend: one serial `DispatchQueue` per loop. Each registered fd gets a
/// `DispatchSourceRead` and a `DispatchSourceWrite`, each running only while the watcher wants
/// that direction (`setInterest`: a Dispatch source fires again and again while its condition
/// holds, so a write source left running on a writable socket, or a read source on a paused or
/// finished connection, would spin). One `DispatchSourceTimer` drives the loop's timer heap; it is
/// re-armed only when the earliest deadline moves earlier (a deadline pushed later, the common
/// idle-timeout case, lets the source fire early once and re-arm then).
///
/// Every block this core puts on its queue runs as one *turn*: refresh the loop clock, run the
/// work (a source event, a task, due timers, a cancel handler), then the loop-local tasks it
/// queued, then re-arm the timer and check for shutdown. That gives `runSoon`/`execute` from the
/// loop the same "after the current handler returns" meaning as on the epoll thread.
///
/// Closing: libdispatch requires an fd to stay open until every source on it has run its cancel
/// handler, so `unregisterAndClose` cancels both sources (resuming a suspended one, which a
/// cancelled-but-suspended source needs to deliver its cancel handler and which keeps libdispatch
/// from trapping on releasing a suspended source) and closes the fd in the last cancel handler.
///
/// Threading: `enqueue` and `requestStop` may be called from any thread (they only `async` onto
/// the queue); everything else runs on the queue, identified with `DispatchQueue.getSpecific`.
/// The queue, its sources and this core go away once a stop was requested and no registration,
/// timer or cancel is left.
final class DispatchLoopCore: LoopCore, @unchecked Sendable {
    let backend = EventLoopBackend.dispatch
    let state = LoopState(tracksInterest: true)
    /// The loop's serial queue: every handler, task and timer of the loop runs on it.
    let queue: DispatchQueue
    private let onQueueKey = DispatchSpecificKey<UInt8>()
    private let timerSource: any DispatchSourceTimer
    /// The deadline the timer source is armed for (nil: not armed).
    private var armedDeadline: UInt64?
    /// Registrations by slot (parallel to `state`'s watchers).
    private var registrations: [DispatchRegistration?] = [nil]
    /// Registrations whose sources are cancelled but whose cancel handlers have not all run.
    private var pendingCancels = 0
    /// A turn was queued to run loop-local tasks left over by the last turn.
    private var continuationQueued = false
    private var stopRequested = false
    private var stopped = false

    init(name: String) {
        queue = DispatchQueue(label: name)
        timerSource = DispatchSource.makeTimerSource(queue: queue)
        queue.setSpecific(key: onQueueKey, value: 1)
        timerSource.setEventHandler { [self] in
            turn {
                armedDeadline = nil
                state.fireDueTimers()
            }
        }
        timerSource.schedule(deadline: .distantFuture)
        timerSource.resume()
    }

    var isCurrentThread: Bool { DispatchQueue.getSpecific(key: onQueueKey) != nil }

    func enqueue(_ work: @escaping @Sendable () -> Void) {
        if isCurrentThread {
            state.local.append(work)
        } else {
            queue.async { [self] in turn(work) }
        }
    }

    func requestStop() {
        queue.async { [self] in turn { stopRequested = true } }
    }

    // MARK: Registrations

    func register(fd: Int32, interest: UInt32, edgeTriggered: Bool, watcher: any LoopWatcher)
        throws(IOError) -> LoopToken
    {
        let token = state.allocate(watcher)
        let registration = DispatchRegistration(fd: fd, token: token, core: self)
        while registrations.count <= token.slot { registrations.append(nil) }
        registrations[token.slot] = registration
        registration.setInterest(interest)
        return token
    }

    func setInterest(_ token: LoopToken, interest: UInt32) {
        guard state.isCurrent(token), let registration = registrations[token.slot] else {
            return
        }
        registration.setInterest(interest)
    }

    func unregister(_ token: LoopToken, fd: Int32, then: @escaping () -> Void) {
        cancel(token, closing: false, then: then)
    }

    func unregisterAndClose(_ token: LoopToken, fd: Int32, then: (() -> Void)?) {
        cancel(token, closing: true, then: then)
    }

    private func cancel(_ token: LoopToken, closing: Bool, then: (() -> Void)?) {
        guard state.isCurrent(token), let registration = registrations[token.slot] else {
            preconditionFailure("stale loop token")
        }
        registrations[token.slot] = nil
        state.release(token)
        pendingCancels += 1
        registration.cancel(closing: closing, then: then)
    }

    // MARK: Source callbacks (on the queue)

    /// A source of the registration `token` reported `events`.
    fileprivate func sourceFired(_ token: LoopToken, events: UInt32) {
        turn {
            guard let watcher = state.watcher(slot: token.slot, generation: token.generation) else { return }
            state.reportsDelivered &+= 1
            watcher.loopEvent(events)
        }
    }

    /// Both sources of a registration are cancelled: its fd may be closed now.
    fileprivate func cancelled(_ registration: DispatchRegistration) {
        turn {
            if registration.finish() { pendingCancels -= 1 }
        }
    }

    // MARK: Turns

    /// Runs `body` as one turn of the loop (see the type's contract).
    private func turn(_ body: () -> Void) {
        state.now = ats_monotonic_nanoseconds()
        body()
        state.runLocal()
        if !state.local.isEmpty && !continuationQueued {
            // A task that keeps re-queueing: let the queue's other blocks (sources) run first.
            continuationQueued = true
            queue.async { [self] in
                turn { continuationQueued = false }
            }
        }
        guard !stopped else { return }
        armTimer()
        if stopRequested && state.isIdle && pendingCancels == 0 && state.local.isEmpty { shutDown() }
    }

    /// Arms the timer source when the earliest deadline is earlier than the one it is armed for.
    private func armTimer() {
        guard let earliest = state.timers.earliestDeadline, earliest < armedDeadline ?? .max else { return }
        armedDeadline = earliest
        let current = ats_monotonic_nanoseconds()
        // At most a day ahead: a later deadline fires the source early once and re-arms it.
        let delay = earliest > current ? min(earliest - current, 86_400_000_000_000) : 0
        timerSource.schedule(deadline: .now() + .nanoseconds(Int(delay)), leeway: .milliseconds(1))
    }

    private func shutDown() {
        stopped = true
        timerSource.cancel()
    }
}

/// One fd's pair of Dispatch sources on a `DispatchLoopCore`, and whether each is running.
///
/// Contract: a source is resumed only while its direction is wanted and suspended otherwise
/// (sources start inactive: the first `resume` activates them); `cancel` cancels both and resumes the suspended ones so that both
/// cancel handlers run; the last one closes the fd (when asked to) and runs `then`. Handlers hold
/// the core and the token, not the watcher: a stale token finds no watcher. A read report with no
/// bytes queued (`data == 0`) carries `ATS_POLL_HUP`, so the watcher reads to EOF.
///
/// Threading: confined to the core's queue (the invariant behind `@unchecked Sendable`).
private final class DispatchRegistration: @unchecked Sendable {
    let fd: Int32
    private let read: any DispatchSourceRead
    private let write: any DispatchSourceWrite
    private var readRunning = false
    private var writeRunning = false
    private var cancelsLeft = 2
    private var closing = false
    private var then: (() -> Void)?

    init(fd: Int32, token: LoopToken, core: DispatchLoopCore) {
        self.fd = fd
        let read = DispatchSource.makeReadSource(fileDescriptor: fd, queue: core.queue)
        self.read = read
        write = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: core.queue)
        // No bytes queued although the socket is readable: EOF, an error, or libdispatch's hangup
        // report (after EPOLLHUP it removes the fd and never reports it again). Either way the
        // watcher must read until EOF rather than stop at a short read, like on an epoll HUP.
        read.setEventHandler { [core, read] in
            core.sourceFired(token, events: UInt32(read.data == 0 ? ATS_POLL_IN | ATS_POLL_HUP : ATS_POLL_IN))
        }
        write.setEventHandler { [core] in core.sourceFired(token, events: UInt32(ATS_POLL_OUT)) }
        let cancelHandler = { @Sendable [core, self] in core.cancelled(self) }
        read.setCancelHandler(handler: cancelHandler)
        write.setCancelHandler(handler: cancelHandler)
    }

    /// Resumes the sources for the wanted directions and suspends the others.
    func setInterest(_ interest: UInt32) {
        let wantsRead = interest & UInt32(ATS_POLL_IN) != 0
        if wantsRead != readRunning {
            readRunning = wantsRead
            if wantsRead { read.resume() } else { read.suspend() }
        }
        let wantsWrite = interest & UInt32(ATS_POLL_OUT) != 0
        if wantsWrite != writeRunning {
            writeRunning = wantsWrite
            if wantsWrite { write.resume() } else { write.suspend() }
        }
    }

    /// Cancels both sources; `finish` runs once both cancel handlers have.
    func cancel(closing: Bool, then: (() -> Void)?) {
        self.closing = closing
        self.then = then
        read.cancel()
        write.cancel()
        if !readRunning { read.resume() }
        if !writeRunning { write.resume() }
        readRunning = true
        writeRunning = true
    }

    /// Called from each cancel handler; the last one closes the fd, runs `then` and returns true.
    func finish() -> Bool {
        cancelsLeft -= 1
        guard cancelsLeft == 0 else { return false }
        if closing { sysClose(fd) }
        let then = then
        self.then = nil
        then?()
        return true
    }
}
