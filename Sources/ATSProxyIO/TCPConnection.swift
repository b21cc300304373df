import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a `TCPConnection` closed, delivered once through `TCPConnectionHandler.connectionDidClose`.
public enum TCPCloseReason: Sendable, Equatable, CustomStringConvertible {
    /// `close()` or `reset()` was called on this side.
    case local
    /// Both directions finished cleanly: the peer sent EOF and our write side was shut down.
    case finished
    /// The peer reset the connection (`ECONNRESET`) or vanished while we wrote (`EPIPE`).
    case reset
    /// Any other socket error.
    case error(IOError)

    public var description: String {
        switch self {
        case .local: return "closed locally"
        case .finished: return "finished"
        case .reset: return "reset by peer"
        case .error(let error): return "error: \(error)"
        }
    }
}

/// The events a `TCPConnection` delivers, always on the connection's loop.
///
/// The connection holds its handler strongly until it has delivered `connectionDidClose`, then
/// drops it, so a handler that also holds the connection forms no lasting cycle. Handlers may call
/// any command (`write`, `close`, `pauseReading`, ...) from within a callback.
public protocol TCPConnectionHandler: AnyObject {
    /// Bytes arrived. `bytes` points into the loop's shared read buffer and is valid only during
    /// the call: copy what must outlive it (or pass it straight to another connection's `write`).
    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer)
    /// The peer shut down its write side (read returned 0). Reading stops for good. Delivered even
    /// when our write side is already shut (the connection then closes with `.finished` right after).
    /// Default: finish our side too (`shutdownWrite()`, which closes once the write queue drained).
    func connectionDidReadEOF(_ connection: TCPConnection)
    /// The write queue crossed the high watermark (`false`) or fell back to the low one (`true`).
    /// A relay pauses the other side's reads on `false` and resumes them on `true`.
    func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool)
    /// Every queued byte has been handed to the kernel (the queue went from non-empty to empty).
    func connectionDidDrain(_ connection: TCPConnection)
    /// The connection is closed and its file descriptor released. Delivered exactly once.
    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason)
}

extension TCPConnectionHandler {
    public func connectionDidReadEOF(_ connection: TCPConnection) { connection.shutdownWrite() }
    public func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool) {}
    public func connectionDidDrain(_ connection: TCPConnection) {}
}

/// A connected, non-blocking TCP socket driven by a `DispatchSourceRead` and a
/// `DispatchSourceWrite` on its loop's queue.
///
/// Contract:
/// - The read source is armed for the connection's life except while reading is paused
///   (`pauseReading`) or after EOF. One event reads at most a few loop read buffers.
/// - `write` tries the socket at once; what the kernel does not take is queued and the write source
///   is resumed only then, and suspended again in its handler once the queue is empty.
/// - Watermarks: crossing `highWatermark` reports "not writable", falling to `lowWatermark` reports
///   "writable" again. The queue is never bounded by the connection itself: callers honour the
///   signal (a relay pauses its other side).
/// - `close()` drops queued bytes, cancels both sources (resuming any suspended one so its cancel
///   handler runs) and closes the fd in the last cancel handler, then calls `connectionDidClose`.
///
/// Threading: every method must be called on `loop.queue` (checked with `dispatchPrecondition`);
/// the only exception is `start`'s caller scheduling. That confinement is the invariant behind
/// `@unchecked Sendable`. The sources' handlers retain the connection until both are cancelled,
/// so a connection stays alive while open even if nobody else holds it.
public final class TCPConnection: @unchecked Sendable, CustomStringConvertible {
    /// The connection's lifecycle.
    enum Lifecycle: Equatable {
        /// Created; sources not yet resumed. Writes are queued.
        case idle
        /// Sources live; reading and writing.
        case open
        /// Sources cancelled, waiting for their cancel handlers; the fd is still open.
        case closing(TCPCloseReason)
        /// The fd is closed and the handler has been told.
        case closed
    }

    /// The read direction.
    enum InputState: Equatable {
        /// Read source armed (once the connection is open).
        case reading
        /// Read source suspended by `pauseReading`.
        case paused
        /// The peer sent EOF; the read source stays suspended.
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
    /// The local address, read once at creation.
    public let localAddress: SocketAddress?
    /// The peer address, read once at creation.
    public let remoteAddress: SocketAddress?
    /// A process-unique number for logs.
    public let id: UInt64

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
    public private(set) var queuedBytes = 0
    /// The largest `queuedBytes` ever observed (for tests and statistics).
    public private(set) var maxQueuedBytes = 0
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
    private var lifecycle = Lifecycle.idle
    private var input = InputState.reading
    private var output = OutputState.open
    private let readSource: any DispatchSourceRead
    private let writeSource: any DispatchSourceWrite
    private var readSourceSuspended = true
    private var writeSourceSuspended = true
    private var pendingCancels = 2
    private var writeQueue: [[UInt8]] = []
    private var writeQueueHead = 0
    private var headOffset = 0
    private var aboveHighWatermark = false
    /// Called after `connectionDidClose` (the listener uses it to count live connections).
    var onFinalClose: (@Sendable () -> Void)?

