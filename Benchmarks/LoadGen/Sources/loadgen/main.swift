import CLoadGenSSL
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// loadgen: the benchmark's HTTP/1.1-over-TLS load generator. One blocking thread per connection
// (at most 64 busy connections, so the threads cost less than an event loop's extra syscalls),
// either straight to the origin or through an explicit proxy with CONNECT. Every run prints one
// line of key=value pairs that Benchmarks/run parses.

// MARK: - Options

struct Endpoint: Sendable {
    var host: String
    var port: UInt16

    init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        host = String(text[..<colon])
        self.port = port
    }
}

struct Options: Sendable {
    var mode = ""
    var origin: Endpoint?
    var proxy: Endpoint?
    var authority = "bench.test:443"
    var serverName = "bench.test"
    var caFile = ""
    var connections = 1
    var duration = 5.0
    var path = "/tiny"
    var repeatCount = 1
    var count = 1000
    var threads = 8
    var settle = 2.0
    var releaseBuffers = false
    var proxyPIDs: [Int32] = []
    var originPIDs: [Int32] = []

    static let usage = """
        usage: loadgen MODE --origin HOST:PORT [--proxy HOST:PORT] --ca FILE [options]
          MODE keepalive  --connections N --duration S [--path /tiny]
               connect    --connections N --duration S   (a new connection per request)
               bulk       --path /big [--repeat R]
               idle       --count N [--threads T] [--settle S]   (RSS of the watched pids)
          --release-buffers 1     SSL_MODE_RELEASE_BUFFERS on the generator's own connections
          --authority HOST:PORT   CONNECT target and Host header (default bench.test:443)
          --server-name NAME      SNI and verified name (default bench.test)
          --proxy-pid PID, --origin-pid PID   processes whose CPU (and RSS) is reported (repeatable)
        """

    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var rest = arguments[...]
        guard let mode = rest.popFirst(), ["keepalive", "connect", "bulk", "idle"].contains(mode) else {
            fail(usage)
        }
        options.mode = mode
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { fail("\(flag) needs a value\n\(usage)") }
            switch flag {
            case "--origin": options.origin = Endpoint(parsing: value)
            case "--proxy": options.proxy = Endpoint(parsing: value)
            case "--authority": options.authority = value
            case "--server-name": options.serverName = value
            case "--ca": options.caFile = value
            case "--connections": options.connections = Int(value) ?? 0
            case "--duration": options.duration = Double(value) ?? 0
            case "--path": options.path = value
            case "--repeat": options.repeatCount = Int(value) ?? 0
            case "--count": options.count = Int(value) ?? 0
            case "--threads": options.threads = Int(value) ?? 0
            case "--settle": options.settle = Double(value) ?? 0
            case "--release-buffers": options.releaseBuffers = value == "1"
            case "--proxy-pid": options.proxyPIDs.append(Int32(value) ?? 0)
            case "--origin-pid": options.originPIDs.append(Int32(value) ?? 0)
            default: fail("unknown option \(flag)\n\(usage)")
            }
        }
        guard options.origin != nil, !options.caFile.isEmpty, options.connections > 0, options.duration > 0,
            options.repeatCount > 0, options.count > 0, options.threads > 0
        else { fail(usage) }
        return options
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data(("loadgen: " + message + "\n").utf8))
    exit(2)
}

// MARK: - Clocks and /proc

@inline(__always) func nowNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// utime + stime of a process (all threads), in seconds, from /proc/PID/stat.
func processCPUSeconds(_ pid: Int32) -> Double {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func cpuSeconds(_ pids: [Int32]) -> Double { pids.reduce(0) { $0 + processCPUSeconds($1) } }

/// VmRSS of a process in KiB, from /proc/PID/status.
func residentKiB(_ pid: Int32) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// This process's own CPU time (user + system, all threads), in seconds.
func selfCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
}

/// CPU of the generator and the watched processes over a measured window.
struct CPUSnapshot {
    var wall = nowNanos()
    var generator = selfCPUSeconds()
    var proxy: Double
    var origin: Double

    init(_ options: Options) {
        proxy = cpuSeconds(options.proxyPIDs)
        origin = cpuSeconds(options.originPIDs)
    }

    func fields(until end: CPUSnapshot) -> String {
        let seconds = Double(end.wall - wall) / 1e9
        let generatorCPU = end.generator - generator
        return String(
            format: "window_s=%.3f gen_cpu_s=%.3f gen_cores=%.2f proxy_cpu_s=%.3f origin_cpu_s=%.3f", seconds,
            generatorCPU, generatorCPU / seconds, end.proxy - proxy, end.origin - origin)
    }
}

