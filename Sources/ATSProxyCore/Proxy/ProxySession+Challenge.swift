import ATSPolicy
import ATSTLS
import Foundation

/// `--challenge`: a CONNECT the rotation picks is intercepted with deliberately unacceptable TLS instead of the
/// proxy's normal leaf, and the connection's `ChallengeProbe` decides what the client did with it: a refused
/// handshake (or a close before any request) is a pass; a request through it is a finding, answered 502 and never
/// forwarded. Each challenged connection gets one record, a pass or the finding.
extension ProxySession {
    /// The client-side engine for an intercepted CONNECT to `host`: a challenge's when the rotation picks this
    /// connection (`challenge` is set), the normal minted leaf's otherwise.
    mutating func clientEngine(forConnectTo host: String) throws -> TLSConnection {
        if let appTrust = services.appTrust, let challenged = try appTrust.challenge(host: host) {
            challenge = ChallengeProbe(host: host, kind: challenged.kind)
            return challenged.engine
        }
        return try services.serverTLS.makeConnection(connectHost: host)
    }

    /// The client refused the challenged handshake: the pass is recorded.
    mutating func challengeHandshakeFailed(_ failure: TLSFailure) {
        guard var probe = challenge else { return }
        let outcome = probe.handshakeFailed(failure)
        challenge = probe
        logChallenge(outcome, request: nil, bytesToClient: 0)
    }

    /// A request arrived through the challenged connection: the finding is recorded and answered with 502, and
    /// the connection closes (nothing of it reaches an origin).
    mutating func challengeAccepted(_ head: HTTPRequestHead) {
        guard var probe = challenge else { return }
        let outcome = probe.requestReceived()
        challenge = probe
        let body =
            "ats-proxy: challenge \(outcome.kind) (--challenge): this connection presented \(outcome.kind.presents) and the client accepted it; the request was not forwarded. \(outcome.meaning)\n"
        logChallenge(outcome, request: head, bytesToClient: body.utf8.count)
        answerLocally(status: 502, reason: "Bad Gateway", body: body, keepAlive: false)
    }

    /// The connection ends before any verdict: a close during the handshake or before a request is a pass; request
    /// bytes that never became a whole head (malformed, or cut short by the header timeout or the client's close)
    /// went through the forged server all the same, and are the finding.
    mutating func challengeConnectionEnded() {
        guard var probe = challenge, probe.outcome == nil else { return }
        // After the handshake the parser reads only what the client sent through the challenged connection.
        if case .established = probe.state, !parser.isIdle {
            let outcome = probe.requestReceived()
            challenge = probe
            return logPartialRequestFinding(outcome)
        }
        let outcome = probe.clientClosed()
        challenge = probe
        logChallenge(outcome, request: nil, bytesToClient: 0)
    }

    /// What a pass recorded at a close the proxy made means: only that the client sent nothing before it.
    var passNote: String? {
        endedByProxy.map {
            "but it was the proxy that ended the connection (\($0)) before the client went on or gave up: this pass only says the client sent no request until then"
        }
    }

    /// What a finding means given ATS's decision for the host: where ATS is in force, URLSession re-runs the
    /// system's trust evaluation after the app's delegate accepts (and refuses), so an accepting client is not
    /// URLSession under ATS; where it is not, the app's own evaluation is the only protection.
    static func atsContext(_ decision: ATSDecision, host: String) -> String {
        decision.atsRequired
            ? "ATS is in force for \(host) (\(decision.ruleSummary)), and URLSession refuses such a server whatever the app's delegate answers: the client that accepted it is not URLSession under ATS (a TLS stack of its own, such as an OpenSSL- or BoringSSL-based library)"
            : "ATS is not in force for \(host) (\(decision.ruleSummary)): the app's own trust evaluation is all that protects these connections"
    }

    /// The one record of a challenged connection. A pass is the CONNECT's (numbered like a refused handshake's);
    /// a finding is the request's.
    mutating func logChallenge(_ outcome: ChallengeOutcome, request head: HTTPRequestHead?, bytesToClient: Int) {
        guard let tunnel = role.tunnel else { return }
        let appTrust = AppTrustRecord(challenge: outcome.kind.rawValue, challengeMeaning: outcome.meaning)
        let source = head.map { leg.requestSource($0) } ?? .urlsession
        let (decision, _) = leg.decide(tunnel.target, source: source)
        let record: RequestRecord
        if let head {
            var path = ""
            if case .origin(let origin) = head.target { path = origin }
            record = leg.client.record(
                task: requestCount, time: now, method: head.method, url: tunnel.url(path: path.isEmpty ? "/" : path),
                host: tunnel.host, source: source, result: .challengeAccepted, decision: decision,
                rule: outcome.meaning + "; " + Self.atsContext(decision, host: tunnel.host),
                status: 502, requestHeaders: head.headers.fields, bytesToClient: bytesToClient,
                appTrust: appTrust, route: .tunnel(entry, .tls))
        } else {
            record = leg.client.record(
                task: requestCount + 1, time: now, method: "CONNECT",
                url: "https://\(RequestTarget.uriHost(tunnel.host)):\(tunnel.port)/", host: tunnel.host, source: source,
                result: .challengeRefused, decision: decision,
                rule: passNote.map { outcome.meaning + "; " + $0 } ?? outcome.meaning, appTrust: appTrust,
                route: .tunnel(entry, .tls))
        }
        leg.commands.append(.log(record))
    }

    /// The finding of a challenged connection whose client sent request bytes that never became a whole head: no
    /// method or target to record (`-` and the tunnel's origin), no status of the proxy's (the client got the
    /// 400 or 408 of a malformed or late head, or nothing), numbered as the next task.
    mutating func logPartialRequestFinding(_ outcome: ChallengeOutcome) {
        guard let tunnel = role.tunnel else { return }
        requestCount += 1
        let (decision, _) = leg.decide(tunnel.target, source: .urlsession)
        leg.commands.append(
            .log(
                leg.client.record(
                    task: requestCount, time: now, method: "-", url: tunnel.url(path: "/"), host: tunnel.host,
                    result: .challengeAccepted, decision: decision,
                    rule: outcome.meaning + "; " + Self.atsContext(decision, host: tunnel.host),
                    appTrust: AppTrustRecord(challenge: outcome.kind.rawValue, challengeMeaning: outcome.meaning),
                    route: .tunnel(entry, .tls))))
    }
}
