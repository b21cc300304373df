import ATSPolicy
import ATSProxyCore
import ATSProxyIO
import ATSTLS
import Foundation

/// Fetches one https:// URL with the project's own upstream TLS client, for `ats-proxy ct update`:
/// a direct connection (no proxy), the server verified as ATS verifies one by default (system roots plus
/// `--upstream-ca` anchors, the host name, TLS 1.2+), one `GET` with `Connection: close`, the response read
/// with the proxy's HTTP/1.1 parser. Only a 200 answer is returned; bodies over `maximumBytes` are refused.
struct CTListDownloader {
    let trust: TrustStore
    let overrides: ResolverOverrides
    let timeout: TimeInterval
    /// Apple's list is about 20 KB; anything beyond this is not a log list.
    let maximumBytes = 8 << 20

    /// Why a download failed, in plain words.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The body of `url` (https only).
    func fetch(_ url: String) throws -> Data {
        let target: RequestTarget
        do {
            target = try RequestTarget(parsing: url)
        } catch {
            throw Failure(description: "\(url): \(error)")
        }
        guard target.scheme == .https, let components = URLComponents(string: url) else {
            throw Failure(description: "\(url): the log list is fetched over https:// only")
        }
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        let requirements = PolicyContext(configuration: ATSConfiguration(), options: EvaluationOptions())
            .decide(target).requirements
        let client = UpstreamTLSClient(trust: trust, alpn: ["http/1.1"])
        let connection: TLSConnection
        let stream: any HandshakeStream
        do {
            connection = try client.makeConnection(requirements: requirements, host: target.host, alpn: ["http/1.1"])
            stream = try UpstreamProbeTransport(
                host: target.host, port: UInt16(target.port), overrides: overrides, timeout: timeout
            ).connect()
        } catch {
            throw Failure(description: "\(target.host): \(error)")
        }
        if let failure = HandshakePump.run(connection, over: stream) {
            throw Failure(description: "\(target.host): TLS handshake failed: \(failure)")
        }
        let summary = client.summarize(connection, host: target.host, time: Date())
        let verdict = UpstreamVerdict.judging(summary, requirements: requirements, url: url, host: target.host)
        guard !verdict.isBlocked else {
            throw Failure(description: "\(target.host): the server is not trusted: \(verdict.rule)")
        }
        let hostHeader = target.port == 443 ? target.host : "\(target.host):\(target.port)"
        let request =
            "GET \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\nAccept: application/json\r\n"
            + "User-Agent: ats-proxy/\(ATSProxyVersion.text)\r\nConnection: close\r\n\r\n"
        connection.write(Array(request.utf8))
        try send(connection, stream)
        return try readResponse(connection, stream, url: url)
    }

    private func send(_ connection: TLSConnection, _ stream: any HandshakeStream) throws {
        let outbound = connection.takeOutbound()
        guard !outbound.isEmpty else { return }
        do {
            try stream.send(outbound)
        } catch {
            throw Failure(description: "sending the request failed: \(error)")
        }
    }

    /// Reads until the response ends: status 200 and its body, or a `Failure`.
    private func readResponse(_ connection: TLSConnection, _ stream: any HandshakeStream, url: String) throws -> Data {
        var parser = HTTP1Parser(role: .response)
        parser.requestSent(method: "GET")
        var status: Int?
        var body = Data()
        var ended = false
        func take(_ parts: [HTTPPart]) throws {
            for part in parts {
                switch part {
                case .response(let head, _):
                    if head.status >= 200 { status = head.status }
                case .body(let bytes):
                    body.append(contentsOf: bytes)
                    guard body.count <= maximumBytes else {
                        throw Failure(description: "\(url): the answer exceeds \(maximumBytes) bytes")
                    }
                case .messageEnd:
                    if status != nil { ended = true } else { try take(parser.resume()) }
                case .failed(let error):
                    throw Failure(description: "\(url): malformed HTTP answer: \(error)")
                case .request, .trailers, .upgraded:
                    break
                }
            }
        }
        while !ended {
            switch connection.read() {
            case .data(let bytes):
                try take(parser.feed(bytes))
            case .needsInput:
                let received: [UInt8]
                do {
                    received = try stream.receive()
                } catch {
                    throw Failure(description: "\(url): reading the answer failed: \(error)")
                }
                if received.isEmpty { connection.receiveEOF() } else { connection.receive(received) }
                try send(connection, stream)
            case .closed:
                try take(parser.inputClosed())
                guard ended else { throw Failure(description: "\(url): the connection closed before the answer ended") }
            case .failed(let failure):
                throw Failure(description: "\(url): TLS failed while reading: \(failure)")
            }
        }
        guard status == 200 else { throw Failure(description: "\(url): the server answered \(status ?? 0), not 200") }
        return body
    }
}
