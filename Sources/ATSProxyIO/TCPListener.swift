internal import CATSPoll
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A listening TCP socket that accepts on one loop of an `EventLoopGroup` and hands every accepted
/// socket to the group's next loop, as a `TCPConnection` (directly when that is the accepting loop
/// itself, otherwise through the other loop's task queue).
///
/// Contract:
/// - `init` binds and listens (IPv4 or IPv6; port 0 picks a free port, see `boundAddress`) but
///   accepts nothing until `start()`.
/// - Each readable report accepts until `EAGAIN` (at most 64 per turn; the registration is
///   level-triggered, or a Dispatch read source, so the rest is reported again). A client outside the allow-list (only
///   enforced when bound to a non-loopback address) is closed at once and reported to
///   `onRefusedClient`. Beyond `maxConnections` live connections the socket is handed to
///   `onOverLimit` (on its loop; the caller answers 503 and closes it) or closed when there is no
///   hook; those connections do not count as live.
/// - `onAccept` runs on the connection's loop; the connection is started right after it returns,
///   so set its handler there.
/// - `stop()` stops accepting and closes the listening socket; live connections are untouched.
///
/// Threading: `start`/`stop`/`liveConnections` may be called from any thread. Mutable accept state
/// lives on `acceptLoop`; the live-connection counter is lock-protected. Invariant for
/// `@unchecked Sendable`: `state` and the registration are touched only on `acceptLoop`.
public final class TCPListener: @unchecked Sendable, LoopWatcher {
    /// Listener settings.
    public struct Configuration: Sendable {
        /// Where to listen.
        public var address: ListenAddress
        /// `listen(2)` backlog.
        public var backlog: Int32 = 1024
        /// Live connections beyond which new clients go to `onOverLimit`.
        public var maxConnections: Int = 10_000
        /// Clients accepted on a non-loopback address; nil means
        /// `ClientAllowList.privateAndLinkLocal`. Ignored when bound to loopback.
        public var allowList: ClientAllowList?

        public init(
            address: ListenAddress, backlog: Int32 = 1024, maxConnections: Int = 10_000,
            allowList: ClientAllowList? = nil
        ) {
            self.address = address
            self.backlog = backlog
            self.maxConnections = maxConnections
            self.allowList = allowList
        }
    }

    /// Lifecycle of the listening socket.
    enum State {
        /// Bound and listening; not yet registered with the accept loop's poller.
        case bound
        /// Registered; accepting.
        case accepting(LoopToken)
        /// Accepting paused after `EMFILE`/`ENFILE` (unregistered); a timer resumes it.
        case backingOff
        /// `stop()` called; the fd is closed.
        case stopped
    }

    /// The address actually bound (with the kernel-chosen port when 0 was requested).
    public let boundAddress: SocketAddress
    /// The settings this listener was created with.
    public let configuration: Configuration
    /// The allow-list in force (nil on loopback: everyone who can reach it is local).
    public let effectiveAllowList: ClientAllowList?

    private let group: EventLoopGroup
    private let fd: Int32
    /// A back-off's unregistration has not landed yet: until it has, the fd is neither closed nor
    /// registered again, and `whenDetached` (a stop's close, or the resumption) waits for it.
    private var detaching = false
    private var whenDetached: (() -> Void)?
    /// The loop whose poller watches the listening socket and that runs `acceptAll`.
    private let acceptLoop: EventLoop
    private var state = State.bound
    /// The live-connection budget (private to this listener unless one was passed in).
    public let limit: ConnectionLimit
    private let onAccept: @Sendable (TCPConnection) -> Void
    private let onOverLimit: (@Sendable (TCPConnection) -> Void)?
    private let onRefusedClient: (@Sendable (SocketAddress) -> Void)?
    private let logger: Logger

