import ATSPolicy
import ATSTLS
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking, deadline-bounded TCP transport for one-shot upstream checks (`ats-proxy diagnose`):
/// resolves the host (honouring `--resolve` overrides), connects with a timeout, and hands the
/// handshake pump a stream whose every receive waits at most until the deadline. Each `connect`
/// opens a fresh socket. Not used by the proxy's Dispatch data path.
public struct UpstreamProbeTransport: HandshakeTransport {
    public let host: String
    public let port: UInt16
    public let overrides: ResolverOverrides
    /// Per-attempt limit (connect plus handshake), in seconds.
    public let timeout: TimeInterval

    public init(
        host: String, port: UInt16, overrides: ResolverOverrides = ResolverOverrides(), timeout: TimeInterval = 10
    ) {
        self.host = host
        self.port = port
        self.overrides = overrides
        self.timeout = timeout
    }

    public func connect() throws(TransportFailure) -> any HandshakeStream {
        let deadline = Date().addingTimeInterval(timeout)
        let addresses = try resolve()
        var lastError = TransportFailure.refused
        for address in addresses {
            do {
                return try ProbeSocketStream(connectingTo: address, port: port, deadline: deadline)
            } catch {
                lastError = error
                if error == .timedOut { break }
            }
        }
        throw lastError
    }

    func resolve() throws(TransportFailure) -> [IPAddress] {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if let pinned = overrides.lookup(host: bare, port: port), !pinned.isEmpty { return pinned }
        if let literal = IPAddress(parsing: bare) { return [literal] }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(bare, nil, &hints, &list)
        guard status == 0, let list else {
            throw .nameNotResolved(String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var result: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            if let address = entry.pointee.ai_addr {
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        let raw = $0.pointee.sin_addr.s_addr
                        result.append(IPAddress(bytes: withUnsafeBytes(of: raw) { Array($0) }))
                    }
                case AF_INET6:
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        let raw = $0.pointee.sin6_addr
                        result.append(IPAddress(bytes: withUnsafeBytes(of: raw) { Array($0) }))
                    }
                default:
                    break
                }
            }
            cursor = entry.pointee.ai_next
        }
        var unique: [IPAddress] = []
        for address in result where !unique.contains(address) { unique.append(address) }
        guard !unique.isEmpty else { throw .nameNotResolved("no address") }
        return unique
    }
}

/// One connected socket with a deadline. Owns the file descriptor; `deinit` closes it.
final class ProbeSocketStream: HandshakeStream {
    private let fd: Int32
    private let deadline: Date

    init(connectingTo address: IPAddress, port: UInt16, deadline: Date) throws(TransportFailure) {
        self.deadline = deadline
        let family = address.family == .v4 ? AF_INET : AF_INET6
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .other(String(cString: strerror(errno))) }
        self.fd = fd
        var noSigPipe: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noSigPipe, socklen_t(MemoryLayout<Int32>.size))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var result: Int32
        if address.family == .v4 {
            var storage = sockaddr_in()
            storage.sin_family = sa_family_t(AF_INET)
            storage.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &storage.sin_addr) { $0.copyBytes(from: address.bytes) }
            result = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        } else {
            var storage = sockaddr_in6()
            storage.sin6_family = sa_family_t(AF_INET6)
            storage.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &storage.sin6_addr) { $0.copyBytes(from: address.bytes) }
            result = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        if result != 0 {
            guard errno == EINPROGRESS else { throw Self.failure(errno) }
            try wait(for: Int16(POLLOUT))
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 { throw Self.failure(error) }
        }
    }

    deinit { close(fd) }

    static func failure(_ code: Int32) -> TransportFailure {
        switch code {
        case ECONNREFUSED: .refused
        case ECONNRESET, EPIPE: .reset
        case ETIMEDOUT: .timedOut
        default: .other(String(cString: strerror(code)))
        }
    }

    private func wait(for events: Int16) throws(TransportFailure) {
        while true {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw .timedOut }
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(remaining, 3600) * 1000) + 1)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw Self.failure(errno) }
        }
    }

    func send(_ bytes: [UInt8]) throws(TransportFailure) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent >= 0 {
                offset += sent
                continue
            }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                try wait(for: Int16(POLLOUT))
            } else if errno != EINTR {
                throw Self.failure(errno)
            }
        }
    }

    func receive() throws(TransportFailure) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count >= 0 { return Array(buffer.prefix(count)) }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                try wait(for: Int16(POLLIN))
            } else if errno != EINTR {
                throw Self.failure(errno)
            }
        }
    }
}
