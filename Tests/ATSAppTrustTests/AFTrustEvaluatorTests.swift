import ATSAppTrust
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// The chains of the table, minted with the tests' PKI (`TestPKI`: a trusted root, its intermediate, a root
/// nobody trusts). "The system" is `TestPKI.trust`: the test root as the only anchor.
enum AFChains {
    static let host = TestPKI.host
    static let now = TestPKI.now
    /// K1: the key of the server's leaf (and of every "same key" certificate).
    static let serverKey = TestPKI.ecKey
    /// K2: another key.
    static let otherKey = try! PrivateKey.generate(.p256)

    /// A compliant leaf for the host, key K1, from the trusted intermediate.
    static let leaf = TestPKI.leaf(TestPKI.leafSpec())
    /// The same host, key and issuer, re-issued (another serial and validity): same key, other DER.
    static let reissuedLeaf: Certificate = {
        var spec = TestPKI.leafSpec()
        spec.notBefore = now.addingTimeInterval(-7200)
        spec.notAfter = now.addingTimeInterval(300 * 86400)
        return TestPKI.leaf(spec)
    }()
    /// A leaf for another host (key K1, trusted issuer).
    static let wrongHostLeaf = TestPKI.leaf(TestPKI.leafSpec("other.test"))
    /// A leaf past its notAfter (key K1, trusted issuer).
    static let expiredLeaf: Certificate = {
        var spec = TestPKI.leafSpec()
        spec.notBefore = now.addingTimeInterval(-40 * 86400)
        spec.notAfter = now.addingTimeInterval(-86400)
        return TestPKI.leaf(spec)
    }()
    /// A self-signed leaf for the host (key K1).
    static let selfSignedLeaf: Certificate = {
        try! CertificateMinter.mint(TestPKI.leafSpec(), subjectKey: serverKey, issuer: nil, issuerKey: serverKey)
    }()
    /// A self-signed certificate of another name carrying K1: a key pin made from the server's key.
    static let keyPinCertificate: Certificate = {
        var spec = TestPKI.leafSpec("pin.invalid")
        spec.commonName = "K1 pin"
        return try! CertificateMinter.mint(spec, subjectKey: serverKey, issuer: nil, issuerKey: serverKey)
    }()
    /// A leaf for the host with key K2 from the trusted intermediate.
    static let otherKeyLeaf = TestPKI.leaf(TestPKI.leafSpec(), key: otherKey)

    /// The trusted leaf as the server sends it.
    static let validChain = [leaf, TestPKI.intermediate]
}

/// One column of the table: a presented chain and the certificates the app pins.
enum AFChainCase: String, CaseIterable, CustomStringConvertible {
    /// The trusted chain; the leaf itself is pinned.
    case validChain
    /// A trusted chain for other.test; its leaf is pinned.
    case wrongHost
    /// A chain whose leaf has expired; that leaf is pinned.
    case expiredLeaf
    /// A self-signed leaf for the host; it is pinned (the classic self-signed setup).
    case selfSignedLeaf
    /// The trusted chain; pinned: a self-signed certificate of another name carrying the leaf's key.
    case pinnedKeyMatch
    /// The trusted chain; pinned: a leaf for the host with another key.
    case pinnedKeyMismatch
    /// The trusted chain; pinned: the root (not sent by the server, but in the evaluated chain).
    case pinnedCertificateExactMatch
    /// The trusted chain; pinned: the leaf re-issued with the same key (same key, different DER).
    case pinnedCertificateMismatch

    var description: String { rawValue }

    var chain: [Certificate] {
        switch self {
        case .validChain, .pinnedKeyMatch, .pinnedKeyMismatch, .pinnedCertificateExactMatch, .pinnedCertificateMismatch:
            AFChains.validChain
        case .wrongHost: [AFChains.wrongHostLeaf, TestPKI.intermediate]
        case .expiredLeaf: [AFChains.expiredLeaf, TestPKI.intermediate]
        case .selfSignedLeaf: [AFChains.selfSignedLeaf]
        }
    }

