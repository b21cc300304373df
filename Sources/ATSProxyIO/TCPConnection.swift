internal import CATSPoll
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A connected, non-blocking TCP socket registered once with its loop: on the epoll backend
/// edge-triggered for reading and writing; on the Dispatch backend with a read source that runs
/// while reading is wanted and a write source that runs only while bytes wait for the socket.
///
/// Contract:
/// - Reading: every readiness report reads until the socket is drained (a short read), at most a
///   few loop read buffers per turn (fairness between connections on one loop; the rest is read
///   on the next turn). `pauseReading` stops delivering; readiness seen while paused is
///   remembered and served on `resumeReading`.
/// - `write` tries the socket at once; what the kernel does not take is queued (small writes
///   coalesce into one chunk) and flushed with `writev` when the loop reports the socket
///   writable again. The connection tells the loop which directions it waits for
///   (`LoopCore.setInterest`: nothing to do on epoll, where the registration never changes).
/// - Held writes: a small write (≤ `batchedWriteLimit`) made while the epoll loop delivers a batch
///   of two or more readiness reports is held in the queue until the batch ends (or every
///   `EpollLoopCore.reportsPerFlush` reports), so that the loop serves its ready connections
///   before its writes wake the peers (see `LoopState.batchedWriters`). A larger write first sends
///   what is held, then goes out at once as usual.
/// - Watermarks: crossing `highWatermark` reports "not writable", falling to `lowWatermark` reports
///   "writable" again. The queue is never bounded by the connection itself: callers honour the
///   signal (a relay pauses its other side).
/// - `close()` and `reset()` first offer the kernel any bytes held for the end of the batch (what
///   an immediate write would have sent), then drop what is still queued and close the fd (at
///   once on epoll; on Dispatch once the sources are cancelled); `connectionDidClose` follows on
///   the loop after the fd is closed, never within the call.
/// - With the Dispatch backend, a connection that neither reads (paused, EOF) nor has bytes to
///   write hears nothing from the socket (an error surfaces on the next read or write).
///
/// Threading: every method must be called on the loop's thread (checked in debug builds); the only
/// exception is creating the connection, which the listener may do for another loop. That
/// confinement is the invariant behind `@unchecked Sendable`. The loop retains a started
/// connection until it closes, so it stays alive while open even if nobody else holds it.
public final class TCPConnection: @unchecked Sendable, CustomStringConvertible, LoopWatcher {
    /// The connection's lifecycle.
    enum Lifecycle: Equatable {
        /// Created; not yet registered with the poller. Writes are queued.
        case idle
        /// Registered; reading and writing.
        case open
        /// The fd is closed; `connectionDidClose` is about to be delivered.
        case closing(TCPCloseReason)
        /// The handler has been told.
        case closed
    }

    /// The read direction.
    enum InputState: Equatable {
        /// Delivering bytes (once the connection is open).
        case reading
        /// Paused by `pauseReading`.
        case paused
        /// The peer sent EOF; nothing more is read.
        case eof
    }

    /// The write direction.
    enum OutputState: Equatable {
        /// Writes accepted.
        case open
        /// `shutdownWrite` was requested; it happens once the queue drains. Writes are refused.
        case shutdownPending
        /// `shutdown(SHUT_WR)` done; writes are refused.
        case shutdown
    }

    /// The loop this connection is confined to.
    public let loop: EventLoop
    /// The socket. Owned: closed by the connection, never by anyone else.
    public let fileDescriptor: Int32
    /// The peer address, read once at creation.
    public let remoteAddress: SocketAddress?
    /// A process-unique number for logs.
    public let id: UInt64

    /// The local address (read from the socket on first use).
    public var localAddress: SocketAddress? {
        if let cachedLocalAddress { return cachedLocalAddress }
        let address = SocketAddress.of(fd: fileDescriptor, peer: false)
        cachedLocalAddress = address
        return address
    }

    /// Event receiver; set it before `start()` (the listener and connector start the connection
    /// right after handing it to you). Dropped after `connectionDidClose`.
    public var handler: (any TCPConnectionHandler)? {
        get {
            loop.assertInLoop()
            return storedHandler
        }
        set {
            loop.assertInLoop()
            storedHandler = newValue
        }
    }

    /// Above this many queued bytes the connection reports "not writable". Default 256 KiB.
    public var highWatermark: Int = 256 * 1024
    /// At or below this many queued bytes the connection reports "writable" again. Default 64 KiB.
    public var lowWatermark: Int = 64 * 1024

