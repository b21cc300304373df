import ATSPolicy

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An IPv4 or IPv6 socket address (IP plus port), stored as a value so it can cross queues.
///
/// Converts to and from `sockaddr_in`/`sockaddr_in6` for system calls and to `ATSPolicy.IPAddress`
/// for allow-list checks. Immutable and `Sendable`.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The IP address.
    public let ip: IPAddress
    /// The port in host byte order.
    public let port: UInt16

    public init(ip: IPAddress, port: UInt16) {
        self.ip = ip
        self.port = port
    }

    /// Parses a literal IP (no brackets) and a port; nil when `host` is not an IP literal.
    public init?(ipLiteral host: String, port: UInt16) {
        guard let ip = IPAddress(parsing: host) else { return nil }
        self.init(ip: ip, port: port)
    }

    /// The address family constant (`AF_INET` or `AF_INET6`).
    public var family: Int32 { ip.family == .v4 ? AF_INET : AF_INET6 }

    /// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback.
    public var isLoopback: Bool {
        let v4 = ip.mappedIPv4 ?? ip
        if v4.family == .v4 { return v4.bytes[0] == 127 }
        return ip.bytes == [UInt8](repeating: 0, count: 15) + [1]
    }

    /// True for the wildcard addresses 0.0.0.0 and ::.
    public var isWildcard: Bool { ip.bytes.allSatisfy { $0 == 0 } }

    /// `127.0.0.1:8080` or `[::1]:8080`.
    public var description: String {
        ip.family == .v4 ? "\(ip):\(port)" : "[\(ip)]:\(port)"
    }

    /// Calls `body` with this address as a `sockaddr` pointer and its length.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) rethrows -> R {
        switch ip.family {
        case .v4:
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { raw in
                for (index, byte) in ip.bytes.enumerated() { raw[index] = byte }
            }
            return try withUnsafePointer(to: &sin) { pointer in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    try body($0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .v6:
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { raw in
                for (index, byte) in ip.bytes.enumerated() { raw[index] = byte }
            }
            return try withUnsafePointer(to: &sin6) { pointer in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    try body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
    }

    /// Decodes a `sockaddr` of family AF_INET or AF_INET6; nil for anything else.
    init?(_ pointer: UnsafePointer<sockaddr>) {
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET:
            let sin = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in.self)
            let bytes = withUnsafeBytes(of: sin.sin_addr) { Array($0) }
            self.init(ip: IPAddress(bytes: bytes), port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in6.self)
            let bytes = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
            self.init(ip: IPAddress(bytes: bytes), port: UInt16(bigEndian: sin6.sin6_port))
        default:
            return nil
        }
    }

    /// Reads a socket's local (`getsockname`) or remote (`getpeername`) address.
    static func of(fd: Int32, peer: Bool) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa -> SocketAddress? in
                let rc = peer ? getpeername(fd, sa, &length) : getsockname(fd, sa, &length)
                guard rc == 0 else { return nil }
                return SocketAddress(UnsafePointer(sa))
            }
        }
    }
}

/// A `HOST:PORT` listen address as given on the command line: `127.0.0.1:8080`, `[::1]:8080`,
/// `0.0.0.0:8080`, `localhost:8080` (resolved to 127.0.0.1). Port 0 asks the kernel for a port.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address to bind.
    public let address: SocketAddress

    public init(_ address: SocketAddress) {
        self.address = address
    }

    /// Parses `HOST:PORT`; IPv6 literals must be in brackets. Returns nil on any syntax error.
    public init?(parsing text: String) {
        guard let (host, port) = Self.splitHostPort(text) else { return nil }
        if host == "localhost" {
            self.init(SocketAddress(ip: IPAddress(bytes: [127, 0, 0, 1]), port: port))
            return
        }
        guard let address = SocketAddress(ipLiteral: host, port: port) else { return nil }
        self.init(address)
    }

    public var description: String { address.description }

    /// Splits `host:port` or `[v6]:port`; the host comes back without brackets.
    static func splitHostPort(_ text: String) -> (String, UInt16)? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            guard !host.contains(":") else { return nil }
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
            let port = UInt16(portText)
        else { return nil }
        return (String(host), port)
    }
}