    private static let idCounter = IDCounter()
    /// Largest chunk the write queue appends small writes into (write coalescing).
    private static let coalesceLimit = 64 * 1024

    /// Adopts a connected socket. The fd is made non-blocking and close-on-exec and gets
    /// `TCP_NODELAY`. Call on any thread; everything afterwards happens on `loop`.
    public convenience init(adopting fd: Int32, loop: EventLoop) {
        self.init(accepted: fd, remoteAddress: nil, loop: loop)
    }

    /// Adopts a socket whose peer address is already known (from `accept`), saving a syscall.
    init(accepted fd: Int32, remoteAddress: SocketAddress?, loop: EventLoop) {
        self.loop = loop
        self.fileDescriptor = fd
        self.id = Self.idCounter.next()
        Socket.configureConnected(fd)
        self.localAddress = SocketAddress.of(fd: fd, peer: false)
        self.remoteAddress = remoteAddress ?? SocketAddress.of(fd: fd, peer: true)
        readSource = DispatchSource.makeReadSource(fileDescriptor: fd, queue: loop.queue)
        writeSource = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: loop.queue)
        readSource.setEventHandler { [self] in readable() }
        writeSource.setEventHandler { [self] in writableEvent() }
        readSource.setCancelHandler { [self] in sourceCancelled() }
        writeSource.setCancelHandler { [self] in sourceCancelled() }
    }

    public var description: String {
        "TCPConnection(#\(id) fd \(fileDescriptor) \(localAddress?.description ?? "?")"
            + " <-> \(remoteAddress?.description ?? "?"))"
    }

    /// Internal state for tests and debugging (call on the loop).
    var stateSummary: String {
        "\(lifecycle) in=\(input) out=\(output) rs=\(readSourceSuspended ? "S" : "A")"
            + " ws=\(writeSourceSuspended ? "S" : "A") q=\(queuedBytes) r=\(bytesRead) w=\(bytesWritten)"
    }

    // MARK: Commands

