import ATSTLS
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback fixture server on 127.0.0.1, port 0, serving one connection at a time on its own
/// thread. It stops when `stop()` is called or after `idleLimit` seconds without a connection,
/// so a failed test never leaves it running.
public final class TestServer: Sendable {
    /// What the server does with each accepted connection.
    public enum Behaviour: Sendable {
        /// Complete a TLS handshake with this context, then wait for the client to close.
        case tls(TLSContext)
        /// Accept and never answer.
        case silent
        /// Accept and close at once.
        case closeImmediately
        /// Read the ClientHello, then answer with these bytes and close.
        case reply([UInt8])
        /// Hand each connection to this function (on the server's thread, one at a time); the stream closes
        /// when it returns.
        case custom(@Sendable (TestSocketStream) -> Void)
    }

    public let port: UInt16
    private let listener: Int32
    private let behaviour: Behaviour
    private let stopped = Atomic<Bool>(false)
    public let handshakes = Atomic<Int>(0)
    private let idleLimit: TimeInterval
    /// How long one read or write on a connection may wait.
    private let streamTimeout: TimeInterval

    public init(_ behaviour: Behaviour, idleLimit: TimeInterval = 20, streamTimeout: TimeInterval = 2) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard fd >= 0, bound == 0, listen(fd, 16) == 0 else { throw TransportFailure.other("bind failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        listener = fd
        self.behaviour = behaviour
        self.idleLimit = idleLimit
        self.streamTimeout = streamTimeout
        let thread = Thread { [self] in self.run() }
        thread.start()
    }

    public func stop() { stopped.store(true, ordering: .relaxed) }

    public var transport: LoopbackTransport { LoopbackTransport(port: port) }

    private func run() {
        var idleSince = Date()
        while !stopped.load(ordering: .relaxed) && Date().timeIntervalSince(idleSince) < idleLimit {
            var descriptor = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            idleSince = Date()
            let stream = TestSocketStream(fd: client, timeout: streamTimeout)
            serve(stream)
        }
        close(listener)
    }

    private func serve(_ stream: TestSocketStream) {
        switch behaviour {
        case .tls(let context):
            guard let connection = try? TLSConnection(context: context, serverName: nil, fallbackServerName: "ats.test")
            else { return }
            if HandshakePump.run(connection, over: stream) == nil {
                handshakes.add(1, ordering: .relaxed)
                let pending = connection.takeOutbound()
                if !pending.isEmpty { try? stream.send(pending) }
                stream.drainUntilClosed(seconds: 3)
            }
        case .silent:
            stream.drainUntilClosed(seconds: 5)
        case .closeImmediately:
            return
        case .reply(let bytes):
            _ = try? stream.receive()
            try? stream.send(bytes)
        case .custom(let serve):
            serve(stream)
        }
    }
}
