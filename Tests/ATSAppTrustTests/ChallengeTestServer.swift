import ATSAppTrust
import ATSSystemTools
import ATSTLS
import ATSTestSupport
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback HTTPS server on 127.0.0.1, port 0, that serves each connection like the proxy's client
/// side would for the assignment `assign` gives it (a fixed one, or a `ChallengeRotation`'s): a normal leaf (answering
/// `200 ok`) or a challenge (answering a request that comes through it with `502`, as the proxy does for a finding).
/// It follows each challenged connection with a `ChallengeProbe` and keeps the outcomes.
///
/// The accept loop is `TestServer`'s (one connection at a time, on its own thread; it stops on `stop()` or after
/// `idleLimit` seconds without a connection, so a failed test never leaves it running); this type is what it does
/// with each connection.
final class ChallengeTestServer: Sendable {
    let host: String
    private let assign: @Sendable () -> ChallengeAssignment
    private let contexts: ChallengeTLSContexts
    private let normal: ServerTLSContext
    private let recorded = Mutex<(outcomes: [ChallengeOutcome], normalRequests: Int, connections: Int)>(([], 0, 0))
    /// Set once, right after `init`'s own fields: the server needs `self` to serve.
    private let server = Mutex<TestServer?>(nil)

    convenience init(
        _ assignment: ChallengeAssignment, host: String, contexts: ChallengeTLSContexts, normal: ServerTLSContext
    ) throws {
        try self.init(host: host, contexts: contexts, normal: normal) { assignment }
    }

    init(
        host: String, contexts: ChallengeTLSContexts, normal: ServerTLSContext, idleLimit: TimeInterval = 30,
        assign: @escaping @Sendable () -> ChallengeAssignment
    ) throws {
        self.host = host
        self.assign = assign
        self.contexts = contexts
        self.normal = normal
        let server = try TestServer(
            .custom { [weak self] stream in
                guard let self else { return }
                self.serve(stream)
                self.recorded.withLock { $0.connections += 1 }
            }, idleLimit: idleLimit, streamTimeout: 5)
        self.server.withLock { $0 = server }
    }

    var port: UInt16 { server.withLock { $0?.port ?? 0 } }

    func stop() { server.withLock { $0?.stop() } }

    /// The outcomes of the challenged connections so far.
    var outcomes: [ChallengeOutcome] { recorded.withLock { $0.outcomes } }
    /// Requests answered on normal connections so far.
    var normalRequests: Int { recorded.withLock { $0.normalRequests } }

    /// Waits up to `seconds` until `count` connections have been dealt with; true when they were.
    func waitForConnections(_ count: Int, seconds: TimeInterval = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if recorded.withLock({ $0.connections }) >= count { return true }
            usleep(10_000)
        }
        return false
    }

    private func serve(_ stream: TestSocketStream) {
        let engine: TLSConnection
        var probe: ChallengeProbe?
        do {
            switch assign() {
            case .normal:
                engine = try normal.makeConnection(connectHost: host)
            case .challenge(let kind):
                engine = try contexts.makeConnection(connectHost: host, kind: kind)
                probe = ChallengeProbe(host: host, kind: kind)
            }
        } catch {
            return
        }
        if let failure = HandshakePump.run(engine, over: stream) {
            if var refused = probe {
                switch failure {
                case .handshake(let tls): record(refused.handshakeFailed(tls))
                case .transport: record(refused.clientClosed())
                }
            }
            return
        }
        probe?.handshakeCompleted()
        let layer = TLSLayer(engine)
        var inbound = layer.decrypt([])
        while true {
            if !inbound.plaintext.isEmpty {
                let response: String
                if var accepted = probe {
                    record(accepted.requestReceived())
                    probe = accepted
                    response = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                } else {
                    recorded.withLock { $0.normalRequests += 1 }
                    response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                }
                _ = layer.seal(Array(response.utf8))
                layer.close()
                try? stream.send(layer.takeRecords())
                stream.drainUntilClosed(seconds: 3)
                return
            }
            if inbound.end != nil {
                if var closed = probe { record(closed.clientClosed()) }
                return
            }
            let records = layer.takeRecords()
            if !records.isEmpty { try? stream.send(records) }
            do {
                let bytes = try stream.receive()
                if bytes.isEmpty { layer.receiveEnd() }
                inbound = layer.decrypt(bytes)
            } catch {
                layer.receiveEnd()
                inbound = layer.decrypt([])
            }
        }
    }

    private func record(_ outcome: ChallengeOutcome) {
        recorded.withLock { $0.outcomes.append(outcome) }
    }
}

/// Runs a client program to completion (killed after `timeout` seconds), its output captured in
/// files, with no proxy variables in its environment.
enum ChallengeClientRun {
    struct Result: CustomStringConvertible {
        let status: Int32
        let stdout: String
        let stderr: String
        var description: String { "exit \(status), stdout: \(stdout), stderr: \(stderr)" }
    }

    static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval = 20) throws -> Result {
        let directory = try TemporaryDirectory("challenge-client")
        let outPath = directory.file("out")
        let errPath = directory.file("err")
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let process = try ChildProcess(
            executable: executable, arguments: arguments,
            environment: ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") },
            standardOutput: .file(outPath), standardError: .file(errPath))
        if !process.wait(timeout: timeout) { process.send(SIGKILL) }
        process.waitUntilExit()
        let text = { (path: String) in
            String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
        }
        return Result(status: process.terminationStatus, stdout: text(outPath), stderr: text(errPath))
    }
}
