import ATSProxyCore

/// One outbound connection through an upstream HTTP proxy: a `TCPConnector` to the proxy, then
/// `CONNECT origin:port` and the proxy's answer (`UpstreamProxyHandshake`), all within one timeout.
///
/// Contract: `completion` runs exactly once on the loop, unless `cancel()` ran first: with the
/// connection (handlerless, started; set its handler in the completion) and the origin's first
/// bytes if the proxy sent any after its 2xx head, or with a `ConnectError` whose detail starts
/// with `UpstreamProxy.detailPrefix`. TCP failures to the proxy keep their code (refused or
/// unreachable → -1004, timeout → -1001); a refusal by the proxy is -1004 (see the handshake).
///
/// Threading: create and cancel on the loop; all state is loop-confined (the invariant behind
/// `@unchecked Sendable`). The TCP connector, the connection and the timer retain it until it finishes.
public final class UpstreamProxyConnector: TCPConnectionHandler, UpstreamConnectAttempt, @unchecked Sendable {
    /// Lifecycle of the attempt.
    enum State {
        /// Connecting to the proxy.
        case connecting(TCPConnector)
        /// CONNECT sent on `connection`; reading the answer.
        case handshaking(TCPConnection, UpstreamProxyHandshake)
        /// Completed, failed, timed out or cancelled.
        case finished
    }

    /// What a successful attempt hands over.
    public struct Tunnel {
        /// The connection to the proxy, now a tunnel to the origin.
        public let connection: TCPConnection
        /// Bytes of the origin that arrived with the proxy's answer.
        public let remaining: [UInt8]
    }

    private let loop: EventLoop
    private let proxy: UpstreamProxy
    private let host: String
    private let port: Int
    private var state = State.finished
    private var timer: LoopTimer?
    private var completion: ((Result<Tunnel, ConnectError>) -> Void)?

    private init(loop: EventLoop, proxy: UpstreamProxy, host: String, port: Int) {
        self.loop = loop
        self.proxy = proxy
        self.host = host
        self.port = port
    }

    /// Starts a tunnel to `host:port` through `proxy` (call on the loop). `resolver` resolves the
    /// proxy's own name; the origin's name goes to the proxy unresolved.
    @discardableResult
    public static func connect(
        host: String, port: Int, through proxy: UpstreamProxy, on loop: EventLoop, resolver: Resolver,
        timeout: Duration, completion: @escaping (Result<Tunnel, ConnectError>) -> Void
    ) -> UpstreamProxyConnector {
        loop.assertInLoop()
        let connector = UpstreamProxyConnector(loop: loop, proxy: proxy, host: host, port: port)
        connector.completion = completion
        connector.timer = LoopTimer.oneShot(on: loop, after: timeout) { [connector] in
            connector.finish(.failure(.timedOut))
        }
        let tcp = TCPConnector.connect(
            host: proxy.host, port: proxy.port, on: loop, resolver: resolver, timeout: timeout
        ) { [connector] result in
            connector.connected(result)
        }
        if case .finished = connector.state, connector.completion != nil {
            connector.state = .connecting(tcp)
        }
        return connector
    }

    /// Abandons the attempt; the completion will not run. Idempotent.
    public func cancel() {
        loop.assertInLoop()
        completion = nil
        finish(.failure(.timedOut))
    }

    private func connected(_ result: Result<TCPConnection, ConnectError>) {
        switch state {
        case .connecting, .finished:
            break
        case .handshaking:
            preconditionFailure("UpstreamProxyConnector: TCP connect completed in state \(state)")
        }
        guard completion != nil else {
            if case .success(let connection) = result { connection.close() }
            return
        }
        switch result {
        case .success(let connection):
            state = .handshaking(connection, UpstreamProxyHandshake(proxy: proxy, host: host, port: port))
            connection.handler = self
            connection.write(proxy.connectRequest(host: host, port: port))
        case .failure(let error):
            let detail = "\(UpstreamProxy.detailPrefix)\(proxy.host):\(proxy.port): \(error)"
            switch error {
            case .timedOut:
                finish(.failure(.timedOut))
            case .dnsFailure, .refused, .unreachable, .reset, .other:
                finish(.failure(.upstreamProxy(.cannotConnectToHost, detail: detail)))
            case .upstreamProxy:
                finish(.failure(error))
            }
        }
    }

    private func handle(_ outcome: UpstreamProxyHandshake.Outcome) {
        guard case .handshaking(let connection, _) = state else { return }
        switch outcome {
        case .needMore:
            return
        case .established(let remaining):
            connection.handler = nil
            finish(.success(Tunnel(connection: connection, remaining: remaining)))
        case .failed(let code, let detail):
            finish(.failure(.upstreamProxy(code, detail: detail)))
        }
    }

    /// Ends the attempt once: stops the timer, closes what is not handed over, runs the completion.
    private func finish(_ result: Result<Tunnel, ConnectError>) {
        let previous = state
        state = .finished
        timer?.cancel()
        timer = nil
        switch previous {
        case .connecting(let tcp):
            tcp.cancel()
        case .handshaking(let connection, _):
            if case .success = result {
            } else {
                connection.handler = nil
                connection.close()
            }
        case .finished:
            break
        }
        let completion = completion
        self.completion = nil
        guard let completion else {
            if case .success(let tunnel) = result { tunnel.connection.close() }
            return
        }
        completion(result)
    }

    // MARK: - TCPConnectionHandler

    public func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        guard case .handshaking(let current, var handshake) = state, current === connection else { return }
        let outcome = handshake.receive([UInt8](bytes))
        state = .handshaking(connection, handshake)
        handle(outcome)
    }

    public func connectionDidReadEOF(_ connection: TCPConnection) {
        guard case .handshaking(let current, var handshake) = state, current === connection else { return }
        let outcome = handshake.receiveEOF()
        state = .handshaking(connection, handshake)
        handle(outcome)
    }

    public func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
        guard case .handshaking(let current, _) = state, current === connection else { return }
        finish(
            .failure(
                .upstreamProxy(
                    .cannotConnectToHost,
                    detail:
                        "\(UpstreamProxy.detailPrefix)\(proxy.host):\(proxy.port) closed the connection before answering CONNECT (\(reason))"
                )))
    }
}

/// An upstream connection attempt in flight (direct or through an upstream proxy) that can be abandoned.
public protocol UpstreamConnectAttempt: AnyObject {
    /// Abandons the attempt; its completion will not run. Idempotent.
    func cancel()
}

extension TCPConnector: UpstreamConnectAttempt {}