    /// Bytes accepted by `write` but not yet taken by the kernel.
    public var queuedBytes: Int { pending.queuedBytes }
    /// The largest `queuedBytes` ever observed (for tests and statistics).
    public var maxQueuedBytes: Int { pending.maxQueuedBytes }
    /// Total bytes read from the socket.
    public private(set) var bytesRead: UInt64 = 0
    /// Total bytes written to the socket.
    public private(set) var bytesWritten: UInt64 = 0

    /// False between crossing the high watermark and falling back to the low watermark.
    public var isWritable: Bool { !aboveHighWatermark }
    /// True until `close`/`reset` is called or the connection fails.
    public var isOpen: Bool {
        switch lifecycle {
        case .idle, .open: return true
        case .closing, .closed: return false
        }
    }
    /// True while reading is paused by `pauseReading`.
    public var isReadingPaused: Bool { input == .paused }

    private var storedHandler: (any TCPConnectionHandler)?
    private var cachedLocalAddress: SocketAddress?
    private var lifecycle = Lifecycle.idle
    private var input = InputState.reading
    private var output = OutputState.open
    /// The poller registration (nil before `start` and after closing).
    private var token: LoopToken?
    /// The poller reported input (data, EOF or an error) that has not been read yet.
    private var readReady = false
    /// The peer shut down its side (or the connection broke): read until EOF, not to a short read.
    private var peerHungUp = false
    /// A read continuation is scheduled on the loop.
    private var readScheduled = false
    /// The kernel refused bytes; the next writable report flushes.
    private var awaitingWritable = false
    /// Bytes the kernel has not taken yet, oldest first.
    private var pending = PendingWrites()
    private var aboveHighWatermark = false
    private var closeWhenDrained = false
    /// Called after `connectionDidClose` (the listener uses it to count live connections).
    var onFinalClose: (@Sendable () -> Void)?

    private static let idCounter = IDCounter()
    /// Reads per readiness report before yielding to the loop's other connections.
    private static let readsPerTurn = 4

    /// Adopts a connected socket. The fd is made non-blocking and close-on-exec and gets
    /// `TCP_NODELAY`. Call on any thread; everything afterwards happens on `loop`.
    public convenience init(adopting fd: Int32, loop: EventLoop) {
        self.init(accepted: fd, remoteAddress: nil, loop: loop)
    }

    /// Adopts a socket whose peer address is already known (from `accept`), saving a syscall.
    /// `nonBlocking` says the socket already is (accept4, connect sockets).
    init(accepted fd: Int32, remoteAddress: SocketAddress?, loop: EventLoop, nonBlocking: Bool = false) {
        self.loop = loop
        self.fileDescriptor = fd
        self.id = Self.idCounter.next()
        if nonBlocking {
            Socket.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        } else {
            Socket.configureConnected(fd)
        }
        self.remoteAddress = remoteAddress ?? SocketAddress.of(fd: fd, peer: true)
    }

    /// Takes over a connecting socket's loop registration (the connector's); `start()` then sets
    /// the interest a connection needs. Call on the loop.
    init(connected fd: Int32, remoteAddress: SocketAddress?, loop: EventLoop, token: LoopToken) {
        self.loop = loop
        self.fileDescriptor = fd
        self.id = Self.idCounter.next()
        Socket.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        self.remoteAddress = remoteAddress ?? SocketAddress.of(fd: fd, peer: true)
        self.token = token
        loop.state.reassign(token, to: self)
    }

    public var description: String {
        "TCPConnection(#\(id) fd \(fileDescriptor) \(localAddress?.description ?? "?")"
            + " <-> \(remoteAddress?.description ?? "?"))"
    }

    /// Internal state for tests and debugging (call on the loop).
    var stateSummary: String {
        "\(lifecycle) in=\(input) out=\(output) ready=\(readReady ? "R" : "-")\(awaitingWritable ? "W" : "-")"
            + " q=\(queuedBytes) r=\(bytesRead) w=\(bytesWritten)"
    }

    // MARK: Commands

