import Foundation
import Testing

@testable import ATSPolicy

// Reference §1.4: values of the wrong type, the exact lines Apple's parser logs, and what the
// engine does with them. Plus the legacy and undocumented spellings of §1.1/§1.2.

private func parse(_ ats: PlistValue?, _ options: ParseOptions = ParseOptions()) -> ATSConfiguration {
    ATSConfigurationParser(options: options).parse(ats)
}

private func appleLogs(_ configuration: ATSConfiguration) -> [String] {
    configuration.messages.compactMap(\.appleLog)
}

private func mustBeBoolean(_ key: String) -> String { "App Transport Security value for key \(key) must be a boolean" }

private func mustBeString(_ key: String) -> String { "App Transport Security value for key \(key) must be a string" }

private let exceptionsMustBeDictionary = "App Transport Security exceptions must be a dictionary"
private let exceptionMustBeDictionary = "App Transport Security exception must be a dictionary"

private func notValidCIDR(_ key: String) -> String {
    "App Transport Security exception \(key) is not a valid CIDR notation."
}

/// One value for a Boolean key and what ATS makes of it.
struct BooleanCase: Sendable, CustomTestStringConvertible {
    let label: String
    let value: PlistValue
    let setting: BooleanSetting
    /// Whether the parser logs "must be a boolean".
    let logged: Bool

    var testDescription: String { label }
}

private let booleanCases: [BooleanCase] = [
    BooleanCase(label: "<true/> → YES", value: yes, setting: .value(true), logged: false),
    BooleanCase(label: "<false/> → present NO", value: no, setting: .value(false), logged: false),
    BooleanCase(label: "<string>YES</string> → absent, logged", value: .string("YES"), setting: .absent, logged: true),
    BooleanCase(
        label: "<string>true</string> → absent, logged", value: .string("true"), setting: .absent, logged: true),
    BooleanCase(label: "<string>1</string> → absent, logged", value: .string("1"), setting: .absent, logged: true),
    BooleanCase(label: "<integer>2</integer> → present NO", value: .integer(2), setting: .value(false), logged: false),
    BooleanCase(label: "<integer>0</integer> → present NO", value: .integer(0), setting: .value(false), logged: false),
    BooleanCase(
        label: "<integer>-1</integer> → present NO", value: .integer(-1), setting: .value(false), logged: false),
    BooleanCase(label: "<integer>1</integer> → YES", value: .integer(1), setting: .value(true), logged: false),
    BooleanCase(label: "<real>2.5</real> → present NO", value: .real(2.5), setting: .value(false), logged: false),
    BooleanCase(label: "<array/> → absent, logged", value: .array([]), setting: .absent, logged: true),
    BooleanCase(label: "<dict/> → absent, logged", value: dict([:]), setting: .absent, logged: true),
    BooleanCase(label: "<data/> → absent, logged", value: .data(Data([1])), setting: .absent, logged: true),
    BooleanCase(
        label: "<date/> → absent, logged", value: .date(Date(timeIntervalSince1970: 0)), setting: .absent, logged: true),
]

/// A value of NSExceptionMinimumTLSVersion and the minimum it gives (nil message = valid).
struct TLSStringCase: Sendable, CustomTestStringConvertible {
    let value: PlistValue
    let minimum: TLSProtocolVersion
    let valid: Bool

    var testDescription: String {
        switch value {
        case .string(let text): "'\(text)' → \(minimum)"
        default: "\(value.typeName) → \(minimum)"
        }
    }
}

private let tlsStringCases: [TLSStringCase] = [
    TLSStringCase(value: .string("TLSv1.0"), minimum: .tls10, valid: true),
    TLSStringCase(value: .string("TLSv1.1"), minimum: .tls11, valid: true),
    TLSStringCase(value: .string("TLSv1.2"), minimum: .tls12, valid: true),
    TLSStringCase(value: .string("TLSv1.3"), minimum: .tls13, valid: true),
    TLSStringCase(value: .string("TLSv1.4"), minimum: .tls12, valid: false),
    TLSStringCase(value: .string("TLSV1.3"), minimum: .tls12, valid: false),
    TLSStringCase(value: .string("TLSv1.00"), minimum: .tls12, valid: false),
    TLSStringCase(value: .string("TLSv1.31"), minimum: .tls12, valid: false),
    TLSStringCase(value: .string("1.0"), minimum: .tls12, valid: false),
    TLSStringCase(value: .string("SSLv3.0"), minimum: .tls12, valid: false),
    TLSStringCase(value: .string("tlsv1.0"), minimum: .tls12, valid: false),
    TLSStringCase(value: .string(" TLSv1.0"), minimum: .tls12, valid: false),
    TLSStringCase(value: .string(""), minimum: .tls12, valid: false),
]