// MARK: - TLS client

struct LoadGenError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func openSSLErrors() -> String {
    var parts: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        parts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return parts.joined(separator: "; ")
}

/// A client SSL_CTX trusting one CA file; safe to share read-only between threads.
final class TLSClientContext: @unchecked Sendable {
    let context: OpaquePointer

    init(caFile: String, releaseBuffers: Bool) throws {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw LoadGenError("SSL_CTX_new failed") }
        self.context = context
        _ = loadgen_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION)
        _ = loadgen_SSL_CTX_set_session_cache_mode(context, Int(SSL_SESS_CACHE_OFF))
        _ = loadgen_SSL_CTX_set_mode(
            context, Int(SSL_MODE_AUTO_RETRY) | (releaseBuffers ? Int(SSL_MODE_RELEASE_BUFFERS) : 0))
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
            throw LoadGenError("cannot load CA \(caFile): \(openSSLErrors())")
        }
    }

    deinit { SSL_CTX_free(context) }
}

/// Everything a worker needs to open connections and build requests.
final class Client: Sendable {
    let options: Options
    let tls: TLSClientContext
    let address: sockaddr_in
    let connectRequest: [UInt8]

    init(options: Options) throws {
        self.options = options
        tls = try TLSClientContext(caFile: options.caFile, releaseBuffers: options.releaseBuffers)
        guard let target = options.proxy ?? options.origin else { throw LoadGenError("no target") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = target.port.bigEndian
        guard inet_pton(AF_INET, target.host, &address.sin_addr) == 1 else {
            throw LoadGenError("\(target.host) is not an IPv4 address")
        }
        self.address = address
        connectRequest = Array("CONNECT \(options.authority) HTTP/1.1\r\nHost: \(options.authority)\r\n\r\n".utf8)
    }

    func request(path: String) -> [UInt8] {
        Array("GET \(path) HTTP/1.1\r\nHost: \(options.authority)\r\nUser-Agent: ats-proxy-loadgen/1\r\n\r\n".utf8)
    }
}

/// One TLS connection on a blocking socket: direct, or tunnelled through the proxy with CONNECT.
final class Connection: @unchecked Sendable {
    static let bufferSize = 64 * 1024
    let fd: Int32
    let ssl: OpaquePointer
    let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: Connection.bufferSize)
    var start = 0
    var end = 0

