/// One step of the reasoning behind a decision: which key or fact applied, in plain words.
public struct RuleStep: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The Info.plist key path the step is about, when it is about a key.
    public let keyPath: KeyPath?
    /// The sentence a developer reads.
    public let text: String

    public init(_ text: String, keyPath: KeyPath? = nil) {
        self.text = text
        self.keyPath = keyPath
    }

    public var description: String { text }
}

/// How a local host was recognised (reference §2.5).
public enum LocalHostKind: String, Sendable, Codable {
    /// A name without dots, such as `localhost` or `devbox`.
    case unqualifiedName = "unqualified name"
    /// A name in `.local` (Bonjour).
    case dotLocal = ".local name"
    /// An IP literal inside one of the local networks.
    case localAddress = "local IP address"
    /// Any IP literal, on OS versions that exempt all of them (iOS 10–16 or an older SDK).
    case anyAddress = "IP address"
}

/// The NSURLErrorDomain error a blocked load reports.
public struct ATSBlock: Sendable, Hashable, Codable {
    public let error: NSURLErrorCode
    /// The stream error pair, e.g. (3, -9802); nil for -1022, which never reaches the network.
    public let streamDomain: Int?
    public let streamCode: Int?
}

/// The answer to "what would ATS do with this URL for this app?".
public struct ATSDecision: Sendable, Hashable, Codable {
    /// What happens to the load.
    public enum Outcome: Sendable, Hashable, Codable {
        /// A cleartext load that ATS allows.
        case cleartextAllowed
        /// A cleartext load that ATS blocks with -1022 before any byte is sent.
        case cleartextBlocked
        /// An HTTPS load; the requirements say whether ATS governs it and what it demands.
        case https
    }

    public let target: RequestTarget
    public let source: RequestSource
    public let platform: Platform
    public let outcome: Outcome
    /// Whether ATS is in force for this host (§2.3 `atsRequired`).
    public let atsRequired: Bool
    /// For HTTPS (and for cleartext, what an https:// upgrade would need).
    public let requirements: TLSRequirements
    /// The matched NSExceptionDomains key, if any.
    public let exceptionKey: String?
    /// Why the host counts as local, if it does.
    public let localHost: LocalHostKind?
    /// The reasoning, in order.
    public let ruleChain: [RuleStep]
    /// For a blocked load: the smallest Info.plist change that allows it.
    public let fix: String?
    /// App Review: keys on the decision path that need a justification.
    public let justificationKeys: [String]

    /// The same decision for another URL with the same scheme, host, port and source (a cached
    /// decision reused for a new path).
    public func retargeted(_ other: RequestTarget) -> ATSDecision {
        guard other.url != target.url else { return self }
        return ATSDecision(
            target: other, source: source, platform: platform, outcome: outcome, atsRequired: atsRequired,
            requirements: requirements, exceptionKey: exceptionKey, localHost: localHost, ruleChain: ruleChain,
            fix: fix,
            justificationKeys: justificationKeys)
    }

    /// True when the load is blocked by policy alone (cleartext); HTTPS verdicts need a handshake.
    public var isBlocked: Bool { outcome == .cleartextBlocked }

    /// -1022 for a blocked cleartext load.
    public var block: ATSBlock? {
        outcome == .cleartextBlocked
            ? ATSBlock(error: .appTransportSecurityRequiresSecureConnection, streamDomain: nil, streamCode: nil) : nil
    }

    /// One line naming the rule that decided, for headers such as `X-ATS-Rule`: for a blocked
    /// cleartext load the step that made ATS required (the last step only restates the block).
    public var ruleSummary: String {
        switch outcome {
        case .cleartextBlocked: return ruleChain.dropLast().last?.text ?? ruleChain.last?.text ?? ""
        case .cleartextAllowed, .https: return ruleChain.last?.text ?? ""
        }
    }
}