    /// Starts delivering events: arms the read source (unless paused) and flushes writes queued
    /// before the start. Idempotent. Must run on the loop.
    public func start() {
        loop.assertInLoop()
        switch lifecycle {
        case .idle:
            lifecycle = .open
            if input == .reading { resumeReadSource() }
            if writeQueueHead < writeQueue.count || output == .shutdownPending { flush() }
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
        if lifecycle == .open, writeQueueHead == writeQueue.count {
            // Fast path: nothing queued, try the socket directly from the caller's memory.
            while !remaining.isEmpty {
                let n = sysWrite(fileDescriptor, remaining.baseAddress, remaining.count)
                if n > 0 {
                    bytesWritten += UInt64(n)
                    remaining = UnsafeRawBufferPointer(rebasing: remaining[n...])
                    continue
                }
                let code = currentErrno()
                if n < 0 && code == EINTR { continue }
                if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) { break }
                fail(IOError(call: "write", errno: n < 0 ? code : EIO))
                return
            }
            if remaining.isEmpty { return }
        }
        enqueue(remaining)
        if lifecycle == .open { armWriteSource() }
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
            if lifecycle == .open { suspendReadSource() }
        case .paused, .eof:
            return
        }
    }

    /// Resumes reading after `pauseReading`. Idempotent; no effect after EOF or close.
    public func resumeReading() {
        loop.assertInLoop()
        switch input {
        case .paused:
            input = .reading
            if lifecycle == .open {
                resumeReadSource()
                if drainingWithoutEvents { scheduleDrain() }
            }
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
            if lifecycle == .open, writeQueueHead == writeQueue.count { completeShutdown() }
        case .shutdownPending, .shutdown:
            return
        }
    }

    /// Closes now, dropping queued bytes. `connectionDidClose(.local)` follows asynchronously.
    public func close() {
        loop.assertInLoop()
        terminate(.local)
    }

    /// Closes once every queued byte has been written (or at once when nothing is queued).
    public func closeAfterFlush() {
        loop.assertInLoop()
        guard isOpen else { return }
        if writeQueueHead == writeQueue.count {
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
        Socket.setLingerZero(fileDescriptor)
        terminate(.local)
    }

    private var closeWhenDrained = false
    /// Set after a hang-up event: the read source will not fire again, so reading continues by
    /// re-scheduling itself until EOF.
    private var drainingWithoutEvents = false

    private var acceptsWrites: Bool {
        guard isOpen else { return false }
        switch output {
        case .open: return true
        case .shutdownPending, .shutdown: return false
        }
    }

    // MARK: Read side

    /// A read event. On Linux, libdispatch answers `EPOLLHUP` with one last event whose `data` is 0
    /// and then removes the fd from epoll: the source never fires again. So a zero estimate switches
    /// the connection to draining by itself (re-scheduling on the loop) until EOF or an error.
    private func readable() {
        if readSource.data == 0 { drainingWithoutEvents = true }
        readAvailable()
    }

    /// Reads up to a few buffers (fairness between connections on one loop), delivering each.
    private func readAvailable() {
        guard lifecycle == .open, input == .reading else { return }
        let buffer = loop.readBuffer
        for _ in 0..<4 {
            let n = sysRead(fileDescriptor, buffer.baseAddress, buffer.count)
            if n > 0 {
                bytesRead += UInt64(n)
                storedHandler?.connectionDidRead(self, bytes: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                guard lifecycle == .open, input == .reading else { return }
                if n < buffer.count && !drainingWithoutEvents { return }
                continue
            }
            if n == 0 {
                receivedEOF()
                return
            }
            let code = currentErrno()
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK {
                // Not a hang-up after all: the source is still registered and will fire again.
                drainingWithoutEvents = false
                return
            }
            fail(IOError(call: "read", errno: code))
            return
        }
        if drainingWithoutEvents { scheduleDrain() }
    }

    private func scheduleDrain() {
        loop.queue.async { [self] in readAvailable() }
    }

    private func receivedEOF() {
        input = .eof
        suspendReadSource()
        storedHandler?.connectionDidReadEOF(self)
        guard lifecycle == .open else { return }
        if output == .shutdown { terminate(.finished) }
    }

    // MARK: Write side

    private func enqueue(_ bytes: UnsafeRawBufferPointer) {
        if writeQueueHead < writeQueue.count, writeQueue[writeQueue.count - 1].count < Self.coalesceLimit {
            writeQueue[writeQueue.count - 1].append(contentsOf: bytes)
        } else {
            writeQueue.append(Array(bytes))
        }
        queuedBytes += bytes.count
        maxQueuedBytes = max(maxQueuedBytes, queuedBytes)
    }

    private func updateWatermarkAfterEnqueue() {
        if !aboveHighWatermark, queuedBytes > highWatermark {
            aboveHighWatermark = true
            storedHandler?.connectionWritabilityChanged(self, isWritable: false)
        }
    }

    private func writableEvent() {
        guard lifecycle == .open else { return }
        flush()
    }

    /// Writes queued chunks until the kernel refuses (arm the write source) or the queue empties
    /// (disarm it; complete a pending shutdown; report drained / writable).
    private func flush() {
        let hadQueued = queuedBytes > 0
        while writeQueueHead < writeQueue.count {
            let n = writeQueue[writeQueueHead].withUnsafeBytes { chunk in
                sysWrite(fileDescriptor, chunk.baseAddress! + headOffset, chunk.count - headOffset)
            }
            if n > 0 {
                bytesWritten += UInt64(n)
                queuedBytes -= n
                headOffset += n
                if headOffset == writeQueue[writeQueueHead].count {
                    writeQueue[writeQueueHead] = []
                    writeQueueHead += 1
                    headOffset = 0
                }
                continue
            }
            let code = currentErrno()
            if n < 0 && code == EINTR { continue }
            if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) {
                armWriteSource()
                reportWritableIfBelowLow()
                return
            }
            fail(IOError(call: "write", errno: n < 0 ? code : EIO))
            return
        }
        writeQueue.removeAll(keepingCapacity: writeQueue.capacity <= 16)
        writeQueueHead = 0
        disarmWriteSource()
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
        if writeQueueHead > 64, writeQueueHead * 2 > writeQueue.count {
            writeQueue.removeFirst(writeQueueHead)
            writeQueueHead = 0
        }
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

    // MARK: Sources

    private func resumeReadSource() {
        if readSourceSuspended {
            readSourceSuspended = false
            readSource.resume()
        }
    }

    private func suspendReadSource() {
        if !readSourceSuspended {
            readSourceSuspended = true
            readSource.suspend()
        }
    }

    private func armWriteSource() {
        if writeSourceSuspended {
            writeSourceSuspended = false
            writeSource.resume()
        }
    }

    private func disarmWriteSource() {
        if !writeSourceSuspended {
            writeSourceSuspended = true
            writeSource.suspend()
        }
    }

    // MARK: Closing

    private func fail(_ error: IOError) {
        terminate(error.isReset ? .reset : .error(error))
    }

    /// Cancels both sources (resuming suspended ones so the cancel handlers run: pitfall 8).
    private func terminate(_ reason: TCPCloseReason) {
        switch lifecycle {
        case .idle, .open:
            break
        case .closing, .closed:
            return
        }
        lifecycle = .closing(reason)
        writeQueue = []
        writeQueueHead = 0
        headOffset = 0
        queuedBytes = 0
        readSource.cancel()
        writeSource.cancel()
        resumeReadSource()
        armWriteSource()
    }

    private func sourceCancelled() {
        pendingCancels -= 1
        guard pendingCancels == 0 else { return }
        guard case .closing(let reason) = lifecycle else {
            preconditionFailure("\(self): both sources cancelled in state \(lifecycle)")
        }
        sysClose(fileDescriptor)
        lifecycle = .closed
        let handler = storedHandler
        storedHandler = nil
        handler?.connectionDidClose(self, reason: reason)
        let onFinalClose = onFinalClose
        self.onFinalClose = nil
        onFinalClose?()
    }
}

/// A thread-safe counter for connection ids.
final class IDCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value: UInt64 = 0

    func next() -> UInt64 {
        lock.withLock {
            value += 1
            return value
        }
    }
}
