import ATSProxyCore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where finished requests are written: CFNetwork-style text or JSON lines, to stderr or a file.
///
/// Cost model (the default `--diagnostics 1` runs this for every request): a record is formatted
/// on the thread that logs it (an event loop) and appended to one in-memory batch under a lock;
/// no thread is woken and no system call is made per record. The batch goes to the output in one
/// `write(2)` on a private writer queue, `flushInterval` after its first line, or at once when it
/// passes `flushThreshold` bytes. `flush()` writes everything logged so far and waits: the run and
/// exec commands call it before they exit (also after SIGINT/SIGTERM), so no line is lost on a
/// graceful stop. A crash (a trapped invariant, a signal that kills) loses what is batched: at most the
/// last `flushInterval` or `flushThreshold` of lines.
///
/// Order: lines of one thread keep their order; lines of different loops interleave by record,
/// never within one. Notes (banner, reload) take the same batch and are flushed at once.
///
/// Thread-safe: `log` and `note` may be called from any thread (the batch is behind a lock);
/// writes and the status line run on the writer queue only. That is the invariant behind
/// `@unchecked Sendable`.
public final class ProxyLogSink: @unchecked Sendable {
    /// Output format.
    public enum Format: String, Sendable, CaseIterable {
        /// Xcode-console-like lines (`--diagnostics` decides how much).
        case text
        /// One JSON object per request.
        case json
    }

    /// The longest a line waits in the batch before it is written.
    public static let flushInterval: DispatchTimeInterval = .milliseconds(50)
    /// A batch this large is written at once instead of waiting for `flushInterval`.
    public static let flushThreshold = 64 * 1024

    /// Which write of the batch is on its way to the writer queue.
    private enum ScheduledWrite {
        /// None: the next line schedules one `batchDelay` later.
        case none
        /// A write after `batchDelay`; a batch passing `flushThreshold` still asks for one at once.
        case later
        /// A write at once (the batch passed `flushThreshold`); no further one is asked for until it runs.
        case now
    }

    /// What waits to be written, and whether a write of it is already scheduled.
    private struct Batch {
        var bytes: [UInt8] = []
        /// The write already on its way for these bytes, if any.
        var scheduled: ScheduledWrite = .none
        /// The formatter, for the levels that number their blocks (`[L:N]`): formatting and appending
        /// under one lock keeps the numbers in output order. Level 1 and JSON format outside the lock.
        var formatter: DiagnosticsFormatter
    }

    private let queue = DispatchQueue(label: "ats-proxy.log")
    /// Guards `batchState`. An `NSLock` (a pthread mutex) rather than `Synchronization.Mutex`: the two cost the
    /// same uncontended, and ThreadSanitizer understands a pthread mutex (it reported the futex-based `Mutex` as a
    /// race in the concurrent-logger test).
    private let lock = NSLock()
    /// What waits to be written (under `lock` only).
    private var batchState: Batch
    /// A formatter copy for the stateless paths (level 1 text, JSON), used outside the lock.
    private let statelessFormatter: DiagnosticsFormatter
    private let format: Format
    /// Whether records produce any text (JSON always; text unless --diagnostics 0). Fixed at
    /// init so `log` can read it off the queue.
    private let writesRecords: Bool
    /// Whether formatting a record needs the batch's formatter (numbered blocks, levels 2 and 3).
    private let formatsUnderLock: Bool
    /// The output descriptor: 2 (stderr) or a file opened for appending, owned by the sink.
    private let fd: Int32
    private let ownsDescriptor: Bool
    /// Called for every record (before it is written); the session report and status line use it.
    private let observer: (@Sendable (RequestRecord) -> Void)?
    /// Buffer swapped with the batch on every write, so that neither side reallocates (writer queue only).
    private var spare: [UInt8] = []
    /// Batches written so far (writer queue only; tests read it through `writesSoFar`).
    private var batchesWritten = 0
    /// How long a batch waits after its first line (`flushInterval` unless a test sets another).
    private let batchDelay: DispatchTimeInterval

    /// How many batches have been written so far (waits for the writer queue): tests check that
    /// records are batched rather than written one by one.
    var writesSoFar: Int { queue.sync { batchesWritten } }

    /// - Parameter path: a file to append to (created 0644 when missing), or nil for standard error.
    public convenience init(
        format: Format, level: DiagnosticsLevel, allowSecrets: Bool, path: String?,
        observer: (@Sendable (RequestRecord) -> Void)? = nil
    ) throws {
        try self.init(
            format: format, level: level, allowSecrets: allowSecrets, path: path, observer: observer,
            batchDelay: Self.flushInterval)
    }

