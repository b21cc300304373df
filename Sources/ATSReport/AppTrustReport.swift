/// The "App trust" section of `report.json`: per host, what the app itself decided about the servers it was
/// shown, beside ATS's verdict. Filled from records that carry `RequestRecord.appTrust`: the forged servers
/// of `--challenge` (one record per challenged connection) and the AFSecurityPolicy verdicts of
/// `--af-policy` (on the first record of each new upstream connection). Empty when neither option was given.
public struct AppTrustSection: Sendable, Codable, Equatable {
    /// One line on how to read the section.
    public var summary: String
    /// Hosts, worst first (then by name).
    public var hosts: [AppTrustHostReport]
}

/// The app-trust verdict of one host, worst first: the order hosts are sorted by.
public enum AppTrustStatus: String, Sendable, Codable, Comparable, CaseIterable {
    /// The client sent a request through at least one forged server (`--challenge`).
    case challengeFinding = "challenge-finding"
    /// The app's pinning policy refuses the real server's chain: the app would fail in production.
    case pinningRefusesRealChain = "pinning-refuses-real-chain"
    /// The app's pinning policy refuses the proxy's chain: interception breaks the app for this host.
    case pinningRefusesInterception = "pinning-refuses-interception"
    /// Every forged server was refused and the pinning policy (if any) accepts both chains.
    case pass

    /// 3 for the worst, 0 for `pass`.
    public var rank: Int {
        switch self {
        case .challengeFinding: 3
        case .pinningRefusesRealChain: 2
        case .pinningRefusesInterception: 1
        case .pass: 0
        }
    }

    public static func < (lhs: AppTrustStatus, rhs: AppTrustStatus) -> Bool { lhs.rank < rhs.rank }
}

/// Everything the session learned about the app's own trust decisions for one host.
public struct AppTrustHostReport: Sendable, Codable, Equatable {
    public var host: String
    /// The worst of the pinning verdicts and challenge results.
    public var status: AppTrustStatus
    /// The host's ATS status (as in `hosts`); nil when no request of the app to the host was judged by ATS
    /// (every connection to it was challenged).
    public var atsStatus: HostStatus?
    /// `--af-policy`'s verdicts; nil when no policy names the host.
    public var pinning: PinningSummary?
    /// `--challenge`'s results, one per kind shown, in the kinds' declaration order.
    public var challenges: [ChallengeResult]
    /// Challenged connections the client refused, and those it accepted.
    public var challengePasses: Int
    public var challengeFindings: Int
}

/// The AFSecurityPolicy emulation's decisive verdicts for one host over the session.
public struct PinningSummary: Sendable, Codable, Equatable {
    /// The `--af-policy` value that matched (the latest one seen).
    public var policy: String
    /// The scenario (1–10) and its one-line meaning.
    public var scenario: Int
    public var scenarioMeaning: String
    /// Upstream connections evaluated.
    public var evaluations: Int
    public var realChain: ChainVerdictSummary
    public var interceptionChain: ChainVerdictSummary
}

/// One chain's verdicts over the session: refused as soon as one evaluation refused it.
public struct ChainVerdictSummary: Sendable, Codable, Equatable {
    /// False when any evaluation refused the chain.
    public var accepted: Bool
    public var acceptances: Int
    public var refusals: Int
    /// The meaning of the first refusal, or of the latest acceptance when there was none.
    public var meaning: String
}

/// What the client did with one kind of forged server, over every connection that showed it.
public struct ChallengeResult: Sendable, Codable, Equatable {
    /// `pass` when every connection refused the kind, `finding` when one accepted it.
    public enum Verdict: String, Sendable, Codable {
        case pass
        case finding
    }

    /// The kind's name (`wrong-host`, `tls1.0`, …).
    public var kind: String
    /// `certificate` or `handshake`; nil for a kind this build does not know.
    public var category: String?
    /// What the proxy presented, in a few words; nil for an unknown kind.
    public var presents: String?
    public var verdict: Verdict
    public var passes: Int
    public var findings: Int
    /// For a finding, what accepting the kind says about the client (the first finding's); for a pass, how the
    /// client refused it and what a correct Apple client reports (the first pass's).
    public var meaning: String
}
