import ATSPolicy
import ATSProxyCore
import ATSTLS
import Dispatch
import Foundation
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

/// `ProxyConnectionDriver` on its own, with real loopback sockets: a listener on 127.0.0.1 hands each client to a
/// driver (as `ProxyServer` does), an origin is a plain blocking socket on 127.0.0.1, and the test checks the bytes
/// that reach either end, the driver's client connection state on its loop, and the records it logs.
@Suite struct ProxyConnectionDriverTests {
    /// A body of `count` bytes that repeats only every 251 bytes (a prime): a byte out of place shows.
    static func pattern(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            for index in 0..<count { buffer[index] = UInt8(truncatingIfNeeded: index % 251) }
            initialized = count
        }
    }

    /// Whether `bytes` equal `expected` (memcmp: a byte-wise loop over tens of megabytes is slow in a debug build).
    static func same(_ bytes: ArraySlice<UInt8>, _ expected: [UInt8]) -> Bool {
        guard bytes.count == expected.count else { return false }
        return bytes.withUnsafeBytes { lhs in
            expected.withUnsafeBytes { rhs in
                guard let left = lhs.baseAddress, let right = rhs.baseAddress else { return true }
                return memcmp(left, right, rhs.count) == 0
            }
        }
    }

    /// Large enough that the kernel's buffers on the way cannot take it all (the sender stalls after about 10 MB here,
    /// the proxy's own socket buffers autotuned): only the driver's back-pressure stops the sender before the end.
    static let bodySize = 32 * 1024 * 1024

    @Test func aLocalAnswerReachesTheClientWholeThenTheClientIsClosedAndTheDriverFinishes() throws {
        let proxy = try DriverHarness()
        let client = try LoopbackPeer.connect(port: proxy.port)
        try client.send(
            Array("GET http://example.com/feed HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n".utf8))
        let (answer, sawEOF) = client.readUntilEOF(seconds: 10)
        #expect(sawEOF, "the driver closes the client after the answer")
        let text = String(decoding: answer, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 403 Forbidden\r\n"), "\(text)")
        // Whole: the body is as long as the head says.
        let parts = text.components(separatedBy: "\r\n\r\n")
        let length = parts.first?.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
        let declared = length?.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        #expect(declared != nil && declared == parts.dropFirst().joined(separator: "\r\n\r\n").utf8.count)
        #expect(proxy.finished.wait(seconds: 10) == true, "the driver reports the end of its connection")
        #expect(proxy.records.map(\.result) == [.blockedCleartext])
    }

    /// The client reads nothing at first: the driver's queue for it passes the high watermark, the origin stops being
    /// read, and the origin's sends stall long before the body is out. Once the client reads, the body arrives whole
    /// and in order, and the client is closed only after the last byte (`Connection: close`).
    @Test func anOriginIsNotReadWhileTheClientIsBackloggedAndItsBodyArrivesInOrder() throws {
        let origin = try LoopbackPeer.listen()
        let proxy = try DriverHarness(originPort: origin.port)
        let client = try LoopbackPeer.connect(port: proxy.port, receiveBuffer: 1024 * 1024)
        try client.send(
            Array(
                "GET http://localhost:\(origin.port)/big HTTP/1.1\r\nHost: localhost:\(origin.port)\r\nConnection: close\r\n\r\n"
                    .utf8))

        let body = Self.pattern(Self.bodySize)
        let head = Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
        let served = try origin.accept(sendBuffer: 1024 * 1024)
        let request = served.readHead(seconds: 10)
        #expect(String(decoding: request, as: UTF8.self).hasPrefix("GET /big HTTP/1.1\r\n"))
        let sender = BackgroundSender(served, head + body)

        #expect(sender.stalls(), "the origin's sends stop while the client reads nothing")
        #expect(sender.sent < head.count + body.count, "sent \(sender.sent) of \(head.count + body.count)")
        let writable = proxy.onDriverLoop { $0.client.isWritable }
        #expect(writable == false, "the client's queue is over its high watermark")

        let (received, sawEOF) = client.readUntilEOF(seconds: 30)
        #expect(sender.wait(seconds: 30) == head.count + body.count, "the origin sent everything once the client read")
        #expect(sawEOF, "the client is closed after everything queued for it")
        let separator = Array("\r\n\r\n".utf8)
        let end = try #require(Self.firstIndex(of: separator, in: received))
        #expect(String(decoding: received[..<end], as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\r\n"))
        let relayed = received[(end + separator.count)...]
        #expect(relayed.count == body.count)
        // Compared outside #expect: a failure would otherwise print both arrays, megabytes long.
        let intact = Self.same(relayed, body)
        #expect(intact, "the body arrives byte for byte, in order")
        #expect(proxy.finished.wait(seconds: 10) == true)
        #expect(proxy.records.map(\.status) == [200])
    }

    /// The origin reads nothing at first: the driver's queue for it passes the high watermark and the client stops
    /// being read, so the client's upload stalls. Once the origin reads, the client is read again and the body arrives
    /// whole and in order.
    @Test func theClientIsNotReadWhileTheOriginIsBackloggedAndItsUploadArrivesInOrder() throws {
        let origin = try LoopbackPeer.listen()
        let proxy = try DriverHarness(originPort: origin.port)
        let client = try LoopbackPeer.connect(port: proxy.port, sendBuffer: 1024 * 1024)
        let body = Self.pattern(Self.bodySize)
        let head = Array(
            "POST http://localhost:\(origin.port)/up HTTP/1.1\r\nHost: localhost:\(origin.port)\r\nContent-Length: \(body.count)\r\n\r\n"
                .utf8)
        let sender = BackgroundSender(client, head + body)
        let served = try origin.accept(receiveBuffer: 1024 * 1024)

        #expect(sender.stalls(), "the client's sends stop while the origin reads nothing")
        #expect(sender.sent < head.count + body.count, "sent \(sender.sent) of \(head.count + body.count)")
        let paused = proxy.onDriverLoop { $0.client.isReadingPaused }
        #expect(paused == true, "the driver stopped reading the client")

        // The proxy rewrites the head (origin-form target): the body after it is what must arrive unchanged.
        let forwardedHead = served.readHead(seconds: 10)
        if forwardedHead.isEmpty {
            let (answer, _) = client.readUntilEOF(seconds: 1)
            Issue.record(
                "nothing reached the origin; the client got: \(String(decoding: answer.prefix(300), as: UTF8.self))")
        }
        #expect(String(decoding: forwardedHead, as: UTF8.self).hasPrefix("POST /up HTTP/1.1\r\n"))
        let forwarded = served.read(count: body.count, seconds: 10)
        #expect(sender.wait(seconds: 30) == head.count + body.count, "the client sent everything once the origin read")
        #expect(forwarded.count == body.count)
        // Compared outside #expect: a failure would otherwise print both arrays, megabytes long.
        let intact = Self.same(forwarded[...], body)
        #expect(intact, "the upload arrives byte for byte, in order")
    }

    /// The offset of the first occurrence of `needle` in `bytes`.
    static func firstIndex(of needle: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        return (0...(bytes.count - needle.count)).first { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}

/// A loopback listener whose every accepted connection is run by a `ProxyConnectionDriver` on one loop, as
/// `ProxyServer` does, with services for a default iOS policy. `localhost` resolves to 127.0.0.1 only (no system
/// resolver); the records the drivers log are kept. The listener stops when the harness goes.
final class DriverHarness: @unchecked Sendable {
    let group: EventLoopGroup
    private let listener: TCPListener
    private let lock = NSLock()
    private var drivers: [ProxyConnectionDriver] = []
    private var logged: [RequestRecord] = []
    /// Fulfilled when the first driver reports that its connection ended.
    let finished: Expectation<Bool>

    /// The port the proxy listens on (127.0.0.1).
    var port: UInt16 { listener.boundAddress.port }

    /// The records logged so far, in order.
    var records: [RequestRecord] { lock.withLock { logged } }

    /// - Parameter originPort: the port `localhost` names resolve to 127.0.0.1 for (0: none).
    init(originPort: UInt16 = 0) throws {
        let group = EventLoopGroup(loopCount: 1)
        let finished = Expectation<Bool>()
        self.group = group
        self.finished = finished
        let authority = try CertificateAuthority.generate()
        let configuration = ATSConfigurationParser().parse(.dictionary([:]))
        guard let platform = Platform(parsing: "ios:18.0"), let any = ListenAddress(parsing: "127.0.0.1:0") else {
            throw IOError(call: "parse", errno: EINVAL)
        }
        let evaluator = ATSEvaluator(configuration: configuration, options: EvaluationOptions(platform: platform))
        let services = ProxyServices(
            policy: PolicyStore(.init(evaluator: evaluator, sourceSummary: "test", processName: "Tester")),
            settings: ProxySettings(),
            serverTLS: try ServerTLSContext(
                leaves: try LeafCertificateCache(authority: authority),
                alpn: ServerTLSContext.preferring(["http/1.1"])),
            upstreamTLS: UpstreamTLSClient(
                trust: try TrustStore(systemRoots: false, extraAnchors: []), alpn: ["http/1.1"]),
            processID: 100)
        var overrides = ResolverOverrides()
        if originPort != 0 { try overrides.addResolve("localhost:\(originPort):127.0.0.1") }
        let resolver = Resolver(overrides: overrides, useSystemResolver: false)
        let box = Box()
        let log = try ProxyLogSink(
            format: .text, level: .off, allowSecrets: false, path: "/dev/null",
            observer: { record in box.harness?.keep(record) })
        let pool = UpstreamPool(loop: group.loops[0], idleTime: .seconds(60))
        listener = try TCPListener(
            configuration: .init(address: any), group: group,
            onAccept: { connection in
                let driver = ProxyConnectionDriver(
                    client: connection, services: services, connectionNumber: 1, resolver: resolver,
                    connectTimeout: .seconds(5), log: log, pool: pool, onFinished: { finished.fulfill(true) })
                box.harness?.keep(driver)
                driver.start()
            })
        box.harness = self
        listener.start()
    }

    deinit { stopAndWait(listener) }

    /// Runs `body` with the first driver on its loop and waits for the answer (nil: no driver within 10 s).
    func onDriverLoop<T: Sendable>(_ body: @escaping @Sendable (ProxyConnectionDriver) -> T) -> T? {
        guard eventually(seconds: 10, { lock.withLock { !drivers.isEmpty } }) else { return nil }
        let driver = lock.withLock { drivers[0] }
        return group.loops[0].submitAndWait { body(driver) }
    }

    private func keep(_ driver: ProxyConnectionDriver) { lock.withLock { drivers.append(driver) } }
    private func keep(_ record: RequestRecord) { lock.withLock { logged.append(record) } }

    /// Lets the listener's and the log's closures reach the harness without keeping it alive.
    private final class Box: @unchecked Sendable {
        weak var harness: DriverHarness?
    }
}

/// A blocking socket on 127.0.0.1 for one end of a test connection (a client of the proxy, or an origin), with
/// every wait bounded. Owns its descriptor.
final class LoopbackPeer: @unchecked Sendable {
    let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    /// A listening socket on an ephemeral port of 127.0.0.1.
    static func listen() throws -> LoopbackPeer {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IOError.current("socket") }
        let peer = LoopbackPeer(fd: fd)
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, 4) == 0 else { throw IOError.current("bind") }
        return peer
    }

    /// A client connected to 127.0.0.1:`port`; the buffer sizes (bytes) are set before connecting when given.
    static func connect(port: UInt16, receiveBuffer: Int32? = nil, sendBuffer: Int32? = nil) throws -> LoopbackPeer {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IOError.current("socket") }
        let peer = LoopbackPeer(fd: fd)
        peer.setBuffers(receive: receiveBuffer, send: sendBuffer)
        var address = Self.loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw IOError.current("connect") }
        return peer
    }

    /// The port a listening socket is bound to.
    var port: UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    /// The next connection of a listening socket, waiting at most 10 s; its buffer sizes are set when given (the
    /// kernel then stops tuning them).
    func accept(receiveBuffer: Int32? = nil, sendBuffer: Int32? = nil) throws -> LoopbackPeer {
        guard wait(for: Int16(POLLIN), seconds: 10) else { throw IOError(call: "accept", errno: ETIMEDOUT) }
        let accepted = Glibc.accept(fd, nil, nil)
        guard accepted >= 0 else { throw IOError.current("accept") }
        let peer = LoopbackPeer(fd: accepted)
        peer.setBuffers(receive: receiveBuffer, send: sendBuffer)
        return peer
    }

    /// Sends every byte, each wait for room bounded by `seconds`; returns how many went out (fewer on a timeout
    /// or an error). `progress` is told the running total after every send.
    @discardableResult
    func send(_ bytes: [UInt8], seconds: Double = 10, progress: (Int) -> Void = { _ in }) throws -> Int {
        var offset = 0
        while offset < bytes.count {
            guard wait(for: Int16(POLLOUT), seconds: seconds) else { return offset }
            let count = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, min($0.count, 64 * 1024), Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                return offset
            }
            offset += count
            progress(offset)
        }
        return offset
    }

    /// Reads until the peer closes (true) or nothing arrives for `seconds` (false).
    func readUntilEOF(seconds: Double) -> ([UInt8], Bool) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while wait(for: Int16(POLLIN), seconds: seconds) {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (bytes, true) }
            if count < 0 { return (bytes, false) }
            bytes += buffer[..<count]
        }
        return (bytes, false)
    }

    /// Reads `count` bytes, or what arrives before the peer closes or nothing comes for `seconds`.
    func read(count: Int, seconds: Double) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while bytes.count < count, wait(for: Int16(POLLIN), seconds: seconds) {
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, min($0.count, count - bytes.count), 0) }
            if got <= 0 { break }
            bytes += buffer[..<got]
        }
        return bytes
    }

    /// Reads up to the end of a message head (`\r\n\r\n`), one byte at a time so nothing after it is taken.
    func readHead(seconds: Double) -> [UInt8] {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while !bytes.suffix(4).elementsEqual([13, 10, 13, 10]), wait(for: Int16(POLLIN), seconds: seconds),
            recv(fd, &byte, 1, 0) == 1
        {
            bytes.append(byte)
        }
        return bytes
    }

    /// Whether the socket becomes ready for `events` within `seconds`.
    private func wait(for events: Int16, seconds: Double) -> Bool {
        var descriptor = pollfd(fd: fd, events: events, revents: 0)
        return poll(&descriptor, 1, Int32(seconds * 1000)) > 0
    }

    private func setBuffers(receive: Int32?, send: Int32?) {
        for (option, size) in [(SO_RCVBUF, receive), (SO_SNDBUF, send)] {
            guard var value = size else { continue }
            _ = setsockopt(fd, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

/// Sends a byte string on a `LoopbackPeer` from a thread of its own, so the test can watch how far it gets.
final class BackgroundSender: @unchecked Sendable {
    private let lock = NSLock()
    private var progress = 0
    private var total: Int?
    private let done = DispatchSemaphore(value: 0)

    /// Starts sending `bytes` on `peer` at once (each wait for room at most 30 s).
    init(_ peer: LoopbackPeer, _ bytes: [UInt8]) {
        Thread.detachNewThread { [self] in
            let sent = (try? peer.send(bytes, seconds: 30) { sent in lock.withLock { progress = sent } }) ?? 0
            lock.withLock { total = sent }
            done.signal()
        }
    }

    /// Bytes sent so far.
    var sent: Int { lock.withLock { progress } }

    /// Whether the sender stops making progress (nothing more for 300 ms) before it is done, within 10 s.
    func stalls() -> Bool {
        let deadline = Date().addingTimeInterval(10)
        var last = -1
        var since = Date()
        while Date() < deadline, lock.withLock({ total == nil }) {
            let now = sent
            if now != last {
                last = now
                since = Date()
            } else if Date().timeIntervalSince(since) >= 0.3 {
                return true
            }
            usleep(20_000)
        }
        return false
    }

    /// The total sent once the sender is done (nil: not done within `seconds`).
    func wait(seconds: Double) -> Int? {
        if let total = lock.withLock({ total }) { return total }
        _ = done.wait(timeout: .now() + seconds)
        return lock.withLock { total }
    }
}