    /// Starts delivering events: registers with the poller (unless the connector's registration
    /// was adopted) and flushes writes queued before the start. Idempotent. Must run on the loop.
    public func start() {
        loop.assertInLoop()
        switch lifecycle {
        case .idle:
            lifecycle = .open
            if token == nil {
                do {
                    token = try loop.core.register(
                        fd: fileDescriptor, interest: wantedInterest, edgeTriggered: true, watcher: self)
                } catch {
                    fail(error)
                    return
                }
            } else {
                // An adopted registration's first edges went to the connector: look for ourselves.
                updateInterest()
                readReady = true
                scheduleRead()
            }
            if !pending.isEmpty || output == .shutdownPending { flush() }
        case .open, .closing, .closed:
            return
        }
    }

    /// Queues `bytes` (copied if the kernel does not take them at once). Ignored after close or
    /// shutdown of the write side.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        loop.assertInLoop()
        guard acceptsWrites, !bytes.isEmpty else { return }
        var remaining = bytes
        let small = bytes.count <= Self.batchedWriteLimit
        if lifecycle == .open, !awaitingWritable, !aboveHighWatermark, !pending.isEmpty, !small {
            // A large write behind held ones: send those now, so that this one can still go
            // straight from the caller's memory instead of being copied into the queue. (Held
            // bytes above the high watermark take the queue's way instead: `flush` reports the
            // connection writable again.)
            switch writeQueuedBytes() {
            case .drained:
                break
            case .wouldBlock:
                awaitingWritable = true
            case .failed(let code):
                fail(IOError(call: "write", errno: code))
                return
            }
        }
        if lifecycle == .open, pending.isEmpty, !awaitingWritable {
            if loop.state.deliveringBatch, small {
                // Held for the end of the batch, in a chunk sized for a few small writes.
                pending.append(bytes, minimumCapacity: WriteChunk.batchedCapacity)
                // Listed once per time the queue fills from empty; a second entry in one batch
                // (after a large write emptied the queue) finds nothing or flushes in order.
                loop.state.batchedWriters.append(self)
                updateWatermarkAfterEnqueue()
                return
            }
            // Fast path: nothing queued, try the socket directly from the caller's memory.
            while !remaining.isEmpty {
                let n = sysWrite(fileDescriptor, remaining.baseAddress, remaining.count)
                if n > 0 {
                    bytesWritten += UInt64(n)
                    if n == remaining.count { return }
                    remaining = UnsafeRawBufferPointer(rebasing: remaining[n...])
                    continue
                }
                let code = currentErrno()
                if n < 0 && code == EINTR { continue }
                if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) {
                    awaitingWritable = true
                    break
                }
                fail(IOError(call: "write", errno: n < 0 ? code : EIO))
                return
            }
        }
        // Behind held bytes (not waiting for the kernel), a small write joins them in a small chunk.
        let heldBehind = lifecycle == .open && !awaitingWritable
        pending.append(remaining, minimumCapacity: heldBehind ? WriteChunk.batchedCapacity : WriteChunk.minimumCapacity)
        if awaitingWritable { updateInterest() }
        updateWatermarkAfterEnqueue()
    }

    /// Queues `bytes`; see `write(_: UnsafeRawBufferPointer)`.
    public func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    /// Queues the UTF-8 bytes of `text`.
    public func write(_ text: String) {
        var text = text
        text.withUTF8 { write(UnsafeRawBufferPointer($0)) }
    }

    /// Stops reading from the socket (back-pressure) until `resumeReading`. Idempotent.
    public func pauseReading() {
        loop.assertInLoop()
        switch input {
        case .reading:
            input = .paused
            updateInterest()
        case .paused, .eof: return
        }
    }

    /// Resumes reading after `pauseReading`. Idempotent; no effect after EOF or close.
    public func resumeReading() {
        loop.assertInLoop()
        switch input {
        case .paused:
            input = .reading
            updateInterest()
            // Dispatch: a read source first started after the peer hung up never fires (libdispatch
            // has dropped the fd), so look once instead of trusting it; a spare read costs EAGAIN.
            if loop.state.tracksInterest { readReady = true }
            if lifecycle == .open && readReady { scheduleRead() }
        case .reading, .eof:
            return
        }
    }

    /// Shuts down the write side (FIN) once the queue has drained; later writes are ignored. If the
    /// peer already sent EOF, the connection then closes with `.finished`.
    public func shutdownWrite() {
        loop.assertInLoop()
        guard isOpen else { return }
        switch output {
        case .open:
            output = .shutdownPending
            if lifecycle == .open, pending.isEmpty { completeShutdown() }
        case .shutdownPending, .shutdown:
            return
        }
    }

    /// Closes now, dropping queued bytes (after offering the kernel those held for the end of the
    /// batch). `connectionDidClose(.local)` follows asynchronously.
    public func close() {
        loop.assertInLoop()
        writeBatchedNow()
        terminate(.local)
    }

    /// Largest write that `write` holds for the end of a batch; larger ones go out at once.
    static let batchedWriteLimit = 8 * 1024

    /// The end of the loop's batch: write what was held (`flush`, which also completes a pending
    /// shutdown or close and reports the drain).
    func flushBatched() {
        guard lifecycle == .open, !awaitingWritable, !pending.isEmpty else { return }
        flush()
    }

    /// Before a close or reset: hand the kernel what it takes of the held bytes, without callbacks.
    /// (A non-empty queue while not waiting for writability holds only batched bytes.)
    private func writeBatchedNow() {
        guard lifecycle == .open, !awaitingWritable else { return }
        _ = writeQueuedBytes()
    }

    /// How writing the queue ended.
    private enum QueueWriteOutcome {
        /// Every queued byte was taken.
        case drained
        /// The kernel refused more (`EAGAIN`).
        case wouldBlock
        /// A write failed with this errno.
        case failed(Int32)
    }

    /// Writes queued chunks until the queue empties or the kernel refuses; no callbacks.
    private func writeQueuedBytes() -> QueueWriteOutcome {
        while !pending.isEmpty {
            let n = pending.withVectors { vectors in
                vectors.count == 1
                    ? sysWrite(fileDescriptor, vectors[0].iov_base, vectors[0].iov_len)
                    : writev(fileDescriptor, vectors.baseAddress, Int32(vectors.count))
            }
            if n > 0 {
                bytesWritten += UInt64(n)
                pending.consume(n)
                continue
            }
            let code = currentErrno()
            if n < 0 && code == EINTR { continue }
            if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) { return .wouldBlock }
            return .failed(n < 0 ? code : EIO)
        }
        return .drained
    }

    /// Closes once every queued byte has been written (or at once when nothing is queued).
    public func closeAfterFlush() {
        loop.assertInLoop()
        guard isOpen else { return }
        if pending.isEmpty {
            terminate(.local)
        } else {
            closeWhenDrained = true
            if output == .open { output = .shutdownPending }
        }
    }

    /// Aborts with a TCP RST (`SO_LINGER` 0) instead of a FIN, dropping queued bytes.
    public func reset() {
        loop.assertInLoop()
        guard isOpen else { return }
        writeBatchedNow()
        Socket.setLingerZero(fileDescriptor)
        terminate(.local)
    }

    private var acceptsWrites: Bool {
        guard isOpen else { return false }
        switch output {
        case .open: return true
        case .shutdownPending, .shutdown: return false
        }
    }

    // MARK: Poller reports

    func loopEvent(_ events: UInt32) {
        guard lifecycle == .open else { return }
        if events & UInt32(ATS_POLL_HUP | ATS_POLL_ERR) != 0 { peerHungUp = true }
        if events & UInt32(ATS_POLL_OUT | ATS_POLL_ERR) != 0, awaitingWritable || !pending.isEmpty {
            awaitingWritable = false
            flush()
            guard lifecycle == .open else { return }
        }
        if events & UInt32(ATS_POLL_IN | ATS_POLL_HUP | ATS_POLL_ERR) != 0 {
            readReady = true
            if events & UInt32(ATS_POLL_ERR) != 0, input != .reading {
                // Reading is paused or over, so no read will surface the error: ask the socket.
                let code = Socket.pendingError(fileDescriptor)
                if code != 0 {
                    fail(IOError(call: "socket", errno: code))
                    return
                }
            }
            readAvailable()
        }
    }

    // MARK: Read side

    /// Reads up to a few buffers, delivering each; stops at a short read (edge-triggered: the
    /// poller reports the next arrival) unless the peer hung up, in which case it reads to EOF.
    private func readAvailable() {
        guard lifecycle == .open, input == .reading, readReady else { return }
        let buffer = loop.readBuffer
        for _ in 0..<Self.readsPerTurn {
            let n = sysRead(fileDescriptor, buffer.baseAddress, buffer.count)
            if n > 0 {
                bytesRead += UInt64(n)
                let isShort = n < buffer.count
                if isShort && !peerHungUp { readReady = false }
                storedHandler?.connectionDidRead(self, bytes: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                guard lifecycle == .open, input == .reading, readReady else { return }
                continue
            }
            if n == 0 {
                readReady = false
                receivedEOF()
                return
            }
            let code = currentErrno()
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK {
                readReady = false
                // A peer that shut down its side would have given EOF: the hang-up report was a guess (a
                // Dispatch read report with no bytes queued can be a race), so short reads end the turn again.
                peerHungUp = false
                return
            }
            readReady = false
            fail(IOError(call: "read", errno: code))
            return
        }
        // More may be waiting: continue after the loop's other ready connections had their turn.
        scheduleRead()
    }

    private func scheduleRead() {
        guard !readScheduled else { return }
        readScheduled = true
        loop.runSoon { [self] in
            readScheduled = false
            readAvailable()
        }
    }

    private func receivedEOF() {
        input = .eof
        updateInterest()
        storedHandler?.connectionDidReadEOF(self)
        guard lifecycle == .open else { return }
        if output == .shutdown { terminate(.finished) }
    }

    // MARK: Write side

    private func updateWatermarkAfterEnqueue() {
        if !aboveHighWatermark, queuedBytes > highWatermark {
            aboveHighWatermark = true
            storedHandler?.connectionWritabilityChanged(self, isWritable: false)
        }
    }

    /// Writes queued chunks (several at once with `writev`) until the kernel refuses (wait for the
    /// next writable report) or the queue empties (complete a pending shutdown; report drained /
    /// writable).
    private func flush() {
        let hadQueued = queuedBytes > 0
        switch writeQueuedBytes() {
        case .drained:
            break
        case .wouldBlock:
            awaitingWritable = true
            updateInterest()
            reportWritableIfBelowLow()
            return
        case .failed(let code):
            fail(IOError(call: "write", errno: code))
            return
        }
        if hadQueued { updateInterest() }
        if output == .shutdownPending {
            if closeWhenDrained {
                terminate(.local)
                return
            }
            completeShutdown()
            guard lifecycle == .open else { return }
        }
        reportWritableIfBelowLow()
        guard lifecycle == .open else { return }
        if hadQueued { storedHandler?.connectionDidDrain(self) }
    }

    private func reportWritableIfBelowLow() {
        if aboveHighWatermark, queuedBytes <= lowWatermark {
            aboveHighWatermark = false
            storedHandler?.connectionWritabilityChanged(self, isWritable: true)
        }
    }

    private func completeShutdown() {
        output = .shutdown
        if sysShutdownWrite(fileDescriptor) != 0 {
            let code = currentErrno()
            if code != ENOTCONN {
                fail(IOError(call: "shutdown", errno: code))
                return
            }
        }
        if input == .eof { terminate(.finished) }
    }

    // MARK: Loop interest

    /// The reports this connection waits for: input while reading, output while bytes wait.
    private var wantedInterest: UInt32 {
        var interest: UInt32 = 0
        if input == .reading { interest |= UInt32(ATS_POLL_IN) }
        if awaitingWritable || !pending.isEmpty { interest |= UInt32(ATS_POLL_OUT) }
        return interest
    }

    /// Tells the loop what this connection waits for (Dispatch backend only; the epoll
    /// registration already reports both directions, edge-triggered).
    @inline(__always)
    private func updateInterest() {
        guard loop.state.tracksInterest, lifecycle == .open, let token else { return }
        loop.core.setInterest(token, interest: wantedInterest)
    }

    // MARK: Closing

    private func fail(_ error: IOError) {
        terminate(error.isReset ? .reset : .error(error))
    }

    /// Closes the fd (now, or once the loop lets go of it) and then tells the handler.
    private func terminate(_ reason: TCPCloseReason) {
        switch lifecycle {
        case .idle, .open:
            break
        case .closing, .closed:
            return
        }
        lifecycle = .closing(reason)
        pending.removeAll()
        if let token {
            self.token = nil
            loop.core.unregisterAndClose(token, fd: fileDescriptor) { [self] in deliverClose(reason) }
        } else {
            sysClose(fileDescriptor)
            loop.runSoon { [self] in deliverClose(reason) }
        }
    }

    private func deliverClose(_ reason: TCPCloseReason) {
        lifecycle = .closed
        let handler = storedHandler
        storedHandler = nil
        handler?.connectionDidClose(self, reason: reason)
        let onFinalClose = onFinalClose
        self.onFinalClose = nil
        onFinalClose?()
    }
}
