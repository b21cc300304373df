/// The ten configurations of `AFSecurityPolicy` that behave differently: the three pinning modes crossed with
/// `allowInvalidCertificates` (AC) and `validatesDomainName` (VD), where combinations that AFNetworking treats
/// alike are one scenario (None with AC = YES; PublicKey with AC = YES).
///
/// Does Certificate mode with AC = YES still check expiry? Yes. In AFNetworking 3.x and 4.x,
/// `-[AFSecurityPolicy evaluateServerTrust:forDomain:]` lets AC skip only the first evaluation (the one against the
/// system's anchors: `else if (!self.allowInvalidCertificates && !AFServerTrustIsValid(serverTrust)) return NO;`).
/// The Certificate branch then calls `SecTrustSetAnchorCertificates(serverTrust, pinnedCertificates)` and
/// `if (!AFServerTrustIsValid(serverTrust)) return NO;` with no AC condition. `AFServerTrustIsValid` accepts only
/// `kSecTrustResultUnspecified` or `kSecTrustResultProceed`; Apple documents `kSecTrustResultRecoverableTrustFailure`
/// as the result for a chain that "could be trusted with some minor change to the evaluation context, such as
/// ignoring expired certificates", that is, `SecTrustEvaluate` fails an expired chain whatever its anchors. So an
/// expired (or not yet valid) certificate is refused in Certificate mode with AC = YES, and so is a host name
/// mismatch when VD = YES (the SSL policy stays set). AC = YES there only lets a chain that no system root
/// trusts (self-signed, private CA) through, provided it evaluates against the pinned certificates.
/// PublicKey mode with AC = YES is different: no evaluation result is consulted at all, so expiry, name and chain
/// are not checked; only the public keys are compared.
public enum AFScenario: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// None, AC = NO, VD = YES: `+defaultPolicy`.
    case noneDefault = 1
    /// None, AC = NO, VD = NO.
    case noneNoDomainCheck
    /// None, AC = YES (VD = NO: nothing is checked; VD = YES: every server is refused).
    case noneAllowInvalid
    /// PublicKey, AC = NO, VD = YES.
    case publicKeyStrict
    /// PublicKey, AC = NO, VD = NO.
    case publicKeyNoDomainCheck
    /// PublicKey, AC = YES, either VD.
    case publicKeyOnly
    /// Certificate, AC = NO, VD = YES.
    case certificateStrict
    /// Certificate, AC = NO, VD = NO.
    case certificateNoDomainCheck
    /// Certificate, AC = YES, VD = YES.
    case certificateAllowInvalid
    /// Certificate, AC = YES, VD = NO.
    case certificateAllowInvalidNoDomainCheck

    /// The scenario of a policy's mode, AC and VD (the pinned certificates do not change the scenario).
    public init(_ policy: AFSecurityPolicy) {
        self.init(
            mode: policy.mode, allowInvalidCertificates: policy.allowInvalidCertificates,
            validatesDomainName: policy.validatesDomainName)
    }

    /// The scenario of a mode, AC and VD.
    public init(mode: AFPinningMode, allowInvalidCertificates: Bool, validatesDomainName: Bool) {
        switch (mode, allowInvalidCertificates, validatesDomainName) {
        case (.none, false, true): self = .noneDefault
        case (.none, false, false): self = .noneNoDomainCheck
        case (.none, true, _): self = .noneAllowInvalid
        case (.publicKey, false, true): self = .publicKeyStrict
        case (.publicKey, false, false): self = .publicKeyNoDomainCheck
        case (.publicKey, true, _): self = .publicKeyOnly
        case (.certificate, false, true): self = .certificateStrict
        case (.certificate, false, false): self = .certificateNoDomainCheck
        case (.certificate, true, true): self = .certificateAllowInvalid
        case (.certificate, true, false): self = .certificateAllowInvalidNoDomainCheck
        }
    }

    /// Mode / AC / VD as the articles write them, e.g. `Certificate/NO/YES` (`*` where VD does not matter).
    public var combination: String {
        switch self {
        case .noneDefault: "None/NO/YES"
        case .noneNoDomainCheck: "None/NO/NO"
        case .noneAllowInvalid: "None/YES/*"
        case .publicKeyStrict: "PublicKey/NO/YES"
        case .publicKeyNoDomainCheck: "PublicKey/NO/NO"
        case .publicKeyOnly: "PublicKey/YES/*"
        case .certificateStrict: "Certificate/NO/YES"
        case .certificateNoDomainCheck: "Certificate/NO/NO"
        case .certificateAllowInvalid: "Certificate/YES/YES"
        case .certificateAllowInvalidNoDomainCheck: "Certificate/YES/NO"
        }
    }

    /// What the app checks in this scenario, in one line.
    public var meaning: String {
        switch self {
        case .noneDefault:
            "the default: the chain must lead to a trusted root, be within its validity dates and name the host"
        case .noneNoDomainCheck:
            "trusted root and validity dates are checked; a certificate for any host name is accepted"
        case .noneAllowInvalid:
            "with validatesDomainName = NO nothing is checked (any certificate, any MITM is accepted); with YES (the default) AFNetworking refuses every server and logs \"you MUST use pinning\""
        case .publicKeyStrict:
            "trusted root, validity dates and host name, and a public key of the chain must equal a pinned certificate's key"
        case .publicKeyNoDomainCheck:
            "trusted root and validity dates, any host name, and a public key of the chain must equal a pinned certificate's key"
        case .publicKeyOnly:
            "only the public keys are compared: an untrusted, expired or wrong-host chain passes if it carries a pinned key"
        case .certificateStrict:
            "trusted root, validity dates and host name, then the chain must evaluate with the pinned certificates as the only anchors (exact certificate match)"
        case .certificateNoDomainCheck:
            "trusted root and validity dates, then the chain must evaluate with the pinned certificates as the only anchors; any host name"
        case .certificateAllowInvalid:
            "no system root needed (self-signed or private CA), but the chain must evaluate with the pinned certificates as the only anchors, in its validity dates and for the host"
        case .certificateAllowInvalidNoDomainCheck:
            "no system root needed and any host name, but the chain must evaluate with the pinned certificates as the only anchors and be in its validity dates"
        }
    }

    public var description: String { "scenario \(rawValue) (\(combination))" }
}