@Suite("Reference §1.4: values of the wrong type")
struct WrongTypeTests {
    @Test("NSAllowsArbitraryLoads value table", arguments: booleanCases)
    func arbitraryLoadsValue(_ row: BooleanCase) {
        let configuration = parse(dict([keyAAL: row.value]))
        #expect(configuration.allowsArbitraryLoads == row.setting)
        #expect(appleLogs(configuration) == (row.logged ? [mustBeBoolean(keyAAL)] : []))
        let decision = decide(dict([keyAAL: row.value]), "http://example.com/")
        #expect(decision.outcome == (row.setting == .value(true) ? .cleartextAllowed : .cleartextBlocked))
    }

    @Test(
        "a fine-grained key of the wrong type is absent and does not cancel NSAllowsArbitraryLoads",
        arguments: [keyMedia, keyWeb, keyLocal])
    func stringFineGrainedKeyIsAbsent(_ key: String) {
        let ats = dict([keyAAL: yes, key: .string("YES")])
        let configuration = parse(ats)
        #expect(appleLogs(configuration) == [mustBeBoolean(key)])
        #expect(!configuration.fineGrainedKeyPresent)
        #expect(decide(ats, "http://example.com/").outcome == .cleartextAllowed)
    }

    @Test(
        "a fine-grained key holding integer 2 is present and cancels NSAllowsArbitraryLoads",
        arguments: [keyMedia, keyWeb, keyLocal])
    func integerFineGrainedKeyIsPresent(_ key: String) {
        let ats = dict([keyAAL: yes, key: .integer(2)])
        #expect(parse(ats).fineGrainedKeyPresent)
        #expect(decide(ats, "http://example.com/").outcome == .cleartextBlocked)
    }

    @Test("string NSExceptionAllowsInsecureHTTPLoads is logged and the default NO applies")
    func stringInsecureHTTP() {
        let ats = exceptions(["example.com": dict([keyHTTP: .string("YES")])])
        let configuration = parse(ats)
        #expect(appleLogs(configuration) == [mustBeBoolean(keyHTTP)])
        #expect(configuration.exceptionDomains["example.com"]?.allowsInsecureHTTPLoads == false)
        #expect(decide(ats, "http://example.com/").outcome == .cleartextBlocked)
    }

    @Test("string NSIncludesSubdomains is logged and the default NO applies")
    func stringIncludesSubdomains() {
        let ats = exceptions(["example.com": dict([keyHTTP: yes, keyIS: .string("YES")])])
        #expect(appleLogs(parse(ats)) == [mustBeBoolean(keyIS)])
        #expect(decide(ats, "http://www.example.com/").outcome == .cleartextBlocked)
        #expect(decide(ats, "http://example.com/").outcome == .cleartextAllowed)
    }

    @Test("string NSExceptionRequiresForwardSecrecy is logged and the default YES applies")
    func stringForwardSecrecy() {
        let ats = exceptions(["example.com": dict([keyPFS: .string("NO")])])
        #expect(appleLogs(parse(ats)) == [mustBeBoolean(keyPFS)])
        let requirements = decide(ats, "https://example.com/").requirements
        #expect(requirements.forwardSecrecyRequired)
        #expect(!codes(requirements.cipherSuites).contains(0x009C))
    }