    var pins: [Certificate] {
        switch self {
        case .validChain: [AFChains.leaf]
        case .wrongHost: [AFChains.wrongHostLeaf]
        case .expiredLeaf: [AFChains.expiredLeaf]
        case .selfSignedLeaf: [AFChains.selfSignedLeaf]
        case .pinnedKeyMatch: [AFChains.keyPinCertificate]
        case .pinnedKeyMismatch: [AFChains.otherKeyLeaf]
        case .pinnedCertificateExactMatch: [TestPKI.root]
        case .pinnedCertificateMismatch: [AFChains.reissuedLeaf]
        }
    }
}

/// The outcome classes of `evaluateServerTrust:forDomain:`, one per `return` of AFSecurityPolicy.m.
enum AFOutcome: String, CustomStringConvertible {
    /// YES without evaluation (None, AC = YES).
    case acceptWithoutValidation
    /// YES from `AFServerTrustIsValid` (None, AC = NO).
    case acceptTrusted
    /// YES: Certificate mode found a pinned certificate in the evaluated chain.
    case acceptPinnedCertificate
    /// YES: PublicKey mode found a pinned key.
    case acceptPinnedKey
    /// NO before anything ("you MUST use pinning").
    case refuseNeedsPinning
    /// NO: the evaluation against the system's anchors failed.
    case refuseUntrusted
    /// NO: the evaluation with the pinned certificates as the only anchors failed.
    case refusePinnedAnchors
    /// NO: no pinned public key in the chain.
    case refuseNoKey

    var description: String { rawValue }

    init(_ verdict: AFVerdict) {
        switch verdict {
        case .accepted(.withoutValidation): self = .acceptWithoutValidation
        case .accepted(.trustedChain): self = .acceptTrusted
        case .accepted(.pinnedCertificate): self = .acceptPinnedCertificate
        case .accepted(.pinnedPublicKey): self = .acceptPinnedKey
        case .refused(.domainValidationNeedsPinning): self = .refuseNeedsPinning
        case .refused(.chainNotTrusted): self = .refuseUntrusted
        case .refused(.pinnedAnchorsRejectChain): self = .refusePinnedAnchors
        case .refused(.noPinnedCertificateInChain): preconditionFailure("no table case reaches the DER comparison's NO")
        case .refused(.noPinnedPublicKeyInChain): self = .refuseNoKey
        }
    }
}

/// One row of the table: mode, AC, VD, and the expected outcome for each chain case, in `AFChainCase` order.
struct AFPolicyRow: CustomStringConvertible, Sendable {
    let mode: AFPinningMode
    let allowInvalid: Bool
    let validatesDomain: Bool
    let scenario: AFScenario
    let expected: [AFOutcome]

    var description: String {
        "\(mode.rawValue)/AC=\(allowInvalid ? "YES" : "NO")/VD=\(validatesDomain ? "YES" : "NO")"
    }
}

extension AFOutcome: Sendable {}

/// Every expected value below follows from AFSecurityPolicy.m (AFNetworking 3.x/4.x), read step by step:
/// (1) `if (domain && AC && VD && (mode == None || pinnedCertificates.count == 0)) return NO;`
/// (2) policy = VD ? SecPolicyCreateSSL(true, domain) : SecPolicyCreateBasicX509();
/// (3) None: `return AC || AFServerTrustIsValid(serverTrust);` others: `if (!AC && !AFServerTrustIsValid) return NO;`
/// (4) Certificate: anchors := pinned; `if (!AFServerTrustIsValid) return NO;` (no AC condition: expiry and, with VD,
///     the name are checked again); then YES if a certificate of the evaluated chain is byte-equal to a pinned one.
/// (5) PublicKey: YES if a key of the trust's chain equals a pinned certificate's key; no evaluation result is read.
@Suite("AFSecurityPolicy emulation: ten scenarios × eight chains")
struct AFTrustEvaluatorTests {
    typealias O = AFOutcome