    /// As the public initializer, with the batch delay chosen by the caller: a test that counts writes sets a long
    /// one, so that only the size threshold and `flush()` write, however slowly a sanitizer build formats.
    init(
        format: Format, level: DiagnosticsLevel, allowSecrets: Bool, path: String?,
        observer: (@Sendable (RequestRecord) -> Void)?, batchDelay: DispatchTimeInterval
    ) throws {
        self.batchDelay = batchDelay
        self.format = format
        let formatter = DiagnosticsFormatter(level: level, allowSecrets: allowSecrets)
        self.statelessFormatter = formatter
        self.batchState = Batch(formatter: formatter)
        self.writesRecords = format == .json || level > .off
        self.formatsUnderLock = format == .text && level >= .blocks
        self.observer = observer
        if let path {
            let opened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
            guard opened >= 0 else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
            }
            fd = opened
            ownsDescriptor = true
        } else {
            fd = STDERR_FILENO
            ownsDescriptor = false
        }
    }

    deinit {
        if ownsDescriptor { close(fd) }
    }

    private var statusProvider: (@Sendable () -> String)?
    private var statusTimer: (any DispatchSourceTimer)?
    private var statusShown = ""

    /// Shows a one-line live status on standard error (a terminal), redrawn at most four times a
    /// second and kept below the log lines. Call once; only when stderr is a TTY.
    public func enableStatusLine(_ provider: @escaping @Sendable () -> String) {
        queue.async { [self] in
            statusProvider = provider
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
            timer.setEventHandler { [self] in drawStatus(force: false) }
            timer.resume()
            statusTimer = timer
        }
    }

    private func clearStatus() {
        guard !statusShown.isEmpty else { return }
        Self.writeAll(STDERR_FILENO, Array("\r\u{1B}[2K".utf8))
        statusShown = ""
    }

    private func drawStatus(force: Bool) {
        guard let statusProvider else { return }
        let line = statusProvider()
        guard force || line != statusShown else { return }
        Self.writeAll(STDERR_FILENO, Array("\r\u{1B}[2K\(line)".utf8))
        statusShown = line
    }

    /// Removes the status line (at exit), after writing what is batched.
    public func stopStatusLine() {
        queue.sync {
            writeBatch()
            statusTimer?.cancel()
            statusTimer = nil
            clearStatus()
            statusProvider = nil
        }
    }

    /// Hands one finished record to the observer and, when the level writes anything, formats it
    /// into the batch. Never blocks on I/O and wakes no thread, except when this record starts a
    /// batch (a write `flushInterval` later is scheduled) or fills one past `flushThreshold`.
    public func log(_ record: RequestRecord) {
        observer?(record)
        guard writesRecords else { return }
        if formatsUnderLock {
            append { batch in batch.formatter.appendText(record, to: &batch.bytes) }
            return
        }
        var line: [UInt8] = []
        switch format {
        case .json:
            line.append(contentsOf: statelessFormatter.jsonLine(record).utf8)
            line.append(UInt8(ascii: "\n"))
        case .text:
            var formatter = statelessFormatter
            formatter.appendText(record, to: &line)
        }
        guard !line.isEmpty else { return }
        append { batch in batch.bytes.append(contentsOf: line) }
    }

    /// Writes a free-form line (startup banner, reload notes) in text mode; in JSON mode as an
    /// object with a `message` key. Notes are written at once (after what was logged before them).
    public func note(_ message: String) {
        var line: [UInt8]
        switch format {
        case .text:
            line = Array("ats-proxy: \(message)\n".utf8)
        case .json:
            let object = ["time": ISO8601DateFormatter().string(from: Date()), "message": message]
            guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else {
                return
            }
            line = Array(data)
            line.append(UInt8(ascii: "\n"))
        }
        withBatch { $0.bytes.append(contentsOf: line) }
        queue.async { [self] in writeBatch() }
    }

    /// Writes everything logged so far and waits until it is written.
    public func flush() { queue.sync { writeBatch() } }

    /// Runs `body` on the batch under the lock.
    private func withBatch<Result>(_ body: (inout Batch) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&batchState)
    }

    /// Appends under the lock, then schedules the write the batch needs (outside the lock).
    private func append(_ add: (inout Batch) -> Void) {
        let schedule: ScheduledWrite = withBatch { batch in
            add(&batch)
            switch batch.scheduled {
            case .now:
                return .none
            case .later:
                guard batch.bytes.count >= Self.flushThreshold else { return .none }
                batch.scheduled = .now
                return .now
            case .none:
                guard !batch.bytes.isEmpty else { return .none }
                batch.scheduled = batch.bytes.count >= Self.flushThreshold ? .now : .later
                return batch.scheduled
            }
        }
        switch schedule {
        case .none: break
        case .later: queue.asyncAfter(deadline: .now() + batchDelay) { [self] in writeBatch() }
        case .now: queue.async { [self] in writeBatch() }
        }
    }

    /// Takes the batch and writes it in one go, below any status line (writer queue only).
    private func writeBatch() {
        dispatchPrecondition(condition: .onQueue(queue))
        var pending = spare
        pending.removeAll(keepingCapacity: true)
        withBatch { batch in
            swap(&batch.bytes, &pending)
            batch.scheduled = .none
        }
        guard !pending.isEmpty else {
            spare = pending
            return
        }
        clearStatus()
        Self.writeAll(fd, pending)
        batchesWritten += 1
        drawStatus(force: true)
        pending.removeAll(keepingCapacity: pending.capacity <= 4 * Self.flushThreshold)
        spare = pending
    }

    /// Writes every byte, retrying after interruptions and short writes; gives up on other errors
    /// (a closed stderr must not stop the proxy).
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}
