import Foundation
import Testing

@testable import ATSPolicy

// Shared vocabulary for the policy tables: short key names, plist builders, one-call evaluation,
// and a data-driven expectation checked field by field.

let keyAAL = ATSKey.allowsArbitraryLoads
let keyMedia = ATSKey.allowsArbitraryLoadsForMedia
let keyWeb = ATSKey.allowsArbitraryLoadsInWebContent
let keyLocal = ATSKey.allowsLocalNetworking
let keyED = ATSKey.exceptionDomains
let keyPinned = ATSKey.pinnedDomains
let keyIS = ATSKey.includesSubdomains
let keyHTTP = ATSKey.exceptionAllowsInsecureHTTPLoads
let keyTLS = ATSKey.exceptionMinimumTLSVersion
let keyPFS = ATSKey.exceptionRequiresForwardSecrecy
let keyCT = ATSKey.requiresCertificateTransparency
let keyLeafPins = ATSKey.pinnedLeafIdentities
let keyCAPins = ATSKey.pinnedCAIdentities
let keySPKI = ATSKey.spkiSHA256

let yes = PlistValue.bool(true)
let no = PlistValue.bool(false)

/// `.dictionary(entries)`.
func dict(_ entries: [String: PlistValue]) -> PlistValue { .dictionary(entries) }

/// An ATS dictionary whose NSExceptionDomains holds `entries`, plus `globals` at the top level.
func exceptions(_ entries: [String: PlistValue], globals: [String: PlistValue] = [:]) -> PlistValue {
    var root = globals
    root[keyED] = .dictionary(entries)
    return .dictionary(root)
}

/// A `NSPinned…Identities` array holding one dictionary per base64 string.
func pinArray(_ digests: [String]) -> PlistValue {
    .array(digests.map { .dictionary([keySPKI: .string($0)]) })
}

/// A deterministic 32-byte SPKI digest, base64 encoded: `digest(1)` ≠ `digest(2)`.
func digest(_ seed: UInt8) -> String { Data(repeating: seed, count: 32).base64EncodedString() }

/// The emulated platform for `text` (e.g. `ios:18.0`), failing the test if it does not parse.
func platform(_ text: String, sdk: String? = nil) -> Platform {
    guard let value = Platform(parsing: text, sdk: sdk) else {
        Issue.record("bad platform \(text)")
        return .default
    }
    return value
}

/// Evaluation options on `platformText`, adjusted by `adjust`.
func options(
    _ platformText: String = "ios:18.0", sdk: String? = nil, _ adjust: (inout EvaluationOptions) -> Void = { _ in }
) -> EvaluationOptions {
    var value = EvaluationOptions(platform: platform(platformText, sdk: sdk))
    adjust(&value)
    return value
}

/// A request target, failing the test when `url` does not parse.
func target(_ url: String) -> RequestTarget {
    do {
        return try RequestTarget(parsing: url)
    } catch {
        Issue.record("cannot parse \(url): \(error)")
        return RequestTarget(scheme: .http, host: "invalid.invalid")
    }
}

/// Parses `ats` and evaluates `url` in one call.
func decide(
    _ ats: PlistValue?, _ url: String, source: RequestSource = .urlsession,
    options evaluation: EvaluationOptions = options(), parse: ParseOptions = ParseOptions()
) -> ATSDecision {
    let configuration = ATSConfigurationParser(options: parse).parse(ats)
    return ATSEvaluator(configuration: configuration, options: evaluation).evaluate(target(url), source: source)
}

/// Suites by IANA code point.
func codes(_ suites: [CipherSuite]) -> Set<UInt16> { Set(suites.map(\.code)) }

/// Formats a code point as 0xC02F for messages.
func hex(_ code: UInt16) -> String {
    let digits = String(code, radix: 16, uppercase: true)
    return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}

/// What a decision must show. Every nil field is not checked.
struct Expect: Sendable {
    var outcome: ATSDecision.Outcome? = nil
    var atsRequired: Bool? = nil
    /// `requirements.atsGoverned`.
    var governed: Bool? = nil
    var minTLS: TLSProtocolVersion? = nil
    var maxTLS: TLSProtocolVersion? = nil
    var forwardSecrecy: Bool? = nil
    /// Suites (IANA code points) that must be offered / must not be offered.
    var offers: [UInt16] = []
    var lacks: [UInt16] = []
    var trust: TrustPolicy.Kind? = nil
    var mayOverride: Bool? = nil
    var overrides: Bool? = nil
    var minRSA: Int? = nil
    var minEC: Int? = nil
    var atsKeySize: Bool? = nil
    var minHash: SignatureHash? = nil
    /// CT required for chains ending in system roots.
    var ctSystemRoots: Bool? = nil
    /// CT required for every chain (the old per-domain key).
    var ctAllChains: Bool? = nil
    /// The matched exception key (`.some(nil)` = no entry must match).
    var exceptionKey: String?? = nil
    var local: LocalHostKind?? = nil
    /// Leaf / CA pins as base64 (`.some(nil)` = that list must be absent).
    var leafPins: [String]?? = nil
    var caPins: [String]?? = nil
    var pinned: Bool? = nil
    var failsClosed: Bool? = nil

