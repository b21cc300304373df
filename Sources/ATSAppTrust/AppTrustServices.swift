import ATSPolicy
import ATSProxyCore
import ATSTLS
import Foundation

/// What the proxy needs to test the app's own trust decisions while it runs: the forged servers of
/// `--challenge` (which connections get one, and the TLS contexts that present them) and the app's
/// AFSecurityPolicy of `--af-policy` (evaluated on every new upstream chain of a host it names, and on the chain
/// the proxy mints for that host). The core reaches it as its `AppTrustProvider`. Immutable and thread-safe; nil in
/// `ProxyServices` when neither is given.
public final class AppTrustServices: AppTrustProvider {
    /// `--challenge`: which client connections are challenged, and with what.
    public let challenges: ChallengeRotation?
    public let challengeContexts: ChallengeTLSContexts?
    /// `--af-policy`, first match wins.
    public let pinningPolicies: [AFPolicySpec]
    /// The app's anchors for the real chain (system roots, `--upstream-ca`) and, while intercepted, for the
    /// proxy's chain (the same plus the proxy's CA, installed and trusted on the device).
    let realTrust: AFTrustEvaluator
    let interceptionTrust: AFTrustEvaluator
    /// Where the interception chain of a host comes from: the proxy's own leaf cache.
    let leaves: LeafCertificateCache

    public init(
        challenges: ChallengeRotation?, challengeContexts: ChallengeTLSContexts?, pinningPolicies: [AFPolicySpec],
        realTrust: TrustStore, interceptionTrust: TrustStore, leaves: LeafCertificateCache
    ) {
        self.challenges = challenges
        self.challengeContexts = challengeContexts
        self.pinningPolicies = pinningPolicies
        self.realTrust = AFTrustEvaluator(systemTrust: realTrust)
        self.interceptionTrust = AFTrustEvaluator(systemTrust: interceptionTrust)
        self.leaves = leaves
    }

    /// The challenge (if any) the next client connection to `host` gets, with the engine presenting it. Nil for
    /// a normal connection.
    public func challenge(host: String) throws -> (kind: ChallengeKind, engine: TLSConnection)? {
        guard let challenges, let challengeContexts else { return nil }
        switch challenges.assign(host: host) {
        case .normal: return nil
        case .challenge(let kind): return (kind, try challengeContexts.makeConnection(connectHost: host, kind: kind))
        }
    }

    /// The app's AFSecurityPolicy verdicts for `host`: on the chain the origin presented (`realChain`, leaf
    /// first) and on the chain the proxy presents to the app for that host. Nil when no `--af-policy` names it.
    public func pinning(host: String, realChain: [Certificate], at time: Date) -> AppTrustRecord.Pinning? {
        guard let spec = AFPolicySpec.first(pinningPolicies, matching: host) else { return nil }
        let real = realTrust.evaluate(spec.policy, chain: realChain, domain: host, at: time)
        let interception: AppTrustRecord.Verdict
        do {
            let minted = try leaves.leaf(for: host)
            let verdict = interceptionTrust.evaluate(
                spec.policy, chain: [minted.certificate] + minted.chain, domain: host, at: time)
            interception = Self.verdict(verdict, role: .interception, host: host)
        } catch {
            interception = AppTrustRecord.Verdict(
                accepted: false, meaning: "not evaluated: the proxy could not mint its leaf for \(host) (\(error))")
        }
        let scenario = spec.policy.scenario
        return AppTrustRecord.Pinning(
            policy: spec.text, scenario: scenario.rawValue, scenarioMeaning: scenario.meaning,
            realChain: Self.verdict(real, role: .real, host: host), interceptionChain: interception)
    }

    /// Whether any `--af-policy` is set.
    public var evaluatesPinning: Bool { !pinningPolicies.isEmpty }

    static func verdict(_ verdict: AFVerdict, role: AFChainRole, host: String) -> AppTrustRecord.Verdict {
        AppTrustRecord.Verdict(accepted: verdict.isAccepted, meaning: verdict.meaning(for: role, host: host))
    }
}