    init(_ client: Client) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LoadGenError("socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = client.address
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw LoadGenError("connect: \(reason)")
        }
        if client.options.proxy != nil {
            do { try Self.tunnel(fd, client.connectRequest) } catch {
                Glibc.close(fd)
                throw error
            }
        }
        guard let ssl = SSL_new(client.tls.context) else {
            Glibc.close(fd)
            throw LoadGenError("SSL_new failed")
        }
        self.fd = fd
        self.ssl = ssl
        SSL_set_fd(ssl, fd)
        _ = loadgen_SSL_set_tlsext_host_name(ssl, client.options.serverName)
        SSL_set1_host(ssl, client.options.serverName)
        ERR_clear_error()
        guard SSL_connect(ssl) == 1 else {
            let verify = SSL_get_verify_result(ssl)
            let reason = verify == X509_V_OK ? openSSLErrors() : String(cString: X509_verify_cert_error_string(verify))
            throw LoadGenError("TLS handshake: \(reason)")
        }
    }

    deinit {
        SSL_free(ssl)
        Glibc.close(fd)
        buffer.deallocate()
    }

    static let contentLengthName = Array("content-length".utf8)
    static let transferEncodingName = Array("transfer-encoding".utf8)
    static let chunkedName = Array("chunked".utf8)

    /// If the header line [from, to) is `name: value` (name case-insensitive), the value's start.
    @inline(__always) private func headerValue(_ name: [UInt8], _ from: Int, _ to: Int) -> Int? {
        guard to - from > name.count, buffer[from + name.count] == 58 else { return nil }
        for index in 0..<name.count where buffer[from + index] | 0x20 != name[index] { return nil }
        var value = from + name.count + 1
        while value < to && (buffer[value] == 32 || buffer[value] == 9) { value += 1 }
        return value
    }

    /// Sends CONNECT and reads the proxy's answer up to the blank line; anything but 200 fails.
    private static func tunnel(_ fd: Int32, _ request: [UInt8]) throws {
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            throw LoadGenError("CONNECT send failed")
        }
        var head: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
            let got = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 1024, 0) }
            guard got > 0 else { throw LoadGenError("proxy closed during CONNECT") }
            head.append(contentsOf: chunk[..<got])
            guard head.count < 65536 else { throw LoadGenError("CONNECT answer too long") }
        }
        let statusLine = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self)
        guard statusLine.split(separator: " ").dropFirst().first == "200" else {
            throw LoadGenError("CONNECT refused: \(statusLine)")
        }
    }

    func close() {
        ERR_clear_error()
        SSL_shutdown(ssl)
    }

    func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                ERR_clear_error()
                let wrote = SSL_write(ssl, raw.baseAddress! + offset, Int32(raw.count - offset))
                guard wrote > 0 else { throw LoadGenError("SSL_write: \(openSSLErrors())") }
                offset += Int(wrote)
            }
        }
    }

    /// Reads more bytes into the buffer after `end`; false at EOF.
    private func fill() throws {
        if start == end {
            start = 0
            end = 0
        } else if end == Connection.bufferSize {
            guard start > 0 else { throw LoadGenError("response head too large") }
            memmove(buffer, buffer + start, end - start)
            end -= start
            start = 0
        }
        ERR_clear_error()
        let got = SSL_read(ssl, buffer + end, Int32(Connection.bufferSize - end))
        guard got > 0 else {
            let code = SSL_get_error(ssl, got)
            throw LoadGenError(
                code == SSL_ERROR_ZERO_RETURN ? "connection closed" : "SSL_read error \(code): \(openSSLErrors())")
        }
        end += Int(got)
    }

    /// Reads one response (status line, headers, Content-Length or chunked body) and returns its
    /// status and body size. The body is counted, not kept.
    func readResponse() throws -> (status: Int, bodyBytes: Int) {
        var checked = 0  // bytes after `start` already ruled out as the end of the head
        var headEnd = -1
        while headEnd < 0 {
            var index = start + max(checked, 3)
            while index < end {
                if buffer[index] == 10 && buffer[index - 1] == 13 && buffer[index - 2] == 10
                    && buffer[index - 3] == 13
                {
                    headEnd = index + 1
                    break
                }
                index += 1
            }
            if headEnd >= 0 { break }
            checked = end - start
            try fill()
        }
        // Byte-level head parsing: no String work per response, so the generator stays cheap.
        var lineEnd = start
        while buffer[lineEnd] != 13 { lineEnd += 1 }
        var status = 0
        var cursor = start
        while cursor < lineEnd && buffer[cursor] != 32 { cursor += 1 }
        cursor += 1
        while cursor < lineEnd && buffer[cursor] >= 48 && buffer[cursor] <= 57 {
            status = status * 10 + Int(buffer[cursor] - 48)
            cursor += 1
        }
        guard status >= 100 else { throw LoadGenError("bad status line") }
        var contentLength = -1
        var chunked = false
        var lineStart = lineEnd + 2
        while lineStart < headEnd - 2 {
            lineEnd = lineStart
            while buffer[lineEnd] != 13 { lineEnd += 1 }
            if let value = headerValue(Connection.contentLengthName, lineStart, lineEnd) {
                contentLength = 0
                for index in value..<lineEnd where buffer[index] >= 48 && buffer[index] <= 57 {
                    contentLength = contentLength * 10 + Int(buffer[index] - 48)
                }
            } else if let value = headerValue(Connection.transferEncodingName, lineStart, lineEnd) {
                chunked =
                    lineEnd - value >= 7
                    && (0..<7).allSatisfy { buffer[lineEnd - 7 + $0] | 0x20 == Connection.chunkedName[$0] }
            }
            lineStart = lineEnd + 2
        }
        start = headEnd
        if chunked { return (status, try skipChunkedBody()) }
        guard contentLength >= 0 else { throw LoadGenError("response without Content-Length") }
        try skip(contentLength)
        return (status, contentLength)
    }

    private func skip(_ count: Int) throws {
        var remaining = count
        while remaining > 0 {
            if start == end { try fill() }
            let take = min(remaining, end - start)
            start += take
            remaining -= take
        }
    }

    private func readLine() throws -> String {
        while true {
            var index = start
            while index + 1 < end {
                if buffer[index] == 13 && buffer[index + 1] == 10 {
                    let line = String(
                        decoding: UnsafeBufferPointer(start: buffer + start, count: index - start), as: UTF8.self)
                    start = index + 2
                    return line
                }
                index += 1
            }
            try fill()
        }
    }

    private func skipChunkedBody() throws -> Int {
        var total = 0
        while true {
            let sizeText = try readLine().split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw LoadGenError("bad chunk size")
            }
            if size == 0 {
                while try !readLine().isEmpty {}
                return total
            }
            try skip(size)
            guard try readLine().isEmpty else { throw LoadGenError("bad chunk end") }
            total += size
        }
    }

    /// One request/response exchange; throws unless the status is 200.
    func exchange(_ request: [UInt8]) throws -> Int {
        try write(request)
        let (status, bytes) = try readResponse()
        guard status == 200 else { throw LoadGenError("status \(status)") }
        return bytes
    }
}

