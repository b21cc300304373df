import ATSProxyCore
import ATSProxyIO
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A blocking HTTP/1.1 GET client for a running proxy's web view (`--web`), which `ats-proxy mcp` reads:
/// loopback addresses only (the web view has no authentication, so the MCP server never reaches another
/// machine), one request per connection (the web view closes after each answer), a bounded answer size and a
/// timeout. The response is read with the proxy's own HTTP/1 parser; proxy variables are never consulted.
struct WebAPIClient: Sendable {
    /// Where the web view listens.
    let address: SocketAddress
    /// Seconds allowed for connecting, and for each read.
    var timeout: Double = 10
    /// Bytes of body accepted at most.
    var maximumBody = 64 << 20

    /// Why a request to the web view failed.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The client for `text`: `http://HOST:PORT[/]` or `HOST:PORT`, where HOST is a loopback address or
    /// `localhost`. Anything else is refused with the reason.
    init(parsing text: String) throws(Failure) {
        var rest = Substring(text)
        if rest.hasPrefix("http://") { rest = rest.dropFirst("http://".count) }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.lowercased().hasPrefix("localhost:") {
            rest = Substring("127.0.0.1" + rest.dropFirst("localhost".count))
        }
        guard let listen = ListenAddress(parsing: String(rest)) else {
            throw Failure(description: "--web '\(text)' is not http://HOST:PORT (e.g. http://127.0.0.1:8081)")
        }
        guard listen.address.isLoopback else {
            throw Failure(
                description:
                    "--web '\(text)' is not a loopback address: the MCP server reads only a web view on this machine")
        }
        address = listen.address
    }

    /// GETs `path` (with its query) and returns the body of a 200 answer.
    func get(_ path: String) throws(Failure) -> Data {
        let (status, body) = try exchange(path)
        guard status == 200 else {
            let text = String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: "the web view answered \(status) for \(path): \(text)")
        }
        return body
    }

    /// Sends one request and reads the whole answer.
    private func exchange(_ path: String) throws(Failure) -> (Int, Data) {
        let fd = try openConnection()
        defer { close(fd) }
        let host = address.ip.family == .v6 ? "[\(address.ip)]:\(address.port)" : "\(address.ip):\(address.port)"
        let request = Array(
            "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nAccept: application/json\r\nConnection: close\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else {
                throw Failure(description: "cannot send to the web view at \(address): errno \(errno)")
            }
            sent += count
        }
        var parser = HTTP1Parser(role: .response)
        parser.requestSent(method: "GET")
        var status: Int?
        var body = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            let parts = count > 0 ? parser.feed(buffer[0..<count]) : parser.inputClosed()
            for part in parts {
                switch part {
                case .response(let head, _): status = head.status
                case .body(let bytes):
                    body.append(contentsOf: bytes)
                    guard body.count <= maximumBody else {
                        throw Failure(
                            description: "the web view's answer for \(path) is larger than \(maximumBody) bytes")
                    }
                case .messageEnd:
                    if let status { return (status, body) }
                case .failed(let error): throw Failure(description: "the web view's answer did not parse: \(error)")
                case .request, .trailers, .upgraded: continue
                }
            }
            guard count > 0 else {
                throw Failure(description: "the web view at \(address) closed the connection before answering")
            }
        }
    }

    /// A connected TCP socket with send and receive timeouts.
    private func openConnection() throws(Failure) -> Int32 {
        let family = address.ip.family == .v6 ? AF_INET6 : AF_INET
        #if os(Linux)
            let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = socket(family, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var time = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        let connected = Self.connectSocket(fd, to: address)
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw Failure(
                description:
                    "cannot reach the web view at \(address) (errno \(code)): is ats-proxy running with --web \(address)?"
            )
        }
        return fd
    }

    /// `connect(2)` to a numeric address (the web view's address is always an IP literal).
    private static func connectSocket(_ fd: Int32, to address: SocketAddress) -> Int32 {
        let text = "\(address.ip)"
        if address.ip.family == .v6 {
            var storage = sockaddr_in6()
            storage.sin6_family = sa_family_t(AF_INET6)
            storage.sin6_port = address.port.bigEndian
            guard inet_pton(AF_INET6, text, &storage.sin6_addr) == 1 else { return -1 }
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        var storage = sockaddr_in()
        storage.sin_family = sa_family_t(AF_INET)
        storage.sin_port = address.port.bigEndian
        guard inet_pton(AF_INET, text, &storage.sin_addr) == 1 else { return -1 }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}