    @Test("per-domain integers: 1 is YES, 0 and 2 are NO")
    func perDomainIntegers() {
        #expect(
            decide(exceptions(["example.com": dict([keyHTTP: .integer(1)])]), "http://example.com/").outcome
                == .cleartextAllowed)
        #expect(
            decide(exceptions(["example.com": dict([keyHTTP: .integer(2)])]), "http://example.com/").outcome
                == .cleartextBlocked)
        let pfsOff = decide(exceptions(["example.com": dict([keyPFS: .integer(0)])]), "https://example.com/")
        #expect(!pfsOff.requirements.forwardSecrecyRequired)
        let pfsTwo = decide(exceptions(["example.com": dict([keyPFS: .integer(2)])]), "https://example.com/")
        #expect(!pfsTwo.requirements.forwardSecrecyRequired)
    }

    @Test(
        "non-string NSExceptionMinimumTLSVersion is logged '… must be a string' and TLS 1.2 applies",
        arguments: [PlistValue.integer(1), .real(1.0), .bool(true), .array([.string("TLSv1.0")]), dict([:])])
    func nonStringMinimumTLS(_ value: PlistValue) {
        let ats = exceptions(["example.com": dict([keyTLS: value])])
        let configuration = parse(ats)
        #expect(appleLogs(configuration) == [mustBeString(keyTLS)])
        #expect(configuration.exceptionDomains["example.com"]?.minimumTLSVersion == .tls12)
        #expect(decide(ats, "https://example.com/").requirements.minimumVersion == .tls12)
    }

    @Test("NSExceptionMinimumTLSVersion strings are exact and case-sensitive", arguments: tlsStringCases)
    func minimumTLSStrings(_ row: TLSStringCase) {
        let ats = exceptions(["example.com": dict([keyTLS: row.value])])
        let configuration = parse(ats)
        let entry = configuration.exceptionDomains["example.com"]
        #expect(entry?.minimumTLSVersion == row.minimum)
        #expect(entry?.minimumTLSVersionSpecified == row.valid)
        #expect(configuration.messages.isEmpty == row.valid)
        if !row.valid {
            #expect(configuration.messages.map(\.code) == ["invalid-tls-version"])
            #expect(configuration.messages.first?.keyPath.components.last == keyTLS)
        }
        let requirements = decide(ats, "https://example.com/").requirements
        #expect(requirements.minimumVersion == row.minimum)
    }

    @Test(
        "NSExceptionDomains that is not a dictionary: logged, no exception applies, globals still do",
        arguments: [PlistValue.array([dict(["example.com": dict([keyHTTP: yes])])]), .string("example.com"), yes])
    func exceptionDomainsNotDictionary(_ value: PlistValue) {
        let withGlobal = dict([keyAAL: yes, keyED: value])
        let configuration = parse(withGlobal)
        #expect(appleLogs(configuration) == [exceptionsMustBeDictionary])
        #expect(configuration.exceptionDomains.isEmpty)
        #expect(decide(withGlobal, "http://example.com/").outcome == .cleartextAllowed)
        #expect(decide(withGlobal, "https://example.com/").requirements.atsGoverned == false)
        let withoutGlobal = dict([keyED: value])
        #expect(decide(withoutGlobal, "http://example.com/").outcome == .cleartextBlocked)
    }

    @Test(
        "an exception entry that is not a dictionary: logged, skipped, the host gets the GLOBAL policy",
        arguments: [PlistValue.string("YES"), yes, .array([]), .integer(1)])
    func exceptionEntryNotDictionary(_ value: PlistValue) {
        let ats = exceptions(["example.com": value, "other.example": dict([keyHTTP: yes])], globals: [keyAAL: yes])
        let configuration = parse(ats)
        #expect(appleLogs(configuration) == [exceptionMustBeDictionary])
        #expect(configuration.exceptionDomains["example.com"] == nil)
        #expect(configuration.exceptionDomains["other.example"] != nil)
        // The global NSAllowsArbitraryLoads applies, not "full ATS" as an empty <dict/> would give.
        let http = decide(ats, "http://example.com/")
        #expect(http.outcome == .cleartextAllowed)
        #expect(http.exceptionKey == nil)
        #expect(decide(ats, "https://example.com/").requirements.atsGoverned == false)
        // Without the global key the same host is blocked: it gets the default global policy.
        let strict = exceptions(["example.com": value])
        #expect(decide(strict, "http://example.com/").outcome == .cleartextBlocked)
    }

    @Test(
        "an invalid CIDR key is logged once with Apple's text and never matches",
        arguments: [
            "203.0.113.0/33", "203.0.113.0/", "/24", "203.0.113.0/24/1", "2001:db8::/129", "fe80::%lo0/10",
            "203.0.113.0/-1", "203.0.113.0/x", "example.com/24", "203.0.113.256/24",
        ])
    func invalidCIDR(_ key: String) {
        let ats = exceptions([key: dict([keyHTTP: yes])])
        let configuration = parse(ats)
        #expect(appleLogs(configuration) == [notValidCIDR(key)])
        #expect(configuration.exceptionDomains[key]?.kind == .invalidCIDR)
        for url in ["http://203.0.113.5/", "http://[2001:db8::1]/", "http://example.com/", "http://203.0.113.0/"] {
            let decision = decide(ats, url)
            #expect(decision.outcome == .cleartextBlocked, "\(url)")
            #expect(decision.exceptionKey == nil, "\(url)")
        }
    }

    @Test(
        "NSAppTransportSecurity that is not a dictionary is treated as absent (full ATS)",
        arguments: [PlistValue.bool(true), .string("NSAllowsArbitraryLoads"), .array([dict([keyAAL: yes])])])
    func atsNotDictionary(_ value: PlistValue) {
        let configuration = parse(value)
        #expect(configuration.allowsArbitraryLoads == .absent)
        #expect(configuration.exceptionDomains.isEmpty)
        #expect(configuration.messages.map(\.code) == ["ats-not-dictionary"])
        let evaluator = ATSEvaluator(configuration: configuration, options: options())
        #expect(evaluator.evaluate(target("http://example.com/")).outcome == .cleartextBlocked)
        #expect(evaluator.evaluate(target("https://example.com/")).requirements.atsGoverned)
    }

    @Test("unknown keys anywhere are ignored silently")
    func unknownKeys() {
        let ats = dict([
            "NSAllowsEverything": yes,
            keyED: dict(["example.com": dict([keyHTTP: yes, "NSExceptionAllowsEverything": yes])]),
            keyPinned: dict(["pinned.example": dict([keyLeafPins: pinArray([digest(1)]), "Color": .string("red")])]),
        ])
        let configuration = parse(ats)
        #expect(configuration.messages.isEmpty)
        #expect(configuration.allowsArbitraryLoads == .absent)
        #expect(decide(ats, "http://example.com/").outcome == .cleartextAllowed)
        #expect(decide(ats, "http://other.example/").outcome == .cleartextBlocked)
    }

    @Test("a pinned-domain entry that is not a dictionary is skipped")
    func pinnedEntryNotDictionary() {
        let ats = dict([
            keyPinned: dict(["example.com": .string("pin"), "good.example": dict([keyLeafPins: pinArray([digest(1)])])])
        ])
        let configuration = parse(ats)
        #expect(configuration.pinnedDomains["example.com"] == nil)
        #expect(configuration.pinnedDomains["good.example"] != nil)
        #expect(decide(ats, "https://example.com/").requirements.pins == nil)
        #expect(decide(ats, "https://good.example/").requirements.pins != nil)
    }

    @Test(
        "pinned NSIncludesSubdomains must be exactly Boolean true",
        arguments: [PlistValue.integer(1), .string("YES"), .real(1), no])
    func pinnedIncludesSubdomainsNotTrue(_ value: PlistValue) {
        let ats = dict([keyPinned: dict(["example.com": dict([keyIS: value, keyLeafPins: pinArray([digest(1)])])])])
        #expect(parse(ats).pinnedDomains["example.com"]?.includesSubdomains == false)
        #expect(decide(ats, "https://api.example.com/").requirements.pins == nil)
        #expect(decide(ats, "https://example.com/").requirements.pins != nil)
    }
}

