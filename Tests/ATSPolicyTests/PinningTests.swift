import Foundation
import Testing

@testable import ATSPolicy

// Reference §1.3: NSPinnedDomains structure, fail-closed rules and matching (case-insensitive,
// trailing dot stripped, one label only, NSIncludesSubdomains exactly true, accumulation).

private func pinned(_ entries: [String: PlistValue]) -> PlistValue { dict([keyPinned: .dictionary(entries)]) }

private func pins(_ ats: PlistValue, _ host: String) -> PinRequirement? {
    decide(ats, "https://\(host)/").requirements.pins
}

private func leafSet(_ requirement: PinRequirement?) -> Set<String>? {
    requirement?.leafSPKISHA256.map { Set($0.map { $0.base64EncodedString() }) }
}

/// One host against a pinned-domain configuration.
struct PinMatchCase: Sendable, CustomTestStringConvertible {
    let label: String
    let key: String
    let includesSubdomains: PlistValue?
    let host: String
    let matches: Bool

    var testDescription: String { label }
}

private let matchCases: [PinMatchCase] = [
    PinMatchCase(label: "exact", key: "example.com", includesSubdomains: nil, host: "example.com", matches: true),
    PinMatchCase(
        label: "key upper case, host lower case", key: "Example.COM", includesSubdomains: nil, host: "example.com",
        matches: true),
    PinMatchCase(
        label: "host upper case in the URL", key: "example.com", includesSubdomains: nil, host: "EXAMPLE.com",
        matches: true),
    PinMatchCase(
        label: "host with trailing dot", key: "example.com", includesSubdomains: nil, host: "example.com.",
        matches: true),
    PinMatchCase(
        label: "no IS: subdomain not pinned", key: "example.com", includesSubdomains: nil, host: "api.example.com",
        matches: false),
    PinMatchCase(
        label: "IS=true: one label below pinned", key: "example.com", includesSubdomains: yes, host: "api.example.com",
        matches: true),
    PinMatchCase(
        label: "IS=true: the domain itself pinned", key: "example.com", includesSubdomains: yes, host: "example.com",
        matches: true),
    PinMatchCase(
        label: "IS=true: two labels below not pinned", key: "example.com", includesSubdomains: yes,
        host: "a.api.example.com", matches: false),
    PinMatchCase(
        label: "IS=true, mixed case: one label below pinned", key: "Example.com", includesSubdomains: yes,
        host: "API.example.com", matches: true),
    PinMatchCase(
        label: "IS=true, trailing dot: one label below pinned", key: "example.com", includesSubdomains: yes,
        host: "api.example.com.", matches: true),
    PinMatchCase(
        label: "IS=<integer>1</integer>: subdomain not pinned", key: "example.com", includesSubdomains: .integer(1),
        host: "api.example.com", matches: false),
    PinMatchCase(
        label: "IS=<string>YES</string>: subdomain not pinned", key: "example.com",
        includesSubdomains: .string("YES"), host: "api.example.com", matches: false),
    PinMatchCase(
        label: "IS=false: subdomain not pinned", key: "example.com", includesSubdomains: no, host: "api.example.com",
        matches: false),
    PinMatchCase(
        label: "a sibling is not pinned", key: "api.example.com", includesSubdomains: yes, host: "www.example.com",
        matches: false),
    PinMatchCase(
        label: "a parent is not pinned", key: "api.example.com", includesSubdomains: yes, host: "example.com",
        matches: false),
    PinMatchCase(
        label: "suffix without a dot boundary is not pinned", key: "example.com", includesSubdomains: yes,
        host: "badexample.com", matches: false),
]

@Suite("Reference §1.3: NSPinnedDomains")
struct PinningTests {
    @Test("matching table", arguments: matchCases)
    func matching(_ row: PinMatchCase) {
        var entry: [String: PlistValue] = [keyLeafPins: pinArray([digest(1)])]
        if let flag = row.includesSubdomains { entry[keyIS] = flag }
        let requirement = pins(pinned([row.key: .dictionary(entry)]), row.host)
        #expect((requirement != nil) == row.matches)
        if row.matches {
            #expect(requirement?.domains == [row.key])
            #expect(leafSet(requirement) == [digest(1)])
        }
    }

    @Test("pin matching is one label even when NSExceptionDomains depth is any")
    func pinDepthIndependentOfExceptionDepth() {
        let ats = dict([
            keyPinned: dict(["example.com": dict([keyIS: yes, keyLeafPins: pinArray([digest(1)])])]),
            keyED: dict(["example.com": dict([keyIS: yes])]),
        ])
        let decision = decide(ats, "https://a.b.example.com/", options: options { $0.subdomainDepth = .any })
        #expect(decision.exceptionKey == "example.com")
        #expect(decision.requirements.pins == nil)
    }

