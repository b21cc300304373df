import ATSSystemTools
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Everything the end-to-end tests need to run real processes: temp directories, child processes
/// bounded by timeouts and killed by PID, certificates minted in-process, Python origin servers,
/// the proxy itself, curl and raw sockets.
enum E2E {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Fixtures")

    static func fixture(_ name: String) -> String { fixtures.appendingPathComponent(name).path }

    /// A clean environment for children: no proxy variables leaking in from the machine. The sanitizer options pass
    /// through, so that a sanitized `ats-proxy` child reports where `scripts/sanitize` looks (its `log_path`).
    static let environment: [String: String] = {
        var environment: [String: String] = [:]
        let inherited = ProcessInfo.processInfo.environment
        for key in ["PATH", "HOME", "LANG", "TMPDIR"] { environment[key] = inherited[key] }
        for key in ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "SWIFT_BACKTRACE"] {
            environment[key] = inherited[key]
        }
        environment["PATH"] = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        return environment
    }()

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// A port nothing listens on right now (bound to port 0, then released).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw Failure("bind: \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Polls `condition` every 20 ms until it returns a value or `timeout` passes.
    static func poll<T>(timeout: Double, _ condition: () throws -> T?) rethrows -> T? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let value = try condition() { return value }
            usleep(20_000)
        } while Date() < deadline
        return try condition()
    }

    static func sha256Hex(ofFile path: String) throws -> String {
        let result = try run("/usr/bin/sha256sum", [path], timeout: 30)
        guard result.status == 0, let hex = result.stdoutText.split(separator: " ").first else {
            throw Failure("sha256sum \(path): \(result.stderrText)")
        }
        return String(hex)
    }

    /// Raises this process's soft RLIMIT_NOFILE to its hard limit (children inherit it).
    static func raiseFileLimit(to wanted: rlim_t) -> rlim_t {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(wanted, limit.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return limit.rlim_cur
    }

    // MARK: - Processes

    struct RunResult {
        let status: Int32
        let timedOut: Bool
        let stdout: Data
        let stderr: Data
        var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
        var stderrText: String { String(decoding: stderr, as: UTF8.self) }
    }

    /// Runs a command to completion, killing it after `timeout` seconds.
    static func run(_ executable: String, _ arguments: [String], timeout: Double) throws -> RunResult {
        let directory = try TemporaryDirectory("run")
        let child = try Child(executable: executable, arguments: arguments, directory: directory)
        defer { child.stop() }
        let finished = child.wait(timeout: timeout)
        if !finished { child.stop() }
        return RunResult(
            status: finished ? child.process.terminationStatus : -1, timedOut: !finished,
            stdout: child.stdoutData, stderr: child.stderrData)
    }
}

/// A child process with stdout and stderr captured in files; `stop()` kills it by PID.
final class Child: @unchecked Sendable {
    let process: ChildProcess
    let stdoutPath: String
    let stderrPath: String

    /// `environment` is added to `E2E.environment`; `directory` holds the output files and, with `runInDirectory`,
    /// is the child's working directory (else it inherits the runner's).
    init(
        executable: String, arguments: [String], directory: TemporaryDirectory, label: String = "child",
        environment: [String: String] = [:], runInDirectory: Bool = false
    ) throws {
        stdoutPath = directory.file("\(label)-\(UUID().uuidString.prefix(6)).out")
        stderrPath = directory.file("\(label)-\(UUID().uuidString.prefix(6)).err")
        process = try ChildProcess(
            executable: executable, arguments: arguments,
            environment: E2E.environment.merging(environment) { _, added in added },
            currentDirectory: runInDirectory ? directory.path : nil, standardOutput: .file(stdoutPath),
            standardError: .file(stderrPath))
    }

    var pid: Int32 { process.processIdentifier }
    var stdoutData: Data { FileManager.default.contents(atPath: stdoutPath) ?? Data() }
    var stderrData: Data { FileManager.default.contents(atPath: stderrPath) ?? Data() }
    var stdoutText: String { String(decoding: stdoutData, as: UTF8.self) }
    var stderrText: String { String(decoding: stderrData, as: UTF8.self) }

    /// Waits up to `timeout` seconds for the process to exit; true when it did.
    func wait(timeout: Double) -> Bool {
        E2E.poll(timeout: timeout) { process.isRunning ? nil : true } ?? false
    }

    func signal(_ signal: Int32) { process.send(signal) }

    /// Kills the process (SIGKILL by PID) and reaps it.
    func stop() {
        if process.isRunning {
            process.send(SIGKILL)
            _ = wait(timeout: 5)
        }
    }

    deinit { stop() }
}

// MARK: - Origin servers

/// `Fixtures/origin.py`: plain or TLS origin on 127.0.0.1, logging every request it receives.
final class Origin: @unchecked Sendable {
    let name: String
    let port: Int
    let logPath: String
    let child: Child

