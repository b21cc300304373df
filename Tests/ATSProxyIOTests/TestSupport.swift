import Dispatch
import Foundation
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

/// A one-shot, thread-safe result slot a test blocks on with a timeout.
final class Expectation<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private let semaphore = DispatchSemaphore(value: 0)
    private var value: Value?

    /// Stores `value` unless one is already stored; wakes the waiter.
    func fulfill(_ newValue: Value) {
        let first: Bool = lock.withLock {
            guard value == nil else { return false }
            value = newValue
            return true
        }
        if first { semaphore.signal() }
    }

    /// The stored value, waiting at most `seconds` for it.
    func wait(seconds: Double = 10) -> Value? {
        _ = semaphore.wait(timeout: .now() + seconds)
        return lock.withLock { value }
    }
}

/// A lock-protected counter that signals when it reaches a target.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private let done = DispatchSemaphore(value: 0)
    private let target: Int
    private(set) var failures: [String] = []
    private var count = 0

    init(target: Int) { self.target = target }

    nonisolated(unsafe) var registered: [EchoClient] = []
    func register(_ client: EchoClient) { lock.withLock { registered.append(client) } }

    func succeed() {
        let reached: Bool = lock.withLock {
            count += 1
            return count == target
        }
        if reached { done.signal() }
    }

    func fail(_ message: String) {
        lock.withLock { failures.append(message) }
        succeed()
    }

    var successes: Int { lock.withLock { count - failures.count } }
    var failureList: [String] { lock.withLock { failures } }

    func wait(seconds: Double) -> Bool {
        done.wait(timeout: .now() + seconds) == .success
    }
}

/// Polls `condition` every 5 ms for at most `seconds`.
func eventually(seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}

/// Runs `body` synchronously on `loop` and returns its result.
func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @Sendable () -> T) -> T {
    loop.submitAndWait(body)
}

/// Echoes everything back; finishes its write side after the peer's EOF (the protocol default).
/// Ignores what arrives and records what the tests ask about a connection: that bytes arrived,
/// whether it still counted as open when it closed, and why it closed. On EOF it leaves both ends
/// alone (no automatic `shutdownWrite`).
final class CloseRecorder: TCPConnectionHandler, @unchecked Sendable {
    let gotBytes = Expectation<Bool>()
    let closed = Expectation<TCPCloseReason>()
    let openAtClose = Expectation<Bool>()
    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) { gotBytes.fulfill(true) }
    func connectionDidReadEOF(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
        openAtClose.fulfill(connection.isOpen)
        closed.fulfill(reason)
    }
}

final class EchoHandler: TCPConnectionHandler {
    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        connection.write(bytes)
    }

    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {}
}

/// Starts an echo listener on `address` (port 0 by default).
func startEchoServer(
    group: EventLoopGroup, address: String = "127.0.0.1:0", maxConnections: Int = 10_000,
    onOverLimit: (@Sendable (TCPConnection) -> Void)? = nil
) throws -> TCPListener {
    let configuration = TCPListener.Configuration(
        address: ListenAddress(parsing: address)!, maxConnections: maxConnections)
    let listener = try TCPListener(
        configuration: configuration, group: group,
        onAccept: { connection in connection.handler = EchoHandler() },
        onOverLimit: onOverLimit)
    listener.start()
    return listener
}

/// Starts a listener on an ephemeral loopback port that hands each accepted connection to
/// `onAccept`.
func startLoopbackListener(
    group: EventLoopGroup, onAccept: @escaping @Sendable (TCPConnection) -> Void
) throws -> TCPListener {
    let listener = try TCPListener(
        configuration: .init(address: ListenAddress(parsing: "127.0.0.1:0")!), group: group, onAccept: onAccept)
    listener.start()
    return listener
}

/// Runs `body` on the calling thread while `loop` is held busy by a task of its own, so that the
/// readiness `body` causes (a loopback send is queued at the receiver when it returns) is
/// reported to the loop in one batch once the task ends.
func whileLoopIsBusy(_ loop: EventLoop, _ body: () throws -> Void) rethrows {
    let busy = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    loop.execute {
        busy.signal()
        _ = release.wait(timeout: .now() + 10)
    }
    _ = busy.wait(timeout: .now() + 10)
    defer { release.signal() }
    try body()
}

/// Two clients of a listener on `group`'s first loop, each served by a handler from `make`, that
/// have sent "go" while the loop was busy: the loop sees both requests in one batch of reports.
/// Closing: the clients and the listener go when the pair is released.
final class OneBatchPair<Handler: TCPConnectionHandler & Sendable>: @unchecked Sendable {
    let listener: TCPListener
    let clients: [BlockingClient]
    /// The handlers, in accept order.
    var handlers: [Handler] { box.all }
    private let box = AcceptBox<Handler>()

    init(group: EventLoopGroup, make: @escaping @Sendable () -> Handler) throws {
        let box = box
        let listener = try startLoopbackListener(group: group) { connection in
            let handler = make()
            box.add(handler, descriptor: connection.fileDescriptor)
            connection.handler = handler
        }
        self.listener = listener
        let clients = try (0..<2).map { _ in try BlockingClient(connectingTo: listener.boundAddress) }
        self.clients = clients
        guard eventually({ box.all.count == 2 }) else { throw IOError(call: "accept", errno: ETIMEDOUT) }
        try whileLoopIsBusy(group.loops[0]) {
            for client in clients { client.send("go") }
            // Released only once both requests wait in the server's sockets: then one batch reports both.
            guard eventually({ box.descriptors.allSatisfy { Self.unread($0) >= 2 } }) else {
                throw IOError(call: "send", errno: ETIMEDOUT)
            }
        }
    }

    deinit {
        for client in clients { client.close() }
        stopAndWait(listener)
    }

    /// Bytes waiting in the socket `descriptor` (FIONREAD).
    private static func unread(_ descriptor: Int32) -> Int32 {
        var count: Int32 = 0
        return ioctl(descriptor, UInt(FIONREAD), &count) == 0 ? count : -1
    }

    /// Handlers and their sockets as the listener creates them (on the loop), read by the test thread.
    private final class AcceptBox<Item>: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [(item: Item, descriptor: Int32)] = []
        func add(_ item: Item, descriptor: Int32) { lock.withLock { items.append((item, descriptor)) } }
        var all: [Item] { lock.withLock { items.map(\.item) } }
        var descriptors: [Int32] { lock.withLock { items.map(\.descriptor) } }
    }
}

/// Stops `listener` and waits until its socket is closed.
func stopAndWait(_ listener: TCPListener) {
    let stopped = Expectation<Bool>()
    listener.stop { stopped.fulfill(true) }
    _ = stopped.wait(seconds: 5)
}

/// A blocking client socket for tests (with 5 s receive/send timeouts).
final class BlockingClient {
    let fd: Int32

    init(connectingTo address: SocketAddress) throws {
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IOError.current("socket") }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let rc = address.withSockAddr { Glibc.connect(fd, $0, $1) }
        guard rc == 0 else {
            let error = IOError.current("connect")
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until EOF, error or timeout.
    func readToEnd() -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return result }
            result.append(contentsOf: buffer[0..<n])
        }
    }

    /// Reads at least `count` bytes (or until EOF/timeout).
    func read(atLeast count: Int) -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while result.count < count {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return result }
            result.append(contentsOf: buffer[0..<n])
        }
        return result
    }

    func shutdownWrite() { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }

    /// Closes with RST instead of FIN.
    func reset() {
        Socket.setLingerZero(fd)
        Glibc.close(fd)
    }

    func close() { Glibc.close(fd) }
}