    // Columns: validChain, wrongHost, expiredLeaf, selfSignedLeaf, pinnedKeyMatch, pinnedKeyMismatch,
    //          pinnedCertificateExactMatch, pinnedCertificateMismatch.
    static let rows: [AFPolicyRow] = [
        // Scenario 1, None/NO/YES: step 3, AFServerTrustIsValid with the SSL policy (name, expiry, root); pins unused.
        AFPolicyRow(
            mode: .none, allowInvalid: false, validatesDomain: true, scenario: .noneDefault,
            expected: [
                .acceptTrusted, .refuseUntrusted, .refuseUntrusted, .refuseUntrusted, .acceptTrusted, .acceptTrusted,
                .acceptTrusted, .acceptTrusted,
            ]),
        // Scenario 2, None/NO/NO: step 3 with the basic X.509 policy: the wrong host passes, expiry and root do not.
        AFPolicyRow(
            mode: .none, allowInvalid: false, validatesDomain: false, scenario: .noneNoDomainCheck,
            expected: [
                .acceptTrusted, .acceptTrusted, .refuseUntrusted, .refuseUntrusted, .acceptTrusted, .acceptTrusted,
                .acceptTrusted, .acceptTrusted,
            ]),
        // Scenario 3 with VD = NO: step 3 returns AC = YES before evaluating: everything passes.
        AFPolicyRow(
            mode: .none, allowInvalid: true, validatesDomain: false, scenario: .noneAllowInvalid,
            expected: Array(repeating: .acceptWithoutValidation, count: 8)),
        // Scenario 3 with VD = YES: step 1 (mode None) refuses every chain.
        AFPolicyRow(
            mode: .none, allowInvalid: true, validatesDomain: true, scenario: .noneAllowInvalid,
            expected: Array(repeating: .refuseNeedsPinning, count: 8)),
        // Scenario 4, PublicKey/NO/YES: step 3 (SSL policy) must pass, then step 5 compares keys (K1 or the root's).
        AFPolicyRow(
            mode: .publicKey, allowInvalid: false, validatesDomain: true, scenario: .publicKeyStrict,
            expected: [
                .acceptPinnedKey, .refuseUntrusted, .refuseUntrusted, .refuseUntrusted, .acceptPinnedKey, .refuseNoKey,
                .acceptPinnedKey, .acceptPinnedKey,
            ]),
        // Scenario 5, PublicKey/NO/NO: as 4 with the basic policy: the wrong host's chain passes step 3.
        AFPolicyRow(
            mode: .publicKey, allowInvalid: false, validatesDomain: false, scenario: .publicKeyNoDomainCheck,
            expected: [
                .acceptPinnedKey, .acceptPinnedKey, .refuseUntrusted, .refuseUntrusted, .acceptPinnedKey, .refuseNoKey,
                .acceptPinnedKey, .acceptPinnedKey,
            ]),
        // Scenario 6, PublicKey/YES/YES: pins are given, so step 1 passes; step 3 is skipped (AC); only keys count.
        AFPolicyRow(
            mode: .publicKey, allowInvalid: true, validatesDomain: true, scenario: .publicKeyOnly,
            expected: [
                .acceptPinnedKey, .acceptPinnedKey, .acceptPinnedKey, .acceptPinnedKey, .acceptPinnedKey, .refuseNoKey,
                .acceptPinnedKey, .acceptPinnedKey,
            ]),
        // Scenario 6, PublicKey/YES/NO: the same (VD only changes a policy whose result is never read).
        AFPolicyRow(
            mode: .publicKey, allowInvalid: true, validatesDomain: false, scenario: .publicKeyOnly,
            expected: [
                .acceptPinnedKey, .acceptPinnedKey, .acceptPinnedKey, .acceptPinnedKey, .acceptPinnedKey, .refuseNoKey,
                .acceptPinnedKey, .acceptPinnedKey,
            ]),
        // Scenario 7, Certificate/NO/YES: step 3 (SSL, system roots), then step 4 with the pinned anchors only.
        // A pin that is not in the chain's path (the K1 pin, the K2 leaf, the re-issued leaf) fails step 4.
        AFPolicyRow(
            mode: .certificate, allowInvalid: false, validatesDomain: true, scenario: .certificateStrict,
            expected: [
                .acceptPinnedCertificate, .refuseUntrusted, .refuseUntrusted, .refuseUntrusted, .refusePinnedAnchors,
                .refusePinnedAnchors, .acceptPinnedCertificate, .refusePinnedAnchors,
            ]),
        // Scenario 8, Certificate/NO/NO: as 7 with the basic policy: the pinned wrong-host leaf passes both steps.
        AFPolicyRow(
            mode: .certificate, allowInvalid: false, validatesDomain: false, scenario: .certificateNoDomainCheck,
            expected: [
                .acceptPinnedCertificate, .acceptPinnedCertificate, .refuseUntrusted, .refuseUntrusted,
                .refusePinnedAnchors, .refusePinnedAnchors, .acceptPinnedCertificate, .refusePinnedAnchors,
            ]),
        // Scenario 9, Certificate/YES/YES: step 3 skipped, so the pinned self-signed leaf passes; step 4 still runs
        // with the SSL policy: the wrong host and the expired leaf fail there even though they are pinned.
        AFPolicyRow(
            mode: .certificate, allowInvalid: true, validatesDomain: true, scenario: .certificateAllowInvalid,
            expected: [
                .acceptPinnedCertificate, .refusePinnedAnchors, .refusePinnedAnchors, .acceptPinnedCertificate,
                .refusePinnedAnchors, .refusePinnedAnchors, .acceptPinnedCertificate, .refusePinnedAnchors,
            ]),
        // Scenario 10, Certificate/YES/NO: as 9 with the basic policy: the wrong host passes, the expired leaf does not.
        AFPolicyRow(
            mode: .certificate, allowInvalid: true, validatesDomain: false,
            scenario: .certificateAllowInvalidNoDomainCheck,
            expected: [
                .acceptPinnedCertificate, .acceptPinnedCertificate, .refusePinnedAnchors, .acceptPinnedCertificate,
                .refusePinnedAnchors, .refusePinnedAnchors, .acceptPinnedCertificate, .refusePinnedAnchors,
            ]),
    ]

