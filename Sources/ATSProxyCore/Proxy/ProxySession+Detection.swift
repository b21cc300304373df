import ATSPolicy
import ATSTLS
import Foundation

/// A CONNECT answered with 200 whose client has not yet shown what it speaks inside the tunnel.
struct TunnelDetection {
    /// The tunnel's origin as an https:// one (what interception serves); a cleartext client gets its http:// twin.
    let tunnel: InterceptedTunnel
    /// The client-side TLS engine made at CONNECT (a challenge's when `--challenge` picked the connection): the
    /// session's once the client sends TLS, dropped otherwise.
    let engine: TLSConnection
    /// The CONNECT's request source (its User-Agent), for the decisions made before any request inside.
    let source: RequestSource
    /// When the CONNECT was answered (the records of a refused or silent tunnel start there).
    let start: Date
    var sniffer = TunnelSniffer()

    /// The origin `http://host[:port]` of the same authority, for a client that speaks cleartext inside.
    func cleartextTunnel() -> InterceptedTunnel? {
        let port = tunnel.port
        let url = "http://\(RequestTarget.uriHost(tunnel.host))\(port == 80 ? "" : ":\(port)")/"
        guard let target = try? RequestTarget(parsing: url) else { return nil }
        return InterceptedTunnel(host: tunnel.host, port: port, target: target, origin: String(url.dropLast()))
    }
}

/// Protocol detection after CONNECT: the client's first bytes (within `--idle-timeout`, and what tells the protocol
/// within `--header-timeout` of the first) decide what the tunnel carries. TLS is intercepted with a minted leaf (a
/// client that then refuses it is the "does not trust the proxy CA" case); HTTP/1.x is read by the session's own
/// parser as cleartext `http://` loads, each decided by the policy like an absolute-form one; HTTP/2 with prior
/// knowledge goes to `HTTP2Frontend` the same way; anything else is refused, or relayed raw when
/// `--tunnel-unknown relay` is set and the policy allows cleartext to the host. Every tunnel that carries no
/// request is recorded with what was seen.
extension ProxySession {
    /// Bytes from a client whose protocol is not known yet.
    mutating func detectTunnelProtocol(_ bytes: [UInt8]) {
        guard case .detecting(var detection) = phase else {
            preconditionFailure("ProxySession.detectTunnelProtocol: phase \(phase)")
        }
        let verdict = detection.sniffer.feed(bytes)
        if case .needMore = verdict {
            phase = .detecting(detection)
            return
        }
        let held = detection.sniffer.takeHeld()
        switch verdict {
        case .needMore:
            preconditionFailure("ProxySession.detectTunnelProtocol: needMore was handled above")
        case .tls:
            startInterception(detection, held: held)
        case .http1:
            startCleartext(detection, held: held, http2: false)
        case .http2PriorKnowledge:
            startCleartext(detection, held: held, http2: true)
        case .unknown(let seen):
            unknownTunnel(detection, held: held, seen: "not TLS, not HTTP: \(seen)")
        }
    }

    /// The client sent a TLS record: the interception that CONNECT always led to before detection.
    mutating func startInterception(_ detection: TunnelDetection, held: [UInt8]) {
        let tls = detection.engine
        clientTLS = tls
        role = .intercepted(detection.tunnel)
        leg.route = .tunnel(entry, .tls)
        leg.delivery = .http1(encrypted: true)
        phase = .clientHandshake
        headerTimerRunning = false
        continueClientHandshake(tls, held)
    }

    /// The client sent an HTTP/1.x request line or the HTTP/2 preface in cleartext: its requests are read as loads
    /// of the tunnel's `http://` origin.
    mutating func startCleartext(_ detection: TunnelDetection, held: [UInt8], http2: Bool) {
        // A challenge tests what a client does with forged TLS: a cleartext client is not challenged.
        challenge = nil
        guard let tunnel = detection.cleartextTunnel() else { return close() }
        role = .cleartext(tunnel)
        leg.route = .tunnel(entry, http2 ? .h2c : .http)
        headerTimerRunning = false
        if http2 {
            startHTTP2()
            if case .h2 = phase { http2Bytes(held) }
        } else {
            phase = .http
            feedParser(held)
        }
    }

