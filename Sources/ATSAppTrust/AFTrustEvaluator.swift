import ATSTLS
import Foundation

/// Decides what AFNetworking's `-[AFSecurityPolicy evaluateServerTrust:forDomain:]` (3.x and 4.x) decides for a
/// presented chain, a domain and a time, with OpenSSL standing in for `SecTrustEvaluate`. The steps, in the
/// order of AFSecurityPolicy.m:
///
/// 1. `domain && allowInvalidCertificates && validatesDomainName && (mode == None || pinnedCertificates.count == 0)`
///    → NO, logging "In order to validate a domain name for self signed certificates, you MUST use pinning."
/// 2. The policy set on the trust: `SecPolicyCreateSSL(true, domain)` when VD, else `SecPolicyCreateBasicX509()`.
/// 3. Mode None: `return allowInvalidCertificates || AFServerTrustIsValid(serverTrust)`.
///    Other modes: `if (!allowInvalidCertificates && !AFServerTrustIsValid(serverTrust)) return NO`.
///    `AFServerTrustIsValid` is `SecTrustEvaluate` with result Unspecified or Proceed: here the chain verified
///    against `systemTrust` (system roots plus user-installed ones) under that policy.
/// 4. Certificate mode: `SecTrustSetAnchorCertificates(serverTrust, pinned)` (the pinned certificates become the
///    only anchors; a pinned leaf or intermediate ends the chain), then `if (!AFServerTrustIsValid) return NO`
///    whatever AC says, then the chain of that evaluation is walked from its top (`reverseObjectEnumerator`) and
///    YES is returned for the first certificate whose DER equals a pinned certificate's DER, else NO.
/// 5. PublicKey mode: the public key of every certificate of the trust's chain (the chain of the evaluation
///    against the system's anchors; `SecTrustGetCertificateCount` evaluates if nothing has) is compared with the
///    key of every pinned certificate; YES when at least one pair is equal. No evaluation result is consulted
///    here, so with AC = YES neither trust nor validity dates nor the host name matter.
///
/// Keys are compared as DER SubjectPublicKeyInfo (iOS compares `SecKeyRef`s with `isEqual:`, the key material).
/// The SSL policy is modelled as serverAuth purpose plus a SAN host name match (iOS 13 and later ignore the common
/// name); its other iOS 13 rules (key sizes, SHA-1, validity length) are ATS's and judged elsewhere by the proxy.
public struct AFTrustEvaluator: Sendable {
    /// The anchors of step 3: the system roots and user-installed roots (for the interception chain, the proxy's
    /// CA as a user-installed root).
    public let systemTrust: TrustStore

    public init(systemTrust: TrustStore) { self.systemTrust = systemTrust }

    /// The verdict `policy` reaches before looking at any chain, if it does: step 1's refusal, or mode None
    /// with AC = YES and VD = NO, which returns YES without evaluating.
    public static func chainIndependentVerdict(_ policy: AFSecurityPolicy) -> AFVerdict? {
        if policy.allowInvalidCertificates && policy.validatesDomainName
            && (policy.mode == .none || policy.pinnedCertificates.isEmpty)
        {
            return .refused(.domainValidationNeedsPinning)
        }
        if policy.mode == .none && policy.allowInvalidCertificates { return .accepted(.withoutValidation) }
        return nil
    }

    /// The verdict of `policy` for `chain` (leaf first, as presented) and `domain` at `time`.
    public func evaluate(_ policy: AFSecurityPolicy, chain: [Certificate], domain: String, at time: Date) -> AFVerdict {
        // Step 1 (AFNetworking also checks `domain` for nil; the proxy always has a host), and None with AC = YES,
        // VD = NO, which step 3 accepts without evaluating.
        if let verdict = Self.chainIndependentVerdict(policy) { return verdict }
        // Step 2.
        let trustPolicy: TrustEvaluationPolicy = policy.validatesDomainName ? .ssl(host: domain) : .basicX509
        // Step 3.
        var systemEvaluation: ChainVerification?
        switch policy.mode {
        case .none:
            let evaluation = systemTrust.evaluate(chain: chain, policy: trustPolicy, at: time)
            return evaluation.isValid
                ? .accepted(.trustedChain(nameChecked: policy.validatesDomainName))
                : .refused(.chainNotTrusted(AFTrustFailure(issues: evaluation.issues)))
        case .publicKey, .certificate:
            if !policy.allowInvalidCertificates {
                let evaluation = systemTrust.evaluate(chain: chain, policy: trustPolicy, at: time)
                guard evaluation.isValid else {
                    return .refused(.chainNotTrusted(AFTrustFailure(issues: evaluation.issues)))
                }
                systemEvaluation = evaluation
            }
        }
        switch policy.mode {
        case .none:
            preconditionFailure("AFTrustEvaluator: mode none returned in step 3")
        case .certificate:
            // Step 4.
            let pinnedAnchors: TrustStore
            do {
                pinnedAnchors = try TrustStore(systemRoots: false, extraAnchors: policy.pinnedCertificates)
            } catch {
                return .refused(.pinnedAnchorsRejectChain(AFTrustFailure(issues: [])))
            }
            let anchored = pinnedAnchors.evaluate(chain: chain, policy: trustPolicy, at: time)
            guard anchored.isValid else {
                return .refused(.pinnedAnchorsRejectChain(AFTrustFailure(issues: anchored.issues)))
            }
            let pinned = policy.pinnedDER
            let evaluated = anchored.builtChain.isEmpty ? chain : anchored.builtChain
            for depth in evaluated.indices.reversed() where pinned.contains(evaluated[depth].derBytes) {
                return .accepted(.pinnedCertificate(depth: depth))
            }
            return .refused(.noPinnedCertificateInChain)
        case .publicKey:
            // Step 5.
            let evaluation = systemEvaluation ?? systemTrust.evaluate(chain: chain, policy: trustPolicy, at: time)
            let trustChain = evaluation.builtChain.isEmpty ? chain : evaluation.builtChain
            let pinnedKeys = Set(policy.pinnedCertificates.map(\.spkiSHA256))
            let depths = trustChain.indices.filter { pinnedKeys.contains(trustChain[$0].spkiSHA256) }
            return depths.isEmpty
                ? .refused(.noPinnedPublicKeyInChain)
                : .accepted(.pinnedPublicKey(depths: depths, trustChecked: !policy.allowInvalidCertificates))
        }
    }
}
