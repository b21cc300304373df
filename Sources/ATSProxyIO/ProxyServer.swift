import ATSPolicy
import ATSProxyCore
import Dispatch
import Foundation
import Logging
import Synchronization

/// The running proxy: listeners on every `--listen` address, one `ProxyConnectionDriver` per
/// accepted client, spread over the event-loop group.
///
/// Thread-safe: counters are atomic behind a mutex; listeners and drivers live on their loops.
public final class ProxyServer: Sendable {
    /// Listener and timeout settings.
    public struct Configuration: Sendable {
        public var listen: [ListenAddress]
        public var maxConnections: Int = 10_000
        public var allowList: ClientAllowList?
        public var connectTimeout: Duration = .seconds(15)
        /// How long an idle upstream connection (HTTP/1.1 parked, or an HTTP/2 link without streams) is
        /// kept for reuse; zero closes them as soon as no client uses them.
        public var upstreamIdleTimeout: Duration = .seconds(30)
        /// Every upstream connection goes through this HTTP proxy (`CONNECT` tunnels) when set.
        public var upstreamProxy: UpstreamProxy?
        /// When memory is handed back after a burst of closed connections (`MemoryTrimmer`).
        var memoryTrim = MemoryTrimmer.Policy()

        public init(listen: [ListenAddress]) { self.listen = listen }
    }

    public let services: ProxyServices
    public let configuration: Configuration
    let group: EventLoopGroup
    let resolver: Resolver
    /// What clients on other machines resolve with: `resolver` without the proxy host's own addresses, unless
    /// `--allow-local-targets`.
    let remoteResolver: Resolver
    let log: ProxyLogSink
    private let state = Mutex<(listeners: [TCPListener], live: Int, total: Int)>(([], 0, 0))
    /// Open sessions by connection number, so shutdown can drain them.
    private let drivers = Mutex<[Int: ProxyConnectionDriver]>([:])
    /// One upstream pool per loop, by loop index (each used only on its loop).
    private let pools: [UpstreamPool]
    /// Gives memory back to the system after bursts of closed connections.
    let trimmer: MemoryTrimmer

    public init(
        services: ProxyServices, configuration: Configuration, group: EventLoopGroup, resolver: Resolver,
        log: ProxyLogSink
    ) {
        self.services = services
        self.configuration = configuration
        self.group = group
        self.resolver = resolver
        let localTargets = services.settings.localTargets
        remoteResolver =
            localTargets.allowsRemoteClients
            ? resolver
            : resolver.refusing(
                because:
                    "it resolves to the machine the proxy runs on; clients on other machines may not reach its own services (--allow-local-targets)"
            ) { localTargets.isThisMachine($0) }
        self.log = log
        pools = group.loops.map { UpstreamPool(loop: $0, idleTime: configuration.upstreamIdleTimeout) }
        trimmer = MemoryTrimmer(policy: configuration.memoryTrim)
    }

    /// Binds every address and starts accepting. Returns the bound addresses (real ports).
    @discardableResult
    public func start() throws(IOError) -> [SocketAddress] {
        var listeners: [TCPListener] = []
        for address in configuration.listen {
            let listenerConfiguration = TCPListener.Configuration(
                address: address, maxConnections: configuration.maxConnections, allowList: configuration.allowList)
            let listener = try TCPListener(
                configuration: listenerConfiguration, group: group,
                onAccept: { [self] connection in accept(connection) },
                onOverLimit: { connection in
                    connection.write(Self.overLimitResponse)
                    connection.closeAfterFlush()
                },
                onRefusedClient: { [log] address in
                    log.note("refused client \(address): not in --allow-client")
                })
            listeners.append(listener)
        }
        for listener in listeners { listener.start() }
        state.withLock { $0.listeners = listeners }
        return listeners.map(\.boundAddress)
    }

    /// The 503 for clients beyond --max-connections.
    static let overLimitResponse: [UInt8] = {
        let body = Array("ats-proxy: too many connections.\r\n".utf8)
        let head = HTTPResponseHead(
            status: 503, reason: "Service Unavailable",
            headers: [
                "Content-Type": "text/plain", "Content-Length": String(body.count), "Connection": "close",
            ])
        var bytes: [UInt8] = []
        HTTP1Serializer.writeResponseHead(head, into: &bytes)
        return bytes + body
    }()

    private func accept(_ connection: TCPConnection) {
        let number = state.withLock { state -> Int in
            state.live += 1
            state.total += 1
            return state.total
        }
        let onThisMachine = connection.remoteAddress?.ip.isLoopback ?? false
        let driver = ProxyConnectionDriver(
            client: connection, services: services, connectionNumber: number,
            resolver: onThisMachine ? resolver : remoteResolver,
            upstreamProxy: configuration.upstreamProxy, proxyResolver: resolver,
            connectTimeout: configuration.connectTimeout, log: log, pool: pools[connection.loop.index],
            onFinished: { [self, loop = connection.loop] in
                state.withLock { $0.live -= 1 }
                _ = drivers.withLock { $0.removeValue(forKey: number) }
                trimmer.connectionClosed(on: loop)
            })
        drivers.withLock { $0[number] = driver }
        driver.start()
    }

    /// Client connections currently open.
    public var liveConnections: Int { state.withLock { $0.live } }

    /// Stops accepting new clients; open connections continue.
    public func stopAccepting() {
        let listeners = state.withLock { $0.listeners }
        for listener in listeners { listener.stop() }
    }

    /// Shutdown: stop accepting, close idle connections now and busy ones when their exchange ends.
    public func drain() {
        stopAccepting()
        let open = drivers.withLock { Array($0.values) }
        for driver in open { driver.drain() }
        for pool in pools { pool.loop.execute { pool.shutdown() } }
    }

    /// The end of a shutdown, after `drain` and its grace period: every connection still open ends now, and the
    /// exchanges it had in flight are recorded as cut by the shutdown (a second drain tells each session so);
    /// every pool closes what it parked. Returns once every loop has run that and the closes it caused (at most
    /// `timeout`), so the records reach the log and report, and nothing is left half-closed, when the process
    /// exits. Call off the loops.
    public func closeRemaining(timeout: Duration = .seconds(2)) {
        let open = drivers.withLock { Array($0.values) }
        for driver in open { driver.drain() }
        for pool in pools { pool.loop.execute { pool.shutdown() } }
        let deadline = DispatchTime.now() + .milliseconds(Int(timeout.components.seconds * 1000))
        // Loops run their tasks in order: a task queued now runs after the drains and shutdowns above, and
        // one queued after it also after the close callbacks those queued in turn.
        for _ in 0..<2 {
            let done = DispatchGroup()
            for loop in group.loops {
                done.enter()
                loop.execute { done.leave() }
            }
            guard done.wait(timeout: deadline) == .success else { return }
        }
    }
}