    /// Neither TLS nor HTTP (`seen` says what came): relayed raw when the operator asked for it and the policy
    /// allows cleartext to the host, refused otherwise; recorded either way.
    mutating func unknownTunnel(_ detection: TunnelDetection, held: [UInt8], seen: String) {
        challenge = nil
        guard let tunnel = detection.cleartextTunnel() else { return close() }
        leg.route = .tunnel(entry, .raw)
        let (decision, policy) = leg.decide(tunnel.target, source: detection.source)
        let allowed: Bool
        switch decision.outcome {
        case .cleartextAllowed: allowed = true
        case .cleartextBlocked, .https: allowed = false
        }
        let url = tunnel.origin + "/"
        switch (services.settings.tunnelUnknown, allowed) {
        case (.relay, true):
            let exchange = Exchange(
                number: requestCount + 1, start: detection.start, method: "CONNECT", url: url, target: tunnel.target,
                decision: decision, policy: policy, source: detection.source, requestHeaders: HTTPFields(),
                state: .probing, clientKeepAlive: false, requestEncoder: HTTP1RequestEncoder(framing: .none),
                rule: "\(seen); relayed raw (--tunnel-unknown relay; \(decision.ruleSummary))")
            role = .rawTunnel
            phase = .tunnel
            headerTimerRunning = false
            leg.openRawTunnel(exchange, host: tunnel.host, port: tunnel.port)
            leg.relayFromClient(held)
        case (.relay, false):
            logTunnelRefusal(
                detection, url: url, decision: decision,
                rule: "\(seen); refused: ATS does not allow cleartext to \(tunnel.host) (\(decision.ruleSummary))",
                fix: decision.fix)
            close()
        case (.refuse, _):
            logTunnelRefusal(
                detection, url: url, decision: decision, rule: "\(seen); refused (--tunnel-unknown refuse)",
                fix: allowed
                    ? "start ats-proxy with --tunnel-unknown relay to relay it (ATS allows cleartext to \(tunnel.host))"
                    : nil)
            close()
        }
    }

    /// The bounded wait is over and the client sent nothing (`--idle-timeout`), or not enough to tell
    /// (`--header-timeout` from its first byte), after the 200.
    mutating func tunnelDetectionTimedOut(_ detection: TunnelDetection) {
        let held = detection.sniffer.held
        let (seen, seconds, option) =
            held.isEmpty
            ? ("the client sent nothing", services.settings.idleTimeout, "--idle-timeout")
            : (
                "the client sent \(held.count) bytes that were neither TLS nor HTTP yet (\(TunnelSniffer.describe(held[...])))",
                services.settings.headerTimeout, "--header-timeout"
            )
        endedByProxy = "its timeout (\(option))"
        // A challenged connection's one record is its challenge's (a pass: no request came), written by `close`.
        guard challenge == nil, let tunnel = detection.cleartextTunnel() else { return close() }
        let (decision, _) = leg.decide(tunnel.target, source: detection.source)
        leg.route = .tunnel(entry, .raw)
        logTunnelRefusal(
            detection, url: tunnel.origin + "/", decision: decision,
            rule:
                "\(seen) within \(Self.seconds(seconds)) s after \(grantText) (\(option)); closed",
            fix: nil)
        close()
    }

    /// The client closed its side before its first bytes told what it speaks: a tunnel that carried nothing is
    /// closed quietly (as a handshake abandoned before any byte always was); a few undecided bytes are recorded. A
    /// challenged connection gets its challenge's record instead (a pass), from `close`.
    mutating func tunnelDetectionEnded(_ detection: TunnelDetection) {
        let held = detection.sniffer.held
        guard !held.isEmpty, challenge == nil, let tunnel = detection.cleartextTunnel() else { return close() }
        let (decision, _) = leg.decide(tunnel.target, source: detection.source)
        leg.route = .tunnel(entry, .raw)
        logTunnelRefusal(
            detection, url: tunnel.origin + "/", decision: decision,
            rule:
                "not TLS, not HTTP: the client closed its side after \(held.count) bytes (\(TunnelSniffer.describe(held[...])))",
            fix: nil)
        close()
    }

    /// The one record of a tunnel that carried no request: the CONNECT, failed, with what was seen.
    mutating func logTunnelRefusal(
        _ detection: TunnelDetection, url: String, decision: ATSDecision, rule: String, fix: String?
    ) {
        leg.commands.append(
            .log(
                leg.client.record(
                    task: requestCount + 1, time: detection.start, method: "CONNECT", url: url,
                    host: detection.tunnel.host, source: detection.source, result: .failed, decision: decision,
                    rule: rule, fix: fix,
                    status: 200, durationMilliseconds: now.timeIntervalSince(detection.start) * 1000,
                    route: leg.route)))
    }

    /// What the client was told when its tunnel opened, for log lines.
    var grantText: String {
        switch entry {
        case .httpConnect, .tlsConnect: "200 Connection established"
        case .socks5: "the SOCKS5 success reply"
        }
    }

    /// `30` for 30.0, `0.5` for 0.5.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
