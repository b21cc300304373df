import ATSPolicy
import ATSProxyCore
import Foundation

/// Runs one `ProxySession` on one event loop: feeds it socket events with the current time and
/// executes its commands on the client connection, the upstream connection and the timer.
/// Back-pressure is handled here: when one side's write queue passes its high watermark, reading
/// from the other side pauses until it drains.
///
/// Loop-confined: every method runs on `loop` (the invariant behind `@unchecked Sendable`). The
/// connections hold this driver as their handler until they close.
final class ProxyConnectionDriver: TCPConnectionHandler, @unchecked Sendable {
    let loop: EventLoop
    let client: TCPConnection
    private var session: ProxySession
    private var upstream: TCPConnection?
    private var connector: TCPConnector?
    private var timer: LoopTimer?
    private let resolver: Resolver
    private let connectTimeout: Duration
    private let log: ProxyLogSink
    private let onFinished: @Sendable () -> Void
    private var finished = false
    /// The session asked not to read from the client (its upstream is not ready).
    private var sessionPausedClient = false

    init(
        client: TCPConnection, services: ProxyServices, connectionNumber: Int, resolver: Resolver,
        connectTimeout: Duration, log: ProxyLogSink, onFinished: @escaping @Sendable () -> Void
    ) {
        self.loop = client.loop
        self.client = client
        self.resolver = resolver
        self.connectTimeout = connectTimeout
        self.log = log
        self.onFinished = onFinished
        let address = client.remoteAddress?.description ?? "unknown"
        session = ProxySession(services: services, clientAddress: address, connectionNumber: connectionNumber)
    }

    /// Shutdown: asks the session to close when idle (runs on the loop).
    func drain() {
        loop.execute { [self] in run(.drain) }
    }

    /// Attaches to the client connection and starts reading.
    func start() {
        loop.assertInLoop()
        client.handler = self
        execute(session.start())
        client.start()
    }

    private func run(_ event: ProxyEvent) {
        loop.assertInLoop()
        guard !finished else { return }
        execute(session.handle(event, now: Date()))
    }

    private func execute(_ commands: [ProxyCommand]) {
        // Consecutive writes to the same side are coalesced into one socket write.
        var clientBuffer: [UInt8] = []
        var upstreamBuffer: [UInt8] = []
        func flush() {
            if !clientBuffer.isEmpty {
                client.write(clientBuffer)
                clientBuffer.removeAll(keepingCapacity: true)
            }
            if !upstreamBuffer.isEmpty {
                upstream?.write(upstreamBuffer)
                upstreamBuffer.removeAll(keepingCapacity: true)
            }
        }
        for command in commands {
            switch command {
            case .writeToClient(let bytes):
                if !upstreamBuffer.isEmpty { flush() }
                clientBuffer += bytes
            case .writeToUpstream(let bytes):
                if !clientBuffer.isEmpty { flush() }
                upstreamBuffer += bytes
            case .closeClient:
                // finish() waits for connectionDidClose: the write queue must reach the client
                // before the connection stops counting as live (shutdown waits for live ones).
                flush()
                closeUpstream()
                cancelTimer()
                client.closeAfterFlush()
            case .connectUpstream(let host, let port):
                flush()
                connectUpstream(host: host, port: port)
            case .closeUpstream:
                flush()
                closeUpstream()
            case .armTimer(let seconds):
                cancelTimer()
                timer = LoopTimer.oneShot(on: loop, after: .milliseconds(Int(seconds * 1000))) { [self] in
                    run(.timerFired)
                }
            case .cancelTimer:
                cancelTimer()
            case .pauseClientReads:
                sessionPausedClient = true
                client.pauseReading()
            case .resumeClientReads:
                sessionPausedClient = false
                if upstream?.isWritable ?? true { client.resumeReading() }
            case .log(let record):
                log.log(record)
            }
        }
        flush()
    }

    private func connectUpstream(host: String, port: Int) {
        closeUpstream()
        connector = TCPConnector.connect(
            host: host, port: UInt16(clamping: port), on: loop, resolver: resolver, timeout: connectTimeout
        ) { [self] result in
            connector = nil
            switch result {
            case .success(let connection):
                guard !finished else {
                    connection.close()
                    return
                }
                upstream = connection
                connection.handler = self
                connection.start()
                if !client.isWritable { connection.pauseReading() }
                run(.upstreamConnected)
            case .failure(let error):
                run(.upstreamConnectFailed(error.urlErrorCode, detail: error.description))
            }
        }
    }

    private func closeUpstream() {
        connector?.cancel()
        connector = nil
        if let upstream {
            self.upstream = nil
            upstream.close()
            if client.isReadingPaused && !finished && !sessionPausedClient { client.resumeReading() }
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        onFinished()
    }

    // MARK: - TCPConnectionHandler

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        let copy = [UInt8](bytes)
        if connection === client {
            run(.clientBytes(copy))
        } else if connection === upstream {
            run(.upstreamBytes(copy))
        }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {
        if connection === client {
            run(.clientEOF)
        } else if connection === upstream {
            run(.upstreamEOF)
        }
    }

    func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool) {
        let other = connection === client ? upstream : (connection === upstream ? client : nil)
        guard let other, other.isOpen else { return }
        if !isWritable {
            other.pauseReading()
        } else if other !== client || !sessionPausedClient {
            other.resumeReading()
        }
    }

    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {
        if connection === client {
            run(.clientGone)
            connection.handler = nil
            closeUpstream()
            cancelTimer()
            finish()
        } else if connection === upstream {
            upstream = nil
            connection.handler = nil
            switch reason {
            case .reset, .error: run(.upstreamReset)
            case .local, .finished: run(.upstreamEOF)
            }
        } else {
            connection.handler = nil
        }
    }
}