private let legacyHTTPKeys = [
    "NSTemporaryExceptionAllowsInsecureHTTPLoads", "NSThirdPartyExceptionAllowsInsecureHTTPLoads",
    "NSTemporaryThirdPartyExceptionAllowsInsecureHTTPLoads",
]
private let legacyTLSKeys = [
    "NSTemporaryExceptionMinimumTLSVersion", "NSThirdPartyExceptionMinimumTLSVersion",
    "NSTemporaryThirdPartyExceptionMinimumTLSVersion",
]
private let legacyPFSKeys = [
    "NSTemporaryExceptionRequiresForwardSecrecy", "NSThirdPartyExceptionRequiresForwardSecrecy",
    "NSTemporaryThirdPartyExceptionRequiresForwardSecrecy",
]

@Suite("Reference §1.1/§1.2: legacy and undocumented key spellings")
struct LegacyKeyTests {
    private let aliases = ParseOptions(legacyKeysAsAliases: true)

    @Test(
        "legacy …AllowsInsecureHTTPLoads: ignored with a warning by default, honoured with aliases",
        arguments: legacyHTTPKeys)
    func insecureHTTP(_ key: String) {
        let ats = exceptions(["example.com": dict([key: yes])])
        let ignored = parse(ats)
        #expect(ignored.messages.map(\.code) == ["legacy-key"])
        #expect(ignored.messages.allSatisfy { $0.severity == .warning })
        #expect(decide(ats, "http://example.com/").outcome == .cleartextBlocked)
        let honoured = parse(ats, aliases)
        #expect(honoured.exceptionDomains["example.com"]?.legacyKeysApplied == [key])
        #expect(honoured.messages.allSatisfy { $0.severity == .warning })
        #expect(decide(ats, "http://example.com/", parse: aliases).outcome == .cleartextAllowed)
    }

