import ATSPolicy

/// Reads an upstream proxy's answer to one `CONNECT` (sans-io), with the strict HTTP/1.1 response
/// parser told that the request was a CONNECT.
///
/// Contract: feed the bytes the proxy sends until the result is not `.needMore`. A 2xx opens the
/// tunnel: `.established` carries the bytes that followed the head (they belong to the origin). 1xx
/// interim answers are skipped. Any other status, a malformed head or the end of input fails with the
/// NSURLError code the load gets: 407 with a detail saying the proxy wants credentials and naming
/// what was sent (never the secret); other statuses and a close before an answer with -1004.
public struct UpstreamProxyHandshake: Sendable {
    /// Where the exchange stands.
    public enum Outcome: Sendable, Equatable {
        /// The head is not complete yet.
        case needMore
        /// The proxy opened the tunnel; `remaining` are the origin's first bytes, if any.
        case established(remaining: [UInt8])
        /// The proxy did not open the tunnel.
        case failed(NSURLErrorCode, detail: String)
    }

    /// Lifecycle of the exchange.
    enum State: Sendable {
        /// Waiting for the final response head.
        case reading
        /// An outcome other than `.needMore` was returned; nothing further is parsed.
        case done
    }

    private var parser = HTTP1Parser(role: .response)
    private var state = State.reading
    private let proxy: UpstreamProxy
    private let origin: String

    /// Starts the exchange for a CONNECT to `host:port` sent to `proxy`.
    public init(proxy: UpstreamProxy, host: String, port: Int) {
        self.proxy = proxy
        origin = HTTP1Authority(host: host, port: port).description
        parser.requestSent(method: "CONNECT")
    }

    /// The next bytes from the proxy.
    public mutating func receive(_ bytes: [UInt8]) -> Outcome {
        switch state {
        case .reading:
            break
        case .done:
            preconditionFailure("UpstreamProxyHandshake.receive in state \(state)")
        }
        return conclude(parser.feed(bytes))
    }

    /// The proxy closed the connection.
    public mutating func receiveEOF() -> Outcome {
        switch state {
        case .reading:
            state = .done
            return .failed(
                .cannotConnectToHost,
                detail:
                    "\(UpstreamProxy.detailPrefix)\(proxy.host):\(proxy.port) closed the connection before answering CONNECT \(origin)"
            )
        case .done:
            preconditionFailure("UpstreamProxyHandshake.receiveEOF in state \(state)")
        }
    }

    private mutating func conclude(_ events: [HTTPPart]) -> Outcome {
        var pending = events
        while !pending.isEmpty {
            let event = pending.removeFirst()
            switch event {
            case .response(let head, _) where (100..<200).contains(head.status):
                continue
            case .response(let head, _) where (200..<300).contains(head.status):
                continue
            case .response(let head, _):
                state = .done
                return .failed(.cannotConnectToHost, detail: refusal(head))
            case .upgraded(let remaining):
                state = .done
                return .established(remaining: Array(remaining))
            case .messageEnd:
                // The end of a 1xx interim answer: the final one follows.
                pending += parser.resume()
            case .body, .trailers:
                continue
            case .failed(let error):
                state = .done
                return .failed(
                    .cannotConnectToHost,
                    detail:
                        "\(UpstreamProxy.detailPrefix)\(proxy.host):\(proxy.port) sent a malformed answer to CONNECT \(origin): \(error)"
                )
            case .request:
                preconditionFailure("a response parser produced a request head")
            }
        }
        return .needMore
    }

    private func refusal(_ head: HTTPResponseHead) -> String {
        let status = "\(head.status)\(head.reason.isEmpty ? "" : " " + head.reason)"
        let prefix = "\(UpstreamProxy.detailPrefix)\(proxy.host):\(proxy.port) answered \(status) to CONNECT \(origin)"
        guard head.status == 407 else { return prefix }
        let scheme = head.headers.first("Proxy-Authenticate").map { "; it asks for: \($0)" } ?? ""
        return
            "\(prefix): the upstream proxy wants credentials (sent \(proxy.credentialsSummary); give them in the URL's user:password@ or ATS_PROXY_UPSTREAM_PROXY_AUTH)\(scheme)"
    }
}
