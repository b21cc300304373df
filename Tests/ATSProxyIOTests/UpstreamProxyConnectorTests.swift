import ATSPolicy
import ATSProxyCore
import Foundation
import Testing

@testable import ATSProxyIO

/// A scripted upstream proxy: records what the client sent until the end of its head, then writes
/// `answer` (nothing when nil: a proxy that never answers).
final class ScriptedProxyHandler: TCPConnectionHandler, @unchecked Sendable {
    let answer: [UInt8]?
    let received = Expectation<String>()
    private var buffer: [UInt8] = []

    init(answer: String?) { self.answer = answer.map { Array($0.utf8) } }

    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer) {
        buffer += bytes
        let text = String(decoding: buffer, as: UTF8.self)
        guard text.hasSuffix("\r\n\r\n") else { return }
        received.fulfill(text)
        if let answer { connection.write(answer) }
    }

    func connectionDidReadEOF(_ connection: TCPConnection) {}
    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason) {}
}

/// Outcome of one `UpstreamProxyConnector.connect`, with the tunnel's first bytes as text.
func tunnelOutcome(
    through proxy: UpstreamProxy, timeout: Duration = .seconds(5)
) -> Result<String, ConnectError>? {
    let loop = EventLoop()
    let outcome = Expectation<Result<String, ConnectError>>()
    loop.execute {
        UpstreamProxyConnector.connect(
            host: "api.example.com", port: 443, through: proxy, on: loop, resolver: Resolver(), timeout: timeout
        ) { result in
            switch result {
            case .success(let tunnel):
                outcome.fulfill(.success(String(decoding: tunnel.remaining, as: UTF8.self)))
                tunnel.connection.close()
            case .failure(let error):
                outcome.fulfill(.failure(error))
            }
        }
    }
    return outcome.wait(seconds: 10)
}

/// `UpstreamProxyConnector` against scripted proxies on 127.0.0.1: the CONNECT it sends, the tunnel it
/// hands over, and the codes of its failures.
@Suite struct UpstreamProxyConnectorTests {
    static func proxy(answering answer: String?, group: EventLoopGroup) throws -> (TCPListener, ScriptedProxyHandler) {
        let handler = ScriptedProxyHandler(answer: answer)
        let listener = try startLoopbackListener(group: group) { connection in connection.handler = handler }
        return (listener, handler)
    }

    @Test func a200HandsOverTheTunnelWithTheOriginsFirstBytes() throws {
        let group = EventLoopGroup(loopCount: 1)
        let (listener, handler) = try Self.proxy(
            answering: "HTTP/1.1 200 Connection established\r\n\r\nhi", group: group)
        defer { stopAndWait(listener) }
        let proxy = UpstreamProxy(
            host: "127.0.0.1", port: listener.boundAddress.port, credentials: .init(user: "u", password: "p"))
        #expect(tunnelOutcome(through: proxy) == .success("hi"))
        #expect(
            handler.received.wait(seconds: 5)
                == "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nProxy-Authorization: Basic dTpw\r\n\r\n"
        )
    }

    @Test func a407IsA1004WhoseDetailSaysCredentialsAreWanted() throws {
        let group = EventLoopGroup(loopCount: 1)
        let (listener, _) = try Self.proxy(
            answering: "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n", group: group)
        defer { stopAndWait(listener) }
        let outcome = tunnelOutcome(through: UpstreamProxy(host: "127.0.0.1", port: listener.boundAddress.port))
        guard case .failure(let error) = outcome else {
            Issue.record("407 did not fail: \(String(describing: outcome))")
            return
        }
        #expect(error.failure.code == .cannotConnectToHost)
        #expect(error.description.contains("wants credentials (sent no credentials"), "\(error)")
    }

    @Test func aProxyThatNeverAnswersTimesOutAndARefusedOneIs1004() throws {
        let group = EventLoopGroup(loopCount: 1)
        let (listener, handler) = try Self.proxy(answering: nil, group: group)
        let port = listener.boundAddress.port
        let started = Date()
        let silent = tunnelOutcome(through: UpstreamProxy(host: "127.0.0.1", port: port), timeout: .milliseconds(400))
        #expect(silent == .failure(.timedOut))
        #expect(Date().timeIntervalSince(started) < 3)
        #expect(handler.received.wait(seconds: 1) != nil)
        stopAndWait(listener)

        let refused = tunnelOutcome(through: UpstreamProxy(host: "127.0.0.1", port: port))
        guard case .failure(let error) = refused else {
            Issue.record("a closed port did not fail: \(String(describing: refused))")
            return
        }
        #expect(error.failure.code == .cannotConnectToHost)
        #expect(error.description == "upstream proxy 127.0.0.1:\(port): connection refused")
    }
}