    /// Binds and listens. Throws `IOError` when the address is in use, not local, and so on.
    /// - Parameters:
    ///   - limit: a budget shared with other listeners; nil means a private one of
    ///     `configuration.maxConnections`.
    ///   - onAccept: called on the new connection's loop; set the handler there.
    ///   - onOverLimit: called on the loop with a connection that exceeds `maxConnections`; write
    ///     a 503 and `closeAfterFlush()`. Without it such sockets are closed at once.
    ///   - onRefusedClient: called on the accept loop for a client outside the allow-list.
    public init(
        configuration: Configuration,
        group: EventLoopGroup,
        logger: Logger = Logger(label: "ats-proxy.io.listener"),
        limit: ConnectionLimit? = nil,
        onAccept: @escaping @Sendable (TCPConnection) -> Void,
        onOverLimit: (@Sendable (TCPConnection) -> Void)? = nil,
        onRefusedClient: (@Sendable (SocketAddress) -> Void)? = nil
    ) throws(IOError) {
        self.configuration = configuration
        self.limit = limit ?? ConnectionLimit(maximum: configuration.maxConnections)
        self.group = group
        self.logger = logger
        self.onAccept = onAccept
        self.onOverLimit = onOverLimit
        self.onRefusedClient = onRefusedClient
        let requested = configuration.address.address
        let fd = try Socket.makeTCP(family: requested.family)
        Socket.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        if requested.family == AF_INET6 {
            Socket.setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1)
        }
        let bindResult = requested.withSockAddr { bind(fd, $0, $1) }
        guard bindResult == 0 else {
            let error = IOError.current("bind \(requested)")
            sysClose(fd)
            throw error
        }
        guard listen(fd, configuration.backlog) == 0 else {
            let error = IOError.current("listen")
            sysClose(fd)
            throw error
        }
        guard let bound = SocketAddress.of(fd: fd, peer: false) else {
            let error = IOError.current("getsockname")
            sysClose(fd)
            throw error
        }
        self.fd = fd
        self.boundAddress = bound
        self.effectiveAllowList =
            bound.isLoopback ? nil : (configuration.allowList ?? ClientAllowList.privateAndLinkLocal)
        self.acceptLoop = group.next()
    }

    /// Live (accepted, not yet closed, within the limit) connections, counted on `limit` (so a
    /// shared limit reports every listener's connections).
    public var liveConnections: Int {
        limit.liveConnections
    }

    /// Starts accepting. Idempotent.
    public func start() {
        acceptLoop.execute { [self] in
            switch state {
            case .bound:
                registerForAccepts()
            case .accepting, .backingOff, .stopped:
                return
            }
        }
    }

    /// Stops accepting and closes the listening socket; `completion` runs (on the accept loop) once
    /// the socket is closed, so a new connect is refused from then on. Idempotent.
    public func stop(completion: (@Sendable () -> Void)? = nil) {
        acceptLoop.execute { [self] in
            switch state {
            case .accepting(let token):
                state = .stopped
                acceptLoop.core.unregisterAndClose(token, fd: fd) { completion?() }
            case .bound, .backingOff:
                state = .stopped
                if detaching {
                    // Replaces a resumption the back-off timer may have left waiting.
                    whenDetached = { [fd] in
                        sysClose(fd)
                        completion?()
                    }
                } else {
                    sysClose(fd)
                    completion?()
                }
            case .stopped:
                completion?()
            }
        }
    }

    private func registerForAccepts() {
        do {
            let token = try acceptLoop.core.register(
                fd: fd, interest: UInt32(ATS_POLL_IN), edgeTriggered: false, watcher: self)
            state = .accepting(token)
        } catch {
            backOff(error)
        }
    }

    func loopEvent(_ events: UInt32) {
        acceptAll()
    }

    private func acceptAll() {
        guard case .accepting = state else { return }
        for _ in 0..<64 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { ats_accept_nonblocking(fd, $0, &length) }
            }
            if client < 0 {
                let code = currentErrno()
                switch code {
                case EINTR, ECONNABORTED, EPROTO:
                    continue
                case EAGAIN, EWOULDBLOCK:
                    return
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    backOff(IOError(call: "accept", errno: code))
                    return
                default:
                    logger.error("accept failed", metadata: ["error": "\(IOError(call: "accept", errno: code))"])
                    return
                }
            }
            let peer = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) }
            }
            handleAccepted(client, peer: peer)
        }
    }

    private func handleAccepted(_ client: Int32, peer: SocketAddress?) {
        if let allowList = effectiveAllowList {
            guard let peer, allowList.allows(peer.ip) else {
                sysClose(client)
                logger.notice(
                    "refused client outside --allow-client", metadata: ["client": "\(peer?.description ?? "?")"])
                if let peer { onRefusedClient?(peer) }
                return
            }
        }
        let admitted = limit.tryAcquire()
        let loop = group.next()
        guard admitted else {
            guard let onOverLimit else {
                sysClose(client)
                return
            }
            let connection = TCPConnection(accepted: client, remoteAddress: peer, loop: loop, nonBlocking: true)
            run(on: loop) {
                onOverLimit(connection)
                connection.start()
            }
            return
        }
        let connection = TCPConnection(accepted: client, remoteAddress: peer, loop: loop, nonBlocking: true)
        connection.onFinalClose = { [limit] in limit.release() }
        let onAccept = onAccept
        run(on: loop) {
            onAccept(connection)
            connection.start()
        }
    }

    /// Runs `work` on `loop`: right here when it is the accepting loop, else in its task queue.
    private func run(on loop: EventLoop, _ work: @escaping @Sendable () -> Void) {
        if loop === acceptLoop { work() } else { loop.execute(work) }
    }

    /// Out of descriptors: stop watching the socket for 100 ms instead of spinning on a readable
    /// socket (the registration is level-triggered).
    private func backOff(_ error: IOError) {
        logger.warning("accept paused for 100 ms", metadata: ["error": "\(error)"])
        if case .accepting(let token) = state {
            detaching = true
            acceptLoop.core.unregister(token, fd: fd) { [self] in
                detaching = false
                let work = whenDetached
                whenDetached = nil
                work?()
            }
        }
        state = .backingOff
        _ = LoopTimer.oneShot(on: acceptLoop, after: .milliseconds(100)) { [self] in
            switch state {
            case .backingOff:
                if detaching {
                    whenDetached = { [self] in
                        if case .backingOff = state { registerForAccepts() }
                    }
                } else {
                    registerForAccepts()
                }
            case .bound, .accepting, .stopped:
                return
            }
        }
    }
}