// MARK: - Shared state between threads

final class WorkerResults: Sendable {
    struct Entry {
        var latencies: [UInt64]
        var attempts = 0
        var errors: Int
        var firstError: String?
    }
    let entries = Mutex<[Entry]>([])
    let deadline = Atomic<UInt64>(0)
    let ready = DispatchSemaphore(value: 0)
    let go = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)

    func add(_ entry: Entry) { entries.withLock { $0.append(entry) } }
}

func startThread(_ body: @escaping @Sendable () -> Void) {
    let thread = Thread(block: body)
    thread.stackSize = 512 * 1024
    thread.start()
}

func percentile(_ sorted: [UInt64], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return Double(sorted[Int((Double(sorted.count - 1) * fraction).rounded())]) / 1000
}

/// Runs `connections` workers for `duration` seconds; each calls `iterate` in a loop and returns
/// the latencies of the iterations that finished inside the window.
func runTimedWorkers(
    _ options: Options, setup: @escaping @Sendable () throws -> (@Sendable () throws -> Void)
) -> String {
    let results = WorkerResults()
    for _ in 0..<options.connections {
        startThread {
            var entry = WorkerResults.Entry(latencies: [], errors: 0)
            entry.latencies.reserveCapacity(1 << 16)
            var iterate: (@Sendable () throws -> Void)?
            do { iterate = try setup() } catch {
                entry.errors += 1
                entry.firstError = "\(error)"
            }
            results.ready.signal()
            results.go.wait()
            let deadline = results.deadline.load(ordering: .acquiring)
            while let step = iterate {
                let begin = nowNanos()
                if begin >= deadline { break }
                entry.attempts += 1
                do {
                    try step()
                    let finish = nowNanos()
                    if finish <= deadline { entry.latencies.append(finish - begin) }
                } catch {
                    entry.errors += 1
                    if entry.firstError == nil { entry.firstError = "\(error)" }
                    usleep(1000)
                    if let fresh = try? setup() { iterate = fresh }
                }
            }
            results.add(entry)
            results.done.signal()
        }
    }
    for _ in 0..<options.connections { results.ready.wait() }
    let before = CPUSnapshot(options)
    results.deadline.store(before.wall + UInt64(options.duration * 1e9), ordering: .releasing)
    for _ in 0..<options.connections { results.go.signal() }
    let deadline = results.deadline.load(ordering: .acquiring)
    while true {
        let now = nowNanos()
        if now >= deadline { break }
        usleep(UInt32(min(100_000, (deadline - now) / 1000 + 1)))
    }
    var after = CPUSnapshot(options)
    after.wall = deadline
    for _ in 0..<options.connections { results.done.wait() }
    let entries = results.entries.withLock { $0 }
    var all = entries.flatMap(\.latencies)
    all.sort()
    let errors = entries.reduce(0) { $0 + $1.errors }
    let attempts = entries.reduce(0) { $0 + $1.attempts }
    let seconds = options.duration
    var line = String(
        format: "count=%d rate=%.1f p50_us=%.1f p99_us=%.1f max_us=%.1f errors=%d attempts=%d ", all.count,
        Double(all.count) / seconds, percentile(all, 0.5), percentile(all, 0.99), percentile(all, 1), errors, attempts)
    line += before.fields(until: after)
    if let first = entries.compactMap(\.firstError).first { line += " first_error=\"\(first)\"" }
    return line
}

// MARK: - Modes

/// Keep-alive: each worker opens one connection (plus one warm-up request), then repeats GET.
func keepAlive(_ client: Client) -> String {
    let request = client.request(path: client.options.path)
    return runTimedWorkers(client.options) {
        let connection = try Connection(client)
        _ = try connection.exchange(request)
        return { _ = try connection.exchange(request) }
    }
}

