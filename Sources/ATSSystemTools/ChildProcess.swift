import CProcessSpawn
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One child process started with `posix_spawn`, addressed by its PID: in a process group of its own,
/// with every descriptor but its standard three closed (as Foundation's `Process` does), and reaped by
/// `waitpid` on this PID only.
///
/// It replaces `Foundation.Process` wherever ats-proxy or its tests start a program: on Linux,
/// `Process.run()` scans /proc/self/fd with a copy that reads past short directory entries and crashes
/// the calling process now and then (swift-corelibs-foundation#5472, not fixed in Swift 6.3).
/// Thread-safe: the exit status is read and cached under a lock, so `isRunning` may be polled from any
/// thread while another waits.
public final class ChildProcess: @unchecked Sendable {
    /// Where one of the child's standard descriptors comes from.
    public enum Stream: Sendable {
        /// The parent's own descriptor of that number.
        case inherit
        /// `/dev/null`.
        case null
        /// A file, created (and truncated) for output, opened read-only for input.
        case file(String)
        /// An open descriptor of the parent; the caller keeps and closes it.
        case descriptor(Int32)
    }

    /// How the child ended.
    public enum Termination: Sendable, Equatable {
        /// It called `exit` with this status.
        case exited(Int32)
        /// A signal of this number ended it.
        case signalled(Int32)

        /// The status a shell would report: the exit status, or 128 plus the signal number.
        public var shellStatus: Int32 {
            switch self {
            case .exited(let status): status
            case .signalled(let signal): 128 + signal
            }
        }
    }

    /// A failure to start the child, with the errno text.
    public struct SpawnError: Error, CustomStringConvertible {
        public let executable: String
        public let code: Int32
        public var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
    }

    /// The child's PID.
    public let processIdentifier: Int32
    private let lock = NSLock()
    private var ended: Termination?

    /// Starts `executable` (a path, not looked up on `PATH`) with `arguments` (not including argv[0]) and
    /// exactly `environment`; throws `SpawnError` when it cannot be started.
    public init(
        executable: String, arguments: [String], environment: [String: String],
        currentDirectory: String? = nil, standardInput: Stream = .null, standardOutput: Stream = .inherit,
        standardError: Stream = .inherit
    ) throws {
        var opened: [Int32] = []
        defer { for descriptor in opened { close(descriptor) } }
        func descriptor(_ stream: Stream, forInput: Bool) throws -> Int32 {
            switch stream {
            case .inherit: return -1
            case .descriptor(let descriptor): return descriptor
            case .null, .file:
                let path: String
                if case .file(let file) = stream { path = file } else { path = "/dev/null" }
                let flags = forInput ? O_RDONLY : (O_WRONLY | O_CREAT | O_TRUNC)
                let descriptor = open(path, flags | O_CLOEXEC, 0o644)
                guard descriptor >= 0 else { throw SpawnError(executable: path, code: errno) }
                opened.append(descriptor)
                return descriptor
            }
        }
        let input = try descriptor(standardInput, forInput: true)
        let output = try descriptor(standardOutput, forInput: false)
        let error = try descriptor(standardError, forInput: false)

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let status = ats_process_spawn(&pid, executable, argv, envp, currentDirectory, input, output, error)
        guard status == 0 else { throw SpawnError(executable: executable, code: status) }
        processIdentifier = pid
    }

    /// How the child ended, or nil while it runs (never blocks).
    public var termination: Termination? {
        lock.lock()
        defer { lock.unlock() }
        if ended == nil { reap(options: WNOHANG) }
        return ended
    }

    /// Foundation's `terminationStatus`: the exit status, or the number of the signal that ended the child;
    /// -1 while it runs.
    public var terminationStatus: Int32 {
        switch termination {
        case .exited(let status): status
        case .signalled(let signal): signal
        case nil: -1
        }
    }

    /// True until the child has ended and been reaped.
    public var isRunning: Bool { termination == nil }

    /// Blocks until the child ends; returns how it ended.
    @discardableResult
    public func waitUntilExit() -> Termination {
        while true {
            if let termination { return termination }
            // Sleeps in the kernel until the child ends, without reaping it (the reaping is `reap`'s,
            // under the lock).
            var info = siginfo_t()
            _ = waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT)
        }
    }

    /// Waits up to `timeout` seconds; true when the child has ended.
    public func wait(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if termination != nil { return true }
            usleep(5_000)
        }
        return termination != nil
    }

    /// Sends `signal` to the child while it runs (never to a reused PID after it was reaped).
    public func send(_ signal: Int32) {
        lock.lock()
        defer { lock.unlock() }
        if ended == nil { reap(options: WNOHANG) }
        if ended == nil { kill(processIdentifier, signal) }
    }

    /// `waitpid` on this PID; records the ending when there is one. Call with `lock` held.
    private func reap(options: Int32) {
        var status: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(processIdentifier, &status, options) } while result == -1 && errno == EINTR
        guard result == processIdentifier else {
            // ECHILD: someone else reaped it; it has ended, how is unknown.
            if result == -1 && errno == ECHILD { ended = .signalled(0) }
            return
        }
        let low = status & 0x7f
        if low == 0 {
            ended = .exited((status >> 8) & 0xff)
        } else if low != 0x7f {
            ended = .signalled(low)
        }
    }
}