    init(
        name: String, directory: TemporaryDirectory, tls leaf: TestPKI.Leaf? = nil, tlsVersion: String = "any",
        port: Int = 0, tlsOptions: [String] = [], files: String? = nil
    ) throws {
        self.name = name
        logPath = directory.file("\(name)-requests-\(UUID().uuidString.prefix(6)).log")
        var arguments = [E2E.fixture("origin.py"), "--name", name, "--log", logPath, "--port", "\(port)"]
        if let files { arguments += ["--files", files] }
        if let leaf {
            arguments += ["--cert", leaf.certificatePath, "--key", leaf.keyPath, "--tls-version", tlsVersion]
            arguments += tlsOptions
        }
        child = try Child(executable: "/usr/bin/python3", arguments: arguments, directory: directory, label: name)
        let ready = E2E.poll(timeout: 10) { [child] () -> Int? in
            let text = child.stdoutText
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) else { return nil }
            return Int(line.dropFirst(6))
        }
        guard let ready else {
            child.stop()
            throw E2E.Failure("origin \(name) did not start: \(child.stderrText)")
        }
        self.port = ready
    }

    /// Request lines received so far (`METHOD PATH Host=…`), and `TLS-FAILED …` lines.
    var requests: [String] {
        String(decoding: FileManager.default.contents(atPath: logPath) ?? Data(), as: UTF8.self)
            .split(separator: "\n").map(String.init)
    }

    func stop() { child.stop() }
    deinit { child.stop() }
}

// MARK: - The proxy

/// The built `ats-proxy` binary, run with its own CA dir, log file and listen port.
final class ProxyProcess: @unchecked Sendable {
    let port: Int
    let caPath: String
    let logPath: String
    let configPath: String
    let child: Child
    let directory: TemporaryDirectory
    var address: String { "127.0.0.1:\(port)" }

    /// - Parameters:
    ///   - plist: the Info.plist text (XML).
    ///   - resolve: `--resolve` entries (`host:port:127.0.0.1` is added for each host/port).
    ///   - logToFile: log to `--log-file` (true) or leave the log on stderr.
    ///   - binary: the `ats-proxy` to run (default: the one built with the tests).
    ///   - relativeConfig: pass `--config Info.plist` relative to the proxy's working directory (its temporary
    ///     folder), so the banner and the page name the file without a temporary path (the README's screenshots).
    init(
        plist: String, resolve: [(String, Int)] = [], upstreamCAs: [String] = [], arguments extra: [String] = [],
        logToFile: Bool = true, port fixedPort: Int? = nil, environment: [String: String] = [:],
        binary: String = CLITests.binary.path, relativeConfig: Bool = false
    ) throws {
        directory = try TemporaryDirectory("proxy")
        configPath = try directory.write("Info.plist", plist)
        logPath = directory.file("proxy.log")
        caPath = directory.file("ca/ats-proxy-ca.pem")
        var lastError = ""
        for _ in 0..<3 {
            let port = try fixedPort ?? E2E.freePort()
            var arguments = [
                "--config", relativeConfig ? "Info.plist" : configPath, "--listen", "127.0.0.1:\(port)", "--ca-dir",
                directory.file("ca"),
                "--loops", "2",
            ]
            for (host, hostPort) in resolve { arguments += ["--resolve", "\(host):\(hostPort):127.0.0.1"] }
            for file in upstreamCAs { arguments += ["--upstream-ca", file] }
            if logToFile { arguments += ["--log-file", logPath] }
            arguments += extra
            let child = try Child(
                executable: binary, arguments: arguments, directory: directory, label: "proxy",
                environment: environment, runInDirectory: relativeConfig)
            // Generous: under ASan on a loaded 2-core machine a start has taken more than 15 s (CI's asan stage).
            let started = E2E.poll(timeout: 60) { () -> Bool? in
                if !child.process.isRunning { return false }
                return child.stderrText.contains("listening on") ? true : nil
            }
            if started == true {
                self.port = port
                self.child = child
                return
            }
            lastError = child.stderrText
            child.stop()
            if fixedPort != nil { break }
        }
        throw E2E.Failure("ats-proxy did not start: \(lastError)")
    }

    var isRunning: Bool { child.process.isRunning }

    var log: String {
        let file = String(decoding: FileManager.default.contents(atPath: logPath) ?? Data(), as: UTF8.self)
        return file + child.stderrText
    }

    /// Waits until the log contains `text` (log writes are asynchronous); returns the whole log.
    @discardableResult
    func waitForLog(_ text: String, timeout: Double = 5) -> String {
        E2E.poll(timeout: timeout) { () -> String? in
            let log = self.log
            return log.contains(text) ? log : nil
        } ?? log
    }

    func stop() { child.stop() }
    deinit { child.stop() }
}

/// Info.plist text around an NSAppTransportSecurity dictionary body.
func infoPlist(_ ats: String, executable: String = "E2EApp") -> String {
    """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
    <key>CFBundleExecutable</key><string>\(executable)</string>
    <key>NSAppTransportSecurity</key>
    <dict>\(ats)</dict>
    </dict>
    </plist>
    """
}