    @Test("legacy …MinimumTLSVersion: ignored by default, honoured with aliases", arguments: legacyTLSKeys)
    func minimumTLS(_ key: String) {
        let ats = exceptions(["example.com": dict([key: .string("TLSv1.0")])])
        #expect(decide(ats, "https://example.com/").requirements.minimumVersion == .tls12)
        #expect(decide(ats, "https://example.com/", parse: aliases).requirements.minimumVersion == .tls10)
    }

    @Test("legacy …RequiresForwardSecrecy: ignored by default, honoured with aliases", arguments: legacyPFSKeys)
    func forwardSecrecy(_ key: String) {
        let ats = exceptions(["example.com": dict([key: no])])
        #expect(decide(ats, "https://example.com/").requirements.forwardSecrecyRequired)
        #expect(!decide(ats, "https://example.com/", parse: aliases).requirements.forwardSecrecyRequired)
    }

    @Test("with aliases, the current spelling wins over a legacy one in the same entry")
    func currentSpellingWins() {
        let ats = exceptions(["example.com": dict([keyHTTP: no, "NSTemporaryExceptionAllowsInsecureHTTPLoads": yes])])
        #expect(decide(ats, "http://example.com/", parse: aliases).outcome == .cleartextBlocked)
    }

    @Test("NSAllowsArbitraryLoadsInMedia: unknown by default, so it does not cancel NSAllowsArbitraryLoads")
    func inMediaIgnored() {
        let ats = dict([keyAAL: yes, "NSAllowsArbitraryLoadsInMedia": yes])
        let configuration = parse(ats)
        #expect(configuration.messages.map(\.code) == ["legacy-key"])
        #expect(!configuration.fineGrainedKeyPresent)
        #expect(decide(ats, "http://example.com/").outcome == .cleartextAllowed)
    }

    @Test("NSAllowsArbitraryLoadsInMedia with aliases acts as NSAllowsArbitraryLoadsForMedia")
    func inMediaAliased() {
        let ats = dict([keyAAL: yes, "NSAllowsArbitraryLoadsInMedia": yes])
        #expect(parse(ats, aliases).allowsArbitraryLoadsForMedia == .value(true))
        #expect(decide(ats, "http://example.com/", parse: aliases).outcome == .cleartextBlocked)
        #expect(decide(ats, "http://example.com/", source: .media, parse: aliases).outcome == .cleartextAllowed)
    }

    @Test(
        "undocumented keys seen in the wild do nothing",
        arguments: ["NSExceptionAllowsLocalNetworking", "NSTemporaryExceptionAllowsInsecureHTTPSLoads"])
    func undocumented(_ key: String) {
        let ats = exceptions(["example.com": dict([key: yes])])
        for options in [ParseOptions(), aliases] {
            #expect(decide(ats, "http://example.com/", parse: options).outcome == .cleartextBlocked)
            let https = decide(ats, "https://example.com/", parse: options).requirements
            #expect(https.trust.kind == .ats)
        }
    }
}
