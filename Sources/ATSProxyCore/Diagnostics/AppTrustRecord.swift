/// What a request's record says about the app's own trust decisions, beside ATS's: the forged TLS its
/// connection was challenged with (`--challenge`) and the AFSecurityPolicy verdicts on the real and the
/// interception chain (`--af-policy`). Nil on records of hosts neither option names.
public struct AppTrustRecord: Sendable, Codable, Hashable {
    /// `--challenge`: the kind of unacceptable TLS the client was shown on this connection (`wrong-host`, …), and
    /// what it means that the client accepted it or what a correct client reports instead.
    public var challenge: String?
    public var challengeMeaning: String?
    /// `--af-policy`: the app's policy for the host.
    public var pinning: Pinning?

    /// The AFSecurityPolicy emulation's answer for one upstream connection.
    public struct Pinning: Sendable, Codable, Hashable {
        /// The `--af-policy` value that matched.
        public var policy: String
        /// The scenario number (1–10) of the articles and its one-line meaning.
        public var scenario: Int
        public var scenarioMeaning: String
        /// Would the app accept the real server's chain? And the chain the proxy mints?
        public var realChain: Verdict
        public var interceptionChain: Verdict

        public init(
            policy: String, scenario: Int, scenarioMeaning: String, realChain: Verdict, interceptionChain: Verdict
        ) {
            self.policy = policy
            self.scenario = scenario
            self.scenarioMeaning = scenarioMeaning
            self.realChain = realChain
            self.interceptionChain = interceptionChain
        }
    }

    /// `evaluateServerTrust:forDomain:`'s answer for one chain, with its meaning.
    public struct Verdict: Sendable, Codable, Hashable {
        public var accepted: Bool
        public var meaning: String

        public init(accepted: Bool, meaning: String) {
            self.accepted = accepted
            self.meaning = meaning
        }
    }

    public init(challenge: String? = nil, challengeMeaning: String? = nil, pinning: Pinning? = nil) {
        self.challenge = challenge
        self.challengeMeaning = challengeMeaning
        self.pinning = pinning
    }
}