/// An NSExceptionDomains entry allowing cleartext for `host`.
func cleartextException(_ host: String) -> String {
    "<key>\(host)</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>"
}

// MARK: - curl

/// A response curl saved to a file, with its header fields (lower-cased names).
protocol SavedResponse {
    var headers: [String: String] { get }
    var bodyPath: String { get }
}

extension SavedResponse {
    /// Whether the saved body hashes to the origin fixture's `X-Body-SHA256` (false without that header).
    func bodyMatchesChecksum() throws -> Bool {
        guard let expected = headers["x-body-sha256"] else { return false }
        return try E2E.sha256Hex(ofFile: bodyPath) == expected
    }
}

struct CurlResult: SavedResponse {
    let exitCode: Int32
    let httpCode: Int
    /// Header fields of the final response (lower-cased names; last value wins).
    let headers: [String: String]
    /// Status line of the final response.
    let statusLine: String
    let body: Data
    let bodyPath: String
    let stderr: String
    let writeOut: String
    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

enum Curl {
    /// Runs curl through the proxy. `cacert` is the CA curl trusts for https:// URLs (the proxy's
    /// CA when intercepted, the origin's CA for passthrough).
    static func fetch(
        _ url: String, proxy: ProxyProcess?, cacert: String? = nil, arguments extra: [String] = [],
        writeOut: String = "%{http_code}", timeout: Double = 30, directory: TemporaryDirectory? = nil
    ) throws -> CurlResult {
        let directory = try directory ?? TemporaryDirectory("curl")
        let headersPath = directory.file("headers-\(UUID().uuidString.prefix(6))")
        let bodyPath = directory.file("body-\(UUID().uuidString.prefix(6))")
        var arguments = ["-s", "-S", "-D", headersPath, "-o", bodyPath, "--max-time", "\(Int(timeout))"]
        arguments += ["-w", writeOut]
        if let proxy { arguments += ["-x", "http://\(proxy.address)"] }
        if let cacert { arguments += ["--cacert", cacert] }
        // The HTTP/1.1 suites speak HTTP/1.1 unless a test asks otherwise (ProxyHTTP2EndToEndTests covers h2).
        if !extra.contains(where: { $0.hasPrefix("--http") }) { arguments.append("--http1.1") }
        arguments += extra + [url]
        let result = try E2E.run("/usr/bin/curl", arguments, timeout: timeout + 5)
        let headerText = String(
            decoding: FileManager.default.contents(atPath: headersPath) ?? Data(), as: UTF8.self)
        let blocks = headerText.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
        let last = blocks.last ?? ""
        var headers: [String: String] = [:]
        let lines = last.components(separatedBy: "\r\n")
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let body = FileManager.default.contents(atPath: bodyPath) ?? Data()
        let writeOutText = result.stdoutText
        return CurlResult(
            exitCode: result.status, httpCode: Int(writeOutText.prefix(3)) ?? 0, headers: headers,
            statusLine: lines.first ?? "", body: body, bodyPath: bodyPath, stderr: result.stderrText,
            writeOut: writeOutText)
    }
}

// MARK: - Raw sockets

/// A blocking TCP client for hand-written (and hostile) requests.
final class RawClient {
    let fd: Int32
    /// Bytes received beyond the last response (the start of a pipelined next one).
    private var pending: [UInt8] = []

    init(port: Int, timeout: Double = 10) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw E2E.Failure("socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw E2E.Failure("connect to \(port): errno \(errno)")
        }
        setTimeout(timeout)
    }

    func setTimeout(_ seconds: Double) {
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return }
            offset += sent
        }
    }

    /// Reads until the peer closes (`closed` true) or nothing arrives within the timeout.
    func readToEnd(limit: Int = 1 << 24) -> (bytes: [UInt8], closed: Bool) {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while result.count < limit {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (result, true) }
            if count < 0 { return (result, errno == ECONNRESET) }
            result += buffer[0..<count]
        }
        return (result, false)
    }

    /// Reads one response: the head, then a Content-Length body (no chunked support).
    func readResponse() -> (head: String, body: [UInt8])? {
        var data = pending
        pending = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            if let range = data.firstRange(of: separator) {
                let head = String(decoding: data[..<range.lowerBound], as: UTF8.self)
                var body = Array(data[range.upperBound...])
                let length =
                    head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                while body.count < length {
                    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    if count <= 0 { return (head, body) }
                    body += buffer[0..<count]
                }
                // Pipelined responses can arrive in one segment: keep what follows this one.
                if length > 0 && body.count > length {
                    pending = Array(body[length...])
                    body.removeSubrange(length...)
                }
                return (head, body)
            }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return nil }
            data += buffer[0..<count]
        }
    }

    deinit { close(fd) }
}

extension String {
    /// The value of header `name` in a response head (case-insensitive), or nil.
    func headerValue(_ name: String) -> String? {
        for line in components(separatedBy: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == name.lowercased() {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }
}
