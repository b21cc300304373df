import ATSTLS
import Foundation

/// The text `explain` and `diagnose` print for `--af-policy`: the policy, its scenario and, with chains, the
/// verdict on the real chain and on the interception chain, each with its one-line meaning. Pure.
public enum AFPolicyReport {
    /// The heading and the policy lines for `host` (no verdicts): what `explain` prints. Nil `spec`: no
    /// `--af-policy` matches the host.
    public static func policyLines(_ spec: AFPolicySpec?, host: String) -> [String] {
        guard let spec else { return ["App pinning (AFSecurityPolicy) for \(host): no --af-policy matches this host"] }
        let scenario = spec.policy.scenario
        var lines = [
            "App pinning (AFSecurityPolicy) for \(host) [--af-policy '\(spec.text)']:",
            "Policy : \(spec.policy.summary)",
            "Scenario : \(scenario.rawValue) (\(scenario.combination)): \(scenario.meaning)",
        ]
        if let verdict = AFTrustEvaluator.chainIndependentVerdict(spec.policy) {
            lines.append("Any chain : \(verdict.word): \(verdict.meaning(for: .real, host: host))")
        }
        return lines
    }

    /// `policyLines` plus one line per chain: `real` is the verdict on the server's chain, or the reason none was
    /// fetched; `interception` the verdict on the chain the proxy mints.
    public static func verdictLines(
        _ spec: AFPolicySpec, host: String, real: Result<AFVerdict, AFChainUnavailable>,
        interception: Result<AFVerdict, AFChainUnavailable>
    ) -> [String] {
        var lines = policyLines(spec, host: host)
        lines.append("Real chain : " + text(real, role: .real, host: host))
        lines.append("Interception chain : " + text(interception, role: .interception, host: host))
        return lines
    }

    static func text(_ result: Result<AFVerdict, AFChainUnavailable>, role: AFChainRole, host: String) -> String {
        switch result {
        case .success(let verdict): "\(verdict.word): \(verdict.meaning(for: role, host: host))"
        case .failure(let unavailable): "not evaluated: \(unavailable.reason)"
        }
    }
}

/// Why a chain could not be evaluated (the server could not be reached, the CA could not mint).
public struct AFChainUnavailable: Error, Sendable, Equatable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// The chain the proxy presents to the app for a host: a leaf minted by the proxy's CA exactly as the running
/// proxy mints it (`LeafCertificateCache`), followed by the CA.
public enum AFInterceptionChain {
    /// The leaf and the CA for `host`, minted at `now`.
    public static func mint(host: String, authority: CertificateAuthority, now: Date = Date()) throws -> [Certificate] {
        let minted = try LeafCertificateCache(authority: authority).mint(host: host, now: now)
        return [minted.certificate] + minted.chain
    }

    /// The anchors the device has while it is intercepted: `systemTrust`'s roots plus the proxy's CA, installed
    /// and trusted as a user root.
    public static func deviceTrust(
        extraAnchorFiles: [String], authority: CertificateAuthority, systemRoots: Bool = true
    ) throws -> TrustStore {
        try TrustStore(
            systemRoots: systemRoots, extraAnchorFiles: extraAnchorFiles, extraAnchors: [authority.certificate])
    }
}
