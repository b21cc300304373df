/// How one challenged connection ended, and what that says about the client.
public struct ChallengeOutcome: Sendable, Hashable, CustomStringConvertible {
    /// What the client did with the challenge.
    public enum Result: Sendable, Hashable {
        /// Pass: the client aborted the handshake (the failure as the proxy's engine saw it: usually
        /// a fatal alert such as unknown_ca or protocol_version, or a close without one).
        case refusedHandshake(TLSFailure.Reason)
        /// Pass: the client completed the handshake but closed without sending a request (clients
        /// that verify after the handshake, such as an AFSecurityPolicy refusing in its delegate).
        case closedWithoutRequest
        /// Finding: the client sent a request through the challenged connection.
        case sentRequest
    }

    /// The host the client asked for (SNI or CONNECT host).
    public let host: String
    public let kind: ChallengeKind
    public let result: Result

    public init(host: String, kind: ChallengeKind, result: Result) {
        self.host = host
        self.kind = kind
        self.result = result
    }

    /// True when the client accepted the challenge.
    public var isFinding: Bool {
        switch result {
        case .sentRequest: true
        case .refusedHandshake, .closedWithoutRequest: false
        }
    }

    /// The one-line meaning: for a finding, what accepting this kind says about the client's trust
    /// evaluation; for a pass, how the client refused and what a correct Apple client reports.
    public var meaning: String {
        switch result {
        case .sentRequest:
            return kind.acceptanceMeaning
        case .refusedHandshake(let reason):
            return "the client refused \(kind.presents) during the handshake (\(Self.text(reason))), as it should; "
                + "an ATS client reports \(kind.atsRefusal)"
        case .closedWithoutRequest:
            return "the client completed the handshake with \(kind.presents) but closed without sending a request, "
                + "as a client that evaluates trust after the handshake does; an ATS client reports \(kind.atsRefusal)"
        }
    }

    private static func text(_ reason: TLSFailure.Reason) -> String {
        switch reason {
        case .receivedAlert(let alert): "it sent the alert \(TLSAlert.name(alert))"
        case .noCommonVersion: "no protocol version in common"
        case .noCommonCipher: "no cipher suite in common"
        case .notTLS: "it sent bytes that are not TLS"
        case .closedWithoutAlert: "it closed the connection without an alert"
        case .resetDuringHandshake: "it reset the connection"
        case .badCertificate: "a certificate error"
        case .other: "a TLS error"
        }
    }

    /// `host kind: PASS|FINDING — meaning`.
    public var description: String { "\(host) \(kind): \(isFinding ? "FINDING" : "PASS") — \(meaning)" }
}

/// Follows one challenged connection from its first byte to its verdict: a sans-io state machine the
/// driver feeds with what happened on the client side. It decides once: a handshake failure or a close
/// before any request is a pass, a request is a finding; later events return the decided outcome.
///
/// Events out of order (a completed handshake twice, a request before the handshake) are the driver's
/// bug and trap, naming the state.
public struct ChallengeProbe: Sendable {
    /// Where the connection is.
    public enum State: Sendable, Hashable {
        /// The client-side handshake is running.
        case handshaking
        /// The handshake completed; no request yet.
        case established
        /// The verdict is in.
        case decided(ChallengeOutcome)
    }

    public let host: String
    public let kind: ChallengeKind
    public private(set) var state: State = .handshaking

    public init(host: String, kind: ChallengeKind) {
        self.host = host
        self.kind = kind
    }

    /// The verdict, once there is one.
    public var outcome: ChallengeOutcome? {
        switch state {
        case .handshaking, .established: nil
        case .decided(let outcome): outcome
        }
    }

    /// The client aborted the handshake: a pass.
    public mutating func handshakeFailed(_ failure: TLSFailure) -> ChallengeOutcome {
        switch state {
        case .handshaking: return decide(.refusedHandshake(failure.reason))
        case .established, .decided: preconditionFailure("ChallengeProbe.handshakeFailed in state \(state)")
        }
    }

    /// The client completed the handshake: no verdict yet.
    public mutating func handshakeCompleted() {
        switch state {
        case .handshaking: state = .established
        case .established, .decided: preconditionFailure("ChallengeProbe.handshakeCompleted in state \(state)")
        }
    }

    /// The client sent (the start of) a request: a finding.
    public mutating func requestReceived() -> ChallengeOutcome {
        switch state {
        case .established: return decide(.sentRequest)
        case .decided(let outcome) where outcome.isFinding: return outcome
        case .handshaking, .decided: preconditionFailure("ChallengeProbe.requestReceived in state \(state)")
        }
    }

    /// The client closed (or reset) the connection. Before the handshake completed this is a refused
    /// handshake; after it, without a request, a pass; after a verdict it changes nothing.
    public mutating func clientClosed() -> ChallengeOutcome {
        switch state {
        case .handshaking: return decide(.refusedHandshake(.closedWithoutAlert))
        case .established: return decide(.closedWithoutRequest)
        case .decided(let outcome): return outcome
        }
    }

    private mutating func decide(_ result: ChallengeOutcome.Result) -> ChallengeOutcome {
        let outcome = ChallengeOutcome(host: host, kind: kind, result: result)
        state = .decided(outcome)
        return outcome
    }
}

/// The challenge results of a run, per (host, kind): a finding as soon as one connection accepted the
/// kind, a pass when every connection refused it. A value; the owner serializes access.
public struct ChallengeLedger: Sendable, Hashable {
    /// The verdict for one (host, kind).
    public struct Entry: Sendable, Hashable {
        public let host: String
        public let kind: ChallengeKind
        /// Connections that refused the kind.
        public var passes = 0
        /// Connections that accepted it.
        public var findings = 0
        /// The outcome that decides the verdict: the first finding, else the first pass.
        public var decisive: ChallengeOutcome

        /// A finding when any connection accepted the kind.
        public var isFinding: Bool { findings > 0 }
        /// The one-line meaning of the verdict.
        public var meaning: String { decisive.meaning }
    }

    private var entries: [String: [ChallengeKind: Entry]] = [:]

    public init() {}

    /// Adds one connection's outcome.
    public mutating func record(_ outcome: ChallengeOutcome) {
        var entry =
            entries[outcome.host]?[outcome.kind]
            ?? Entry(host: outcome.host, kind: outcome.kind, decisive: outcome)
        if outcome.isFinding {
            if entry.findings == 0 { entry.decisive = outcome }
            entry.findings += 1
        } else {
            entry.passes += 1
        }
        entries[outcome.host, default: [:]][outcome.kind] = entry
    }

    /// Every (host, kind) seen, hosts in name order, kinds in `ChallengeKind.allCases` order.
    public var results: [Entry] {
        entries.keys.sorted().flatMap { host in
            ChallengeKind.allCases.compactMap { entries[host]?[$0] }
        }
    }

    /// The entries that are findings.
    public var findings: [Entry] { results.filter(\.isFinding) }
}
