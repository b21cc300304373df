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
///
/// A value type: the target plus a verdict in one shared, immutable storage object, so that copying a
/// decision (every proxied request carries one) or retargeting a cached one to a new path costs a few
/// reference counts, not one per string and list in it. Equality, hashing and the Codable form are those
/// of a plain struct of the properties.
@dynamicMemberLookup
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

    /// The URL decided (the one part that differs between the requests of one host).
    public let target: RequestTarget
    /// Everything else, shared by every copy and by every `retargeted` twin.
    @usableFromInline let verdict: Verdict

    /// The verdict's fields, stored once and shared. Read them on the decision itself (`decision.outcome`,
    /// through `subscript(dynamicMember:)`).
    public struct Fields: Sendable, Hashable, Codable {
        /// The kind of request (URLSession, WebKit, media) the decision is for.
        public let source: RequestSource
        /// The emulated platform.
        public let platform: Platform
        /// What happens to the load.
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
    }

    /// Immutable: one per evaluation, shared by the decisions made from it.
    @usableFromInline final class Verdict: Sendable {
        @usableFromInline let fields: Fields
        /// The rule chain's sentences, made once (every request's log record lists them).
        let ruleTexts: [String]
        init(_ fields: Fields) {
            self.fields = fields
            ruleTexts = fields.ruleChain.map(\.text)
        }
    }

    init(target: RequestTarget, _ fields: Fields) {
        self.target = target
        verdict = Verdict(fields)
    }

    private init(target: RequestTarget, verdict: Verdict) {
        self.target = target
        self.verdict = verdict
    }

    /// Every field of the verdict.
    @inlinable public subscript<Value>(dynamicMember field: Swift.KeyPath<Fields, Value>) -> Value {
        verdict.fields[keyPath: field]
    }

    /// The sentences of `ruleChain`, in order.
    public var ruleTexts: [String] { verdict.ruleTexts }

    /// The same decision for another URL with the same scheme, host, port and source (a cached
    /// decision reused for a new path). Shares the verdict: nothing but the target is copied.
    public func retargeted(_ other: RequestTarget) -> ATSDecision {
        ATSDecision(target: other, verdict: verdict)
    }

    public static func == (lhs: ATSDecision, rhs: ATSDecision) -> Bool {
        lhs.target == rhs.target && (lhs.verdict === rhs.verdict || lhs.verdict.fields == rhs.verdict.fields)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(target)
        hasher.combine(verdict.fields)
    }

    private enum TargetKey: String, CodingKey { case target }

    /// The same keyed form as a plain struct of these properties: `target` beside the verdict's fields.
    public init(from decoder: any Decoder) throws {
        target = try decoder.container(keyedBy: TargetKey.self).decode(RequestTarget.self, forKey: .target)
        verdict = Verdict(try Fields(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: TargetKey.self)
        try container.encode(target, forKey: .target)
        try verdict.fields.encode(to: encoder)
    }

    /// True when the load is blocked by policy alone (cleartext); HTTPS verdicts need a handshake.
    public var isBlocked: Bool { self.outcome == .cleartextBlocked }

    /// -1022 for a blocked cleartext load.
    public var block: ATSBlock? {
        self.outcome == .cleartextBlocked
            ? ATSBlock(error: .appTransportSecurityRequiresSecureConnection, streamDomain: nil, streamCode: nil) : nil
    }

    /// One line naming the rule that decided, for headers such as `X-ATS-Rule`: for a blocked
    /// cleartext load the step that made ATS required (the last step only restates the block).
    public var ruleSummary: String {
        switch self.outcome {
        case .cleartextBlocked: return self.ruleChain.dropLast().last?.text ?? self.ruleChain.last?.text ?? ""
        case .cleartextAllowed, .https: return self.ruleChain.last?.text ?? ""
        }
    }
}