    @Test("identities from every matching entry accumulate")
    func accumulation() {
        let ats = pinned([
            "example.com": dict([keyIS: yes, keyLeafPins: pinArray([digest(1)]), keyCAPins: pinArray([digest(3)])]),
            "api.example.com": dict([keyLeafPins: pinArray([digest(2)])]),
            "API.example.com": dict([keyCAPins: pinArray([digest(4)])]),
        ])
        let requirement = pins(ats, "api.example.com")
        #expect(Set(requirement?.domains ?? []) == ["example.com", "api.example.com", "API.example.com"])
        #expect(leafSet(requirement) == [digest(1), digest(2)])
        #expect(requirement?.caSPKISHA256.map { Set($0.map { $0.base64EncodedString() }) } == [digest(3), digest(4)])
        #expect(requirement?.failsClosed == false)
        // The parent only contributes its own entry.
        let parent = pins(ats, "example.com")
        #expect(parent?.domains == ["example.com"])
        #expect(leafSet(parent) == [digest(1)])
    }

    @Test("leaf-only, CA-only and both lists")
    func listKinds() {
        let leafOnly = pins(pinned(["example.com": dict([keyLeafPins: pinArray([digest(1)])])]), "example.com")
        #expect(leafOnly?.leafSPKISHA256 != nil)
        #expect(leafOnly?.caSPKISHA256 == nil)
        let caOnly = pins(pinned(["example.com": dict([keyCAPins: pinArray([digest(2)])])]), "example.com")
        #expect(caOnly?.leafSPKISHA256 == nil)
        #expect(caOnly?.caSPKISHA256?.map { $0.base64EncodedString() } == [digest(2)])
        let both = pins(
            pinned(["example.com": dict([keyLeafPins: pinArray([digest(1)]), keyCAPins: pinArray([digest(2)])])]),
            "example.com")
        #expect(both?.leafSPKISHA256?.count == 1)
        #expect(both?.caSPKISHA256?.count == 1)
    }

    @Test("an entry with neither array is not pinned")
    func neitherArray() {
        let ats = pinned(["example.com": dict([keyIS: yes])])
        let configuration = ATSConfigurationParser().parse(ats)
        #expect(configuration.pinnedDomains["example.com"]?.isPinning == false)
        #expect(pins(ats, "example.com") == nil)
        #expect(pins(ats, "api.example.com") == nil)
    }

    @Test("an empty array is pinned to nothing: fails closed", arguments: [keyLeafPins, keyCAPins])
    func emptyList(_ key: String) {
        let requirement = pins(pinned(["example.com": dict([key: .array([])])]), "example.com")
        #expect(requirement != nil)
        #expect(requirement?.failsClosed == true)
    }

    @Test(
        "strings that are not a valid base64 SHA-256 digest pin nothing: fails closed",
        arguments: ["not base64!!", "", "====", Data(repeating: 7, count: 16).base64EncodedString()])
    func invalidBase64(_ text: String) {
        let ats = pinned(["example.com": dict([keyLeafPins: .array([dict([keySPKI: .string(text)])])])])
        let configuration = ATSConfigurationParser().parse(ats)
        #expect(configuration.pinnedDomains["example.com"]?.leafIdentities?.digests.isEmpty == true)
        #expect(configuration.messages.map(\.code) == ["invalid-pin"])
        let requirement = pins(ats, "example.com")
        #expect(requirement?.failsClosed == true)
        #expect(requirement?.leafSPKISHA256 == [])
    }

    @Test("array items without SPKI-SHA256-BASE64 pin nothing: fails closed")
    func itemsWithoutDigest() {
        let ats = pinned([
            "example.com": dict([
                keyLeafPins: .array([dict(["SPKI-SHA1-BASE64": .string(digest(1))]), .string(digest(1))])
            ])
        ])
        #expect(pins(ats, "example.com")?.failsClosed == true)
    }

    @Test("the digest decodes to the 32 bytes written in the plist")
    func digestBytes() {
        let raw = Data((0..<32).map { UInt8($0) })
        let ats = pinned(["example.com": dict([keyLeafPins: pinArray([raw.base64EncodedString()])])])
        #expect(pins(ats, "example.com")?.leafSPKISHA256 == [raw])
    }

    @Test("pins do not apply to other hosts")
    func otherHosts() {
        let ats = pinned(["example.com": dict([keyLeafPins: pinArray([digest(1)])])])
        #expect(pins(ats, "example.org") == nil)
        #expect(pins(ats, "com") == nil)
    }
}
