internal import CATSPoll

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One outbound connection attempt: resolve, then a non-blocking `connect` to each address in
/// order (IPv6 and IPv4 as resolved) until one succeeds, all within one overall timeout.
///
/// Contract: `completion` runs exactly once on the loop, with a started-but-handlerless
/// `TCPConnection` (set its handler in the completion; it is started right after) or a
/// `ConnectError`, unless `cancel()` ran first, in which case it never runs. When every address
/// fails, the last address's error is reported. Each in-progress socket is registered with the
/// loop the way a connection is, waiting for writability (on epoll: input and output,
/// edge-triggered; on Dispatch: the write source only); on success the registration passes to the
/// `TCPConnection` as it is, so connecting costs one `epoll_ctl` on epoll.
///
/// Threading: create and cancel on the loop. All state is loop-confined (the invariant behind
/// `@unchecked Sendable`); the poller registration and the timer retain the connector until it
/// finishes.
public final class TCPConnector: @unchecked Sendable, LoopWatcher {
    /// Lifecycle of the attempt.
    enum State {
        /// Waiting for the resolver.
        case resolving
        /// A `connect` to `addresses[index]` is in flight on `fd`, registered as `token`.
        case connecting(index: Int, fd: Int32, token: LoopToken)
        /// Completed, failed, timed out or cancelled; nothing further happens.
        case finished
    }

    /// The loop the attempt and the resulting connection belong to.
    public let loop: EventLoop
    /// The host asked for (for diagnostics).
    public let host: String
    /// The port asked for.
    public let port: UInt16
    /// The address that accepted, once connected.
    public private(set) var connectedAddress: SocketAddress?

    private var state = State.resolving
    private var addresses: [SocketAddress] = []
    private var lastError = ConnectError.refused
    private var timer: LoopTimer?
    private var completion: ((Result<TCPConnection, ConnectError>) -> Void)?

    private init(loop: EventLoop, host: String, port: UInt16) {
        self.loop = loop
        self.host = host
        self.port = port
    }

    /// Starts connecting to `host:port` on `loop` (call on the loop). `timeout` covers resolution
    /// and every attempt together; the default is the proxy's 15 s upstream connect timeout.
    @discardableResult
    public static func connect(
        host: String, port: UInt16, on loop: EventLoop, resolver: Resolver,
        timeout: Duration = .seconds(15),
        completion: @escaping (Result<TCPConnection, ConnectError>) -> Void
    ) -> TCPConnector {
        loop.assertInLoop()
        let connector = TCPConnector(loop: loop, host: host, port: port)
        connector.completion = completion
        connector.timer = LoopTimer.oneShot(on: loop, after: timeout) { [connector] in
            connector.timedOut()
        }
        resolver.resolve(host: host, port: port, on: loop) { [connector] result in
            connector.resolved(result)
        }
        return connector
    }

    /// Connects to already-resolved addresses, in order (call on the loop).
    @discardableResult
    public static func connect(
        to addresses: [SocketAddress], on loop: EventLoop, timeout: Duration = .seconds(15),
        completion: @escaping (Result<TCPConnection, ConnectError>) -> Void
    ) -> TCPConnector {
        loop.assertInLoop()
        let first = addresses.first
        let connector = TCPConnector(loop: loop, host: first?.ip.description ?? "", port: first?.port ?? 0)
        connector.completion = completion
        connector.timer = LoopTimer.oneShot(on: loop, after: timeout) { [connector] in
            connector.timedOut()
        }
        connector.resolved(
            addresses.isEmpty ? .failure(.dnsFailure(host: "", detail: "no address")) : .success(addresses))
        return connector
    }

    /// Abandons the attempt; the completion will not run. Idempotent.
    public func cancel() {
        loop.assertInLoop()
        abandonCurrentAttempt()
        state = .finished
        completion = nil
        timer?.cancel()
        timer = nil
    }

    private func resolved(_ result: Result<[SocketAddress], ConnectError>) {
        switch state {
        case .resolving:
            break
        case .connecting, .finished:
            return
        }
        switch result {
        case .success(let list):
            addresses = list
            attempt(index: 0)
        case .failure(let error):
            finish(.failure(error))
        }
    }

    private func attempt(index: Int) {
        guard index < addresses.count else {
            finish(.failure(lastError))
            return
        }
        let address = addresses[index]
        let fd: Int32
        do {
            fd = try Socket.makeTCP(family: address.family)
        } catch {
            lastError = .other(error)
            attempt(index: index + 1)
            return
        }
        let rc = address.withSockAddr { sysConnect(fd, $0, $1) }
        let code = rc == 0 ? 0 : currentErrno()
        if rc != 0 && code != EINPROGRESS && code != EINTR {
            sysClose(fd)
            lastError = ConnectError.from(errno: code, call: "connect")
            attempt(index: index + 1)
            return
        }
        // Connected at once (possible on loopback) or in progress: either way wait for writability,
        // which keeps one code path and lets SO_ERROR tell the outcome.
        do {
            let token = try loop.core.register(
                fd: fd, interest: UInt32(ATS_POLL_OUT), edgeTriggered: true, watcher: self)
            state = .connecting(index: index, fd: fd, token: token)
        } catch {
            sysClose(fd)
            lastError = .other(error)
            attempt(index: index + 1)
        }
    }

    func loopEvent(_ events: UInt32) {
        guard case .connecting(let index, let fd, let token) = state else { return }
        guard events & UInt32(ATS_POLL_OUT | ATS_POLL_ERR | ATS_POLL_HUP) != 0 else { return }
        let code = Socket.pendingError(fd)
        if code == 0 {
            state = .finished
            connectedAddress = addresses[index]
            let connection = TCPConnection(
                connected: fd, remoteAddress: addresses[index], loop: loop, token: token)
            finish(.success(connection))
            return
        }
        lastError = ConnectError.from(errno: code, call: "connect \(addresses[index])")
        abandonCurrentAttempt()
        attempt(index: index + 1)
    }

    /// Unregisters and closes the in-flight attempt's socket.
    private func abandonCurrentAttempt() {
        guard case .connecting(_, let fd, let token) = state else { return }
        state = .resolving
        loop.core.unregisterAndClose(token, fd: fd, then: nil)
    }

    private func timedOut() {
        switch state {
        case .resolving, .connecting:
            abandonCurrentAttempt()
            finish(.failure(.timedOut))
        case .finished:
            return
        }
    }

    private func finish(_ result: Result<TCPConnection, ConnectError>) {
        state = .finished
        timer?.cancel()
        timer = nil
        let completion = completion
        self.completion = nil
        guard let completion else {
            if case .success(let connection) = result { connection.close() }
            return
        }
        completion(result)
        if case .success(let connection) = result { connection.start() }
    }
}