/// New connections: each iteration is TCP connect (+ CONNECT) + TLS handshake + one GET + close.
func newConnections(_ client: Client) -> String {
    let request = client.request(path: client.options.path)
    return runTimedWorkers(client.options) {
        return {
            let connection = try Connection(client)
            _ = try connection.exchange(request)
            connection.close()
        }
    }
}

/// Bulk: one connection, one warm-up GET of the tiny path, then `repeat` timed downloads.
func bulk(_ client: Client) -> String {
    do {
        let connection = try Connection(client)
        _ = try connection.exchange(client.request(path: "/tiny"))
        let request = client.request(path: client.options.path)
        let before = CPUSnapshot(client.options)
        var rates: [Double] = []
        var bytes = 0
        for _ in 0..<client.options.repeatCount {
            let begin = nowNanos()
            bytes = try connection.exchange(request)
            rates.append(Double(bytes) / (Double(nowNanos() - begin) / 1e9) / 1e6)
        }
        let after = CPUSnapshot(client.options)
        connection.close()
        rates.sort()
        return String(
            format: "bytes=%d mbps=%.1f mbps_best=%.1f errors=0 ", bytes, rates[rates.count / 2], rates.last ?? 0)
            + "mbps_all=" + rates.map { String(format: "%.0f", $0) }.joined(separator: ",") + " "
            + before.fields(until: after)
    } catch {
        return "bytes=0 mbps=0 errors=1 first_error=\"\(error)\""
    }
}

/// Idle: RSS of the watched processes before and after opening `count` keep-alive connections
/// that each completed one request. The connections stay open until the second reading.
func idle(_ client: Client) -> String {
    let options = client.options
    let pids = options.proxyPIDs.isEmpty ? options.originPIDs : options.proxyPIDs
    let request = client.request(path: "/tiny")
    let rssBefore = pids.reduce(0) { $0 + residentKiB($1) }
    let ownBefore = residentKiB(getpid())
    let results = WorkerResults()
    let begin = nowNanos()
    for index in 0..<options.threads {
        let share = options.count / options.threads + (index < options.count % options.threads ? 1 : 0)
        startThread {
            var held: [Connection] = []
            var entry = WorkerResults.Entry(latencies: [], errors: 0)
            for _ in 0..<share {
                do {
                    let connection = try Connection(client)
                    _ = try connection.exchange(request)
                    held.append(connection)
                } catch {
                    entry.errors += 1
                    if entry.firstError == nil { entry.firstError = "\(error)" }
                }
            }
            entry.latencies = [UInt64(held.count)]
            results.add(entry)
            results.ready.signal()
            results.go.wait()
            for connection in held { connection.close() }
            held.removeAll()
            results.done.signal()
        }
    }
    for _ in 0..<options.threads { results.ready.wait() }
    let openSeconds = Double(nowNanos() - begin) / 1e9
    usleep(UInt32(options.settle * 1e6))
    let rssAfter = pids.reduce(0) { $0 + residentKiB($1) }
    let ownAfter = residentKiB(getpid())
    for _ in 0..<options.threads { results.go.signal() }
    for _ in 0..<options.threads { results.done.wait() }
    let entries = results.entries.withLock { $0 }
    let open = entries.reduce(0) { $0 + Int($1.latencies.first ?? 0) }
    let errors = entries.reduce(0) { $0 + $1.errors }
    var line = String(
        format: "open=%d errors=%d open_s=%.2f rss_before_kib=%d rss_after_kib=%d kib_per_conn=%.2f", open, errors,
        openSeconds, rssBefore, rssAfter, open > 0 ? Double(rssAfter - rssBefore) / Double(open) : 0)
    line += String(format: " gen_kib_per_conn=%.2f", open > 0 ? Double(ownAfter - ownBefore) / Double(open) : 0)
    if let first = entries.compactMap(\.firstError).first { line += " first_error=\"\(first)\"" }
    return line
}

// MARK: - Main

signal(SIGPIPE, SIG_IGN)
let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
let client: Client
do { client = try Client(options: options) } catch { fail("\(error)") }
let line: String
switch options.mode {
case "keepalive": line = keepAlive(client)
case "connect": line = newConnections(client)
case "bulk": line = bulk(client)
default: line = idle(client)
}
print(line)
fflush(nil)
exit(line.contains("errors=0") || !line.contains("errors=") ? 0 : 1)