    static let blocked = Expect(outcome: .cleartextBlocked, atsRequired: true)
    static let allowed = Expect(outcome: .cleartextAllowed, atsRequired: false)
}

/// Checks every field `expect` sets, attributing failures to `label`.
func check(
    _ decision: ATSDecision, _ expect: Expect, _ label: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    let comment = Comment(rawValue: label)
    let requirements = decision.requirements
    if let outcome = expect.outcome {
        #expect(decision.outcome == outcome, comment, sourceLocation: sourceLocation)
        switch outcome {
        case .cleartextBlocked:
            #expect(decision.block?.error.rawValue == -1022, comment, sourceLocation: sourceLocation)
            #expect(decision.isBlocked, comment, sourceLocation: sourceLocation)
            #expect(decision.fix != nil, comment, sourceLocation: sourceLocation)
        case .cleartextAllowed, .https:
            #expect(decision.block == nil, comment, sourceLocation: sourceLocation)
            #expect(!decision.isBlocked, comment, sourceLocation: sourceLocation)
        }
    }
    if let value = expect.atsRequired {
        #expect(decision.atsRequired == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.governed {
        #expect(requirements.atsGoverned == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.minTLS {
        #expect(requirements.minimumVersion == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.maxTLS {
        #expect(requirements.maximumVersion == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.forwardSecrecy {
        #expect(requirements.forwardSecrecyRequired == value, comment, sourceLocation: sourceLocation)
    }
    let offered = codes(requirements.cipherSuites)
    for code in expect.offers {
        #expect(offered.contains(code), "\(label): \(hex(code)) must be offered", sourceLocation: sourceLocation)
    }
    for code in expect.lacks {
        #expect(!offered.contains(code), "\(label): \(hex(code)) must not be offered", sourceLocation: sourceLocation)
    }
    if let value = expect.trust {
        #expect(requirements.trust.kind == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.mayOverride {
        #expect(requirements.trust.appMayOverride == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.overrides {
        #expect(requirements.trust.appOverrides == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.minRSA {
        #expect(requirements.minimumRSAKeyBits == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.minEC {
        #expect(requirements.minimumECKeyBits == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.atsKeySize {
        #expect(requirements.atsKeySizeCheck == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.minHash {
        #expect(requirements.minimumSignatureHash == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.ctSystemRoots {
        let required = requirements.certificateTransparency.systemRootsIssuedOnOrAfter
        #expect((required != nil) == value, comment, sourceLocation: sourceLocation)
        if value {
            #expect(required == ctDate, comment, sourceLocation: sourceLocation)
        }
    }
    if let value = expect.ctAllChains {
        #expect(requirements.certificateTransparency.allChains == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.exceptionKey {
        #expect(decision.exceptionKey == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.local {
        #expect(decision.localHost == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.pinned {
        #expect((requirements.pins != nil) == value, comment, sourceLocation: sourceLocation)
    }
    if let value = expect.leafPins {
        #expect(
            requirements.pins?.leafSPKISHA256.map { $0.map { $0.base64EncodedString() } } == value, comment,
            sourceLocation: sourceLocation)
    }
    if let value = expect.caPins {
        #expect(
            requirements.pins?.caSPKISHA256.map { $0.map { $0.base64EncodedString() } } == value, comment,
            sourceLocation: sourceLocation)
    }
    if let value = expect.failsClosed {
        #expect(requirements.pins?.failsClosed == value, comment, sourceLocation: sourceLocation)
    }
    #expect(!decision.ruleChain.isEmpty, comment, sourceLocation: sourceLocation)
}

/// 2018-10-16 00:00 UTC: CT is required for system-rooted leaves issued from then (reference §3.4).
let ctDate: Date = {
    var components = DateComponents()
    components.calendar = Calendar(identifier: .gregorian)
    components.timeZone = TimeZone(identifier: "UTC")
    components.year = 2018
    components.month = 10
    components.day = 16
    return components.date!
}()

/// One row of a decision table: an ATS dictionary, a URL and what the decision must show.
struct Scenario: Sendable, CustomTestStringConvertible {
    let name: String
    let ats: PlistValue?
    let url: String
    var source: RequestSource = .urlsession
    var options: EvaluationOptions = ATSPolicyTests.options()
    var parse: ParseOptions = ParseOptions()
    let expect: Expect

    var testDescription: String { name }

    /// Runs the row.
    func run(sourceLocation: SourceLocation = #_sourceLocation) {
        let decision = decide(ats, url, source: source, options: options, parse: parse)
        check(decision, expect, name, sourceLocation: sourceLocation)
    }
}
