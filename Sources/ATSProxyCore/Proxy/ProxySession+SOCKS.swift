import ATSPolicy
import Foundation

/// SOCKS on the proxy's one port: a connection whose first byte is a SOCKS5 greeting's (0x05) negotiates with
/// `SOCKS5Negotiation`, and its CONNECT becomes the same tunnel an HTTP CONNECT opens (refusals, passthrough,
/// protocol detection, interception), granted with a SOCKS5 success reply instead of `200 Connection established`
/// and recorded with a `SOCKS5+…` route. A SOCKS4/4a request (first byte 0x04) is refused with its own reply and a
/// record that says so.
extension ProxySession {
    /// The connection's first bytes are a SOCKS5 greeting's.
    mutating func startSOCKS5(_ bytes: [UInt8]) {
        entry = .socks5
        phase = .socks(SOCKS5Negotiation(credentials: services.settings.proxyCredentials))
        socksBytes(bytes)
    }

    /// More of the SOCKS5 handshake: replies are sent as they come; a CONNECT request becomes the tunnel.
    mutating func socksBytes(_ bytes: [UInt8]) {
        guard case .socks(var negotiation) = phase else {
            preconditionFailure("ProxySession.socksBytes: phase \(phase)")
        }
        switch negotiation.feed(bytes) {
        case .needMore(let reply):
            phase = .socks(negotiation)
            if !reply.isEmpty { leg.commands.append(.writeToClient(reply)) }
        case .failed(let reply, _):
            // A handshake that names no target is a protocol error, like a malformed request head: answered (when
            // SOCKS5 has an answer for it) and closed, without a record.
            if !reply.isEmpty { leg.commands.append(.writeToClient(reply)) }
            close()
        case .connect(let target, let reply, let rest):
            if !reply.isEmpty { leg.commands.append(.writeToClient(reply)) }
            socksConnect(target, rest: rest)
        }
    }

    /// A SOCKS5 CONNECT to `target`: handled as `CONNECT host:port` (with no headers), answered with a SOCKS5 reply;
    /// `rest` (what the client sent without waiting for the reply) follows as the tunnel's first bytes.
    mutating func socksConnect(_ target: SOCKS5Target, rest: [UInt8]) {
        phase = .http
        socksReplyPending = true
        headerTimerRunning = false
        let head = HTTPRequestHead(
            method: "CONNECT", target: .authority(HTTP1Authority(host: target.host, port: target.port)),
            headers: HTTPFields())
        connect(head)
        guard !rest.isEmpty else { return }
        switch phase {
        case .detecting: detectTunnelProtocol(rest)
        case .tunnel: leg.relayFromClient(rest)
        case .clientHandshake:
            if let tls = clientTLS { continueClientHandshake(tls, rest) }
        case .socks, .http, .h2, .closed: break
        }
    }

    /// Sends a SOCKS5 failure reply with `code` when a SOCKS5 CONNECT still waits for its reply; nothing otherwise.
    mutating func refuseSOCKSTunnel(_ code: SOCKS5Reply.Code) {
        guard socksReplyPending else { return }
        socksReplyPending = false
        leg.commands.append(.writeToClient(SOCKS5Reply.bytes(code)))
    }

    /// A SOCKS4 or SOCKS4a request: refused with SOCKS4's "request rejected" reply and recorded, so the log says
    /// why the client failed and what to use instead. `bytes` are the client's first read (a SOCKS4 request is sent
    /// whole: VN, CD, DSTPORT, DSTIP, USERID, NUL, and SOCKS4a's domain name).
    mutating func refuseSOCKS4(_ bytes: [UInt8]) {
        let destination = Self.socks4Destination(bytes)
        let address = localAddress ?? "host:port"
        let text = "a SOCKS4/4a request: ats-proxy speaks SOCKS5 and HTTP on this port, not SOCKS4"
        let fix = "point the client at socks5h://\(address) (SOCKS5; the proxy resolves names) or http://\(address)"
        leg.commands.append(
            .log(
                leg.client.record(
                    task: 1, time: now, method: "CONNECT", url: "socks4://\(destination ?? "unknown")/",
                    host: destination.map { Self.hostPart($0) }, httpProtocol: "socks4", result: .refused, rule: text,
                    fix: fix, errorCode: NSURLErrorCode.cannotConnectToHost.rawValue, bytesToClient: 8,
                    route: .socks4)))
        // VN 0, CD 91 (request rejected or failed), DSTPORT and DSTIP ignored.
        leg.commands.append(.writeToClient([0x00, 0x5B, 0, 0, 0, 0, 0, 0]))
        close()
    }

    /// `host:port` a SOCKS4/4a request names, when its first read holds it: the IPv4 address, or SOCKS4a's domain
    /// name (after the user id) when the address is 0.0.0.x with x ≠ 0.
    static func socks4Destination(_ bytes: [UInt8]) -> String? {
        guard bytes.count >= 8 else { return nil }
        let port = Int(bytes[2]) << 8 | Int(bytes[3])
        let address = bytes[4..<8]
        var host = address.map(String.init).joined(separator: ".")
        if address.prefix(3).allSatisfy({ $0 == 0 }) && address.last != 0,
            let userEnd = bytes[8...].firstIndex(of: 0)
        {
            let name = bytes[(userEnd + 1)...].prefix { $0 != 0 }
            guard !name.isEmpty, name.count <= 255, name.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
            host = String(decoding: name, as: UTF8.self)
        }
        return "\(host):\(port)"
    }

    /// The host of `host:port`.
    static func hostPart(_ authority: String) -> String {
        guard let colon = authority.lastIndex(of: ":") else { return authority }
        return String(authority[..<colon])
    }
}
