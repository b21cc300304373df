import ATSTLS
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking TCP stream for tests: every receive waits at most `timeout` seconds.
/// Owns its file descriptor; `deinit` closes it.
public final class TestSocketStream: HandshakeStream {
    public let fd: Int32
    public let timeout: TimeInterval

    public init(fd: Int32, timeout: TimeInterval) {
        self.fd = fd
        self.timeout = timeout
    }

    deinit { close(fd) }

    public func send(_ bytes: [UInt8]) throws(TransportFailure) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw errno == ECONNRESET || errno == EPIPE ? .reset : .other(String(cString: strerror(errno)))
            }
            offset += sent
        }
    }

    public func receive() throws(TransportFailure) -> [UInt8] {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(timeout * 1000))
        if ready == 0 { throw .timedOut }
        var buffer = [UInt8](repeating: 0, count: 16384)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count < 0 { throw errno == ECONNRESET ? .reset : .other(String(cString: strerror(errno))) }
        return Array(buffer.prefix(count))
    }

    /// Waits until the peer closes (or `seconds` pass), discarding what it sends.
    public func drainUntilClosed(seconds: TimeInterval) {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 100) >= 0 else { return }
            if descriptor.revents == 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return }
        }
    }
}

/// Connects to 127.0.0.1:port for every attempt (the host name in the URL only feeds SNI and
/// certificate checks, like curl's --resolve).
public struct LoopbackTransport: HandshakeTransport {
    public let port: UInt16
    public var timeout: TimeInterval = 3

    public init(port: UInt16, timeout: TimeInterval = 3) {
        self.port = port
        self.timeout = timeout
    }

    public func connect() throws(TransportFailure) -> any HandshakeStream {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .other("socket failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 {
            let code = errno
            close(fd)
            throw code == ECONNREFUSED ? .refused : .other(String(cString: strerror(code)))
        }
        return TestSocketStream(fd: fd, timeout: timeout)
    }
}

/// A transport whose name never resolves.
public struct UnresolvableTransport: HandshakeTransport {
    public init() {}

    public func connect() throws(TransportFailure) -> any HandshakeStream { throw .nameNotResolved("test") }
}

/// A loopback port nobody listens on (bound, then closed).
public func unusedPort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            _ = bind(fd, pointer, length)
            return getsockname(fd, pointer, &length)
        }
    }
    return UInt16(bigEndian: address.sin_port)
}