    static let evaluator = AFTrustEvaluator(systemTrust: TestPKI.trust)

    static func verdict(_ row: AFPolicyRow, _ chainCase: AFChainCase) -> AFVerdict {
        let policy = AFSecurityPolicy(
            mode: row.mode, pinnedCertificates: chainCase.pins, allowInvalidCertificates: row.allowInvalid,
            validatesDomainName: row.validatesDomain)
        return evaluator.evaluate(policy, chain: chainCase.chain, domain: AFChains.host, at: AFChains.now)
    }

    @Test(arguments: rows)
    func rowMatchesAFNetworking(_ row: AFPolicyRow) {
        #expect(row.expected.count == AFChainCase.allCases.count)
        for (chainCase, expected) in zip(AFChainCase.allCases, row.expected) {
            let verdict = Self.verdict(row, chainCase)
            #expect(AFOutcome(verdict) == expected, "\(row) × \(chainCase): \(verdict)")
        }
    }

    @Test(arguments: rows)
    func rowMapsToItsScenario(_ row: AFPolicyRow) {
        let policy = AFSecurityPolicy(
            mode: row.mode, allowInvalidCertificates: row.allowInvalid, validatesDomainName: row.validatesDomain)
        #expect(policy.scenario == row.scenario)
    }

    @Test func theTenScenariosAreDistinctAndAllReached() {
        #expect(AFScenario.allCases.count == 10)
        #expect(Set(Self.rows.map(\.scenario)) == Set(AFScenario.allCases))
        #expect(Set(AFScenario.allCases.map(\.meaning)).count == 10)
        #expect(Set(AFScenario.allCases.map(\.combination)).count == 10)
    }

    /// The articles' open question: Certificate mode with AC = YES refuses an expired (pinned) leaf, and the
    /// reason is the expiry found by step 4's evaluation.
    @Test func certificateModeWithAllowInvalidStillChecksExpiry() {
        for validatesDomain in [true, false] {
            let row = Self.rows.first {
                $0.mode == .certificate && $0.allowInvalid && $0.validatesDomain == validatesDomain
            }!
            guard case .refused(.pinnedAnchorsRejectChain(let failure)) = Self.verdict(row, .expiredLeaf) else {
                Issue.record("\(row): the expired leaf was not refused by the pinned-anchor evaluation")
                continue
            }
            #expect(failure.kinds == [.expired], "\(failure)")
        }
    }

    @Test func refusalsNameWhatFailed() {
        let strict = Self.rows[0]
        guard case .refused(.chainNotTrusted(let host)) = Self.verdict(strict, .wrongHost) else {
            Issue.record("wrong host not refused")
            return
        }
        #expect(host.kinds == [.hostNameMismatch])
        guard case .refused(.chainNotTrusted(let selfSigned)) = Self.verdict(strict, .selfSignedLeaf) else {
            Issue.record("self-signed leaf not refused")
            return
        }
        #expect(selfSigned.kinds == [.untrustedAnchor], "\(selfSigned)")
    }

    @Test func matchesReportWhereThePinSits() {
        let certificateStrict = Self.rows.first { $0.scenario == .certificateStrict }!
        // The root is not sent by the server; it is the top of the evaluated chain (depth 2).
        #expect(
            Self.verdict(certificateStrict, .pinnedCertificateExactMatch) == .accepted(.pinnedCertificate(depth: 2)))
        #expect(Self.verdict(certificateStrict, .validChain) == .accepted(.pinnedCertificate(depth: 0)))
        let keyOnly = Self.rows.first { $0.scenario == .publicKeyOnly }!
        #expect(
            Self.verdict(keyOnly, .pinnedCertificateExactMatch)
                == .accepted(.pinnedPublicKey(depths: [2], trustChecked: false)))
        let keyStrict = Self.rows.first { $0.scenario == .publicKeyStrict }!
        #expect(
            Self.verdict(keyStrict, .pinnedKeyMatch) == .accepted(.pinnedPublicKey(depths: [0], trustChecked: true)))
    }

    /// Step 1's other half: a pinning mode with nothing pinned, AC = YES and VD = YES is refused at once; with
    /// AC = NO it gets past step 1 and fails later (no anchors in step 4; no key in step 5).
    @Test func pinningModesWithoutPins() {
        let chain = AFChains.validChain
        for mode in [AFPinningMode.publicKey, .certificate] {
            let early = AFSecurityPolicy(mode: mode, allowInvalidCertificates: true, validatesDomainName: true)
            #expect(
                Self.evaluator.evaluate(early, chain: chain, domain: AFChains.host, at: AFChains.now)
                    == .refused(.domainValidationNeedsPinning))
            let late = AFSecurityPolicy(mode: mode)
            let verdict = Self.evaluator.evaluate(late, chain: chain, domain: AFChains.host, at: AFChains.now)
            #expect(AFOutcome(verdict) == (mode == .publicKey ? .refuseNoKey : .refusePinnedAnchors), "\(verdict)")
        }
        // Mode None with pins is still refused by step 1 (`mode == None` alone satisfies the condition).
        let nonePinned = AFSecurityPolicy(
            mode: .none, pinnedCertificates: [AFChains.leaf], allowInvalidCertificates: true, validatesDomainName: true)
        #expect(
            Self.evaluator.evaluate(nonePinned, chain: chain, domain: AFChains.host, at: AFChains.now)
                == .refused(.domainValidationNeedsPinning))
    }

    @Test func duplicatePinsCountOnce() {
        let policy = AFSecurityPolicy(mode: .certificate, pinnedCertificates: [AFChains.leaf, AFChains.leaf])
        #expect(policy.pinnedCertificates.count == 1)
    }
}
