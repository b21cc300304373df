import Foundation
import Testing

@testable import ATSPolicy

/// Lint findings with their exact messages, fixes and Apple log lines.
@Suite struct LintTests {
    private func lint(
        _ ats: [String: PlistValue], info: [String: PlistValue]? = nil, platform: String = "ios:18.0"
    ) -> LintReport {
        let source: LoadedInfoPlist
        if let info {
            var root = info
            root[ATSKey.root] = .dictionary(ats)
            source = LoadedInfoPlist(
                path: "Info.plist", kind: .infoPlist, innerPath: nil, infoPlist: root, atsValue: root[ATSKey.root],
                format: "XML")
        } else {
            source = LoadedInfoPlist(
                path: "ats.plist", kind: .atsDictionary, innerPath: nil, infoPlist: nil, atsValue: .dictionary(ats),
                format: "XML")
        }
        return ATSLinter(source: source, platform: Platform(parsing: platform)!).lint()
    }

    private func finding(_ report: LintReport, _ code: String) -> ConfigMessage? {
        report.findings.first { $0.code == code }
    }

    private func exceptions(_ entries: [String: [String: PlistValue]]) -> [String: PlistValue] {
        [ATSKey.exceptionDomains: .dictionary(entries.mapValues { .dictionary($0) })]
    }

    @Test func stringBooleanIsAnErrorWithApplesLogLine() throws {
        let report = lint([ATSKey.allowsArbitraryLoads: .string("YES")])
        let item = try #require(finding(report, "wrong-type"))
        #expect(item.severity == .error)
        #expect(item.keyPath.description == "NSAppTransportSecurity → NSAllowsArbitraryLoads")
        #expect(item.appleLog == "App Transport Security value for key NSAllowsArbitraryLoads must be a boolean")
        #expect(item.message == "NSAllowsArbitraryLoads is a string, not a Boolean, so ATS ignores the key entirely")
        #expect(item.fix == "replace <string>YES</string> with <true/>")
        #expect(report.exitStatus(strict: false) == 2)
    }

    @Test func uppercaseExceptionKeyNeverMatches() throws {
        let report = lint(exceptions(["Example.COM": [ATSKey.exceptionAllowsInsecureHTTPLoads: .bool(true)]]))
        let item = try #require(finding(report, "uppercase-key"))
        #expect(item.severity == .error)
        #expect(
            item.message
                == "'Example.COM' has upper-case letters; ATS compares exception keys with the lower-cased host, so it never matches"
        )
        #expect(item.fix == "use 'example.com'")
    }

    @Test func portWildcardSchemeAndLeadingDotKeys() throws {
        let report = lint(
            exceptions([
                "example.com:443": [:], "*.example.org": [:], "https://example.net": [:], ".example.io": [:],
            ]))
        #expect(
            finding(report, "port-in-key")?.message
                == "'example.com:443' includes a port; keys never include ports, so it never matches")
        #expect(finding(report, "port-in-key")?.fix == "use 'example.com' (an exception applies to every port)")
        #expect(
            finding(report, "wildcard-key")?.message
                == "'*.example.org' uses a wildcard; ATS does not support wildcards, so it never matches")
        #expect(finding(report, "wildcard-key")?.fix == "use 'example.org' with NSIncludesSubdomains = YES")
        #expect(finding(report, "scheme-in-key")?.fix == "use 'example.net'")
        #expect(finding(report, "leading-dot-key")?.fix == "use 'example.io' with NSIncludesSubdomains = YES")
        #expect(report.findings.filter { $0.severity == .error }.count >= 4)
    }

    @Test func trailingDotKeyIsAWarning() throws {
        let report = lint(exceptions(["example.com.": [ATSKey.exceptionAllowsInsecureHTTPLoads: .bool(true)]]))
        let item = try #require(finding(report, "trailing-dot-key"))
        #expect(item.severity == .warning)
        #expect(
            item.message
                == "'example.com.' ends with a dot, so it matches only URLs written with the trailing dot, not 'example.com'"
        )
        #expect(report.exitStatus(strict: false) == 0)
        #expect(report.exitStatus(strict: true) == 1)
    }

    @Test(arguments: [
        ("TLSv1.4", nil), ("tlsv1.2", "write TLSv1.2"), ("TLSV1.3", "write TLSv1.3"), ("1.0", "write TLSv1.0"),
    ])
    func invalidMinimumTLSVersion(value: String, fix: String?) throws {
        let report = lint(exceptions(["example.com": [ATSKey.exceptionMinimumTLSVersion: .string(value)]]))
        let item = try #require(finding(report, "invalid-tls-version"))
        #expect(item.severity == .error)
        #expect(
            item.message
                == "'\(value)' is not a valid NSExceptionMinimumTLSVersion (valid: TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3; exact case), so the default TLSv1.2 applies"
        )
        #expect(item.fix == (fix ?? "use one of TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3"))
    }

    @Test func invalidCIDRUsesApplesFaultText() throws {
        let report = lint(exceptions(["10.0.0.0/33": [ATSKey.exceptionAllowsInsecureHTTPLoads: .bool(true)]]))
        let item = try #require(finding(report, "invalid-cidr"))
        #expect(item.appleLog == "App Transport Security exception 10.0.0.0/33 is not a valid CIDR notation.")
        #expect(item.severity == .error)
    }

    @Test func emptyAndInvalidPinsFailClosed() throws {
        let report = lint([
            ATSKey.pinnedDomains: .dictionary([
                "a.example.com": .dictionary([ATSKey.pinnedLeafIdentities: .array([])]),
                "b.example.com": .dictionary([
                    ATSKey.pinnedCAIdentities: .array([.dictionary([ATSKey.spkiSHA256: .string("not base64!")])])
                ]),
                "c.example.com": .dictionary([ATSKey.includesSubdomains: .bool(true)]),
            ])
        ])
        let empty = report.findings.filter { $0.code == "pin-empty" }.map(\.keyPath.description).sorted()
        #expect(
            empty == [
                "NSAppTransportSecurity → NSPinnedDomains → a.example.com → NSPinnedLeafIdentities",
                "NSAppTransportSecurity → NSPinnedDomains → b.example.com → NSPinnedCAIdentities",
            ])
        #expect(
            finding(report, "invalid-pin")?.message == "'not base64!' is not the base64 of a 32-byte SHA-256 digest")
        #expect(
            finding(report, "pin-nothing")?.message
                == "the entry has neither NSPinnedLeafIdentities nor NSPinnedCAIdentities, so it pins nothing")
    }

    @Test func arbitraryLoadsIgnoredBecauseOfPresence() throws {
        let report = lint([
            ATSKey.allowsArbitraryLoads: .bool(true), ATSKey.allowsArbitraryLoadsInWebContent: .bool(false),
        ])
        let item = try #require(finding(report, "aal-ignored"))
        #expect(item.severity == .warning)
        #expect(
            item.message
                == "NSAllowsArbitraryLoads = YES is silently ignored on iOS 10 / macOS 10.12 and later because NSAllowsArbitraryLoadsInWebContent is present (presence alone, whatever the value)"
        )
    }

    @Test func arbitraryLoadsPairingIsANoteWhenTheAppSupportsIOS9() throws {
        let info: [String: PlistValue] = ["CFBundleIdentifier": .string("x"), "MinimumOSVersion": .string("9.0")]
        let report = lint(
            [ATSKey.allowsArbitraryLoads: .bool(true), ATSKey.allowsLocalNetworking: .bool(true)], info: info)
        #expect(finding(report, "aal-ignored")?.severity == .note)
    }

    @Test func exceptionReenablingATSUnderArbitraryLoads() throws {
        var ats = exceptions(["secure.example.com": [:]])
        ats[ATSKey.allowsArbitraryLoads] = .bool(true)
        let item = try #require(finding(lint(ats), "exception-reenables-ats"))
        #expect(
            item.message
                == "this entry replaces NSAllowsArbitraryLoads for secure.example.com: full ATS (TLS 1.2+, forward secrecy, no cleartext) applies there"
        )
    }

    @Test func keysThatDoNothing() {
        var ats = exceptions([
            "example.com": [
                ATSKey.exceptionRequiresForwardSecrecy: .bool(true),
                ATSKey.exceptionMinimumTLSVersion: .string("TLSv1.2"),
            ]
        ])
        ats[ATSKey.allowsArbitraryLoads] = .bool(false)
        let inert = lint(ats).findings.filter { $0.code == "inert-key" }.map(\.message).sorted()
        #expect(
            inert == [
                "this key does nothing: NSAllowsArbitraryLoads = NO is the default",
                "this key does nothing: TLSv1.2 is the default minimum",
                "this key does nothing: forward secrecy is required by default",
            ])
    }

    @Test func obsoleteCertificateTransparencyKey() throws {
        let report = lint(exceptions(["example.com": [ATSKey.requiresCertificateTransparency: .bool(true)]]))
        #expect(finding(report, "obsolete-key")?.severity == .warning)
    }

    @Test func misspeltAndUndocumentedKeys() throws {
        var ats = exceptions(["example.com": ["NSExceptionAllowsLocalNetworking": .bool(true)]])
        ats["NSAllowsArbitaryLoads"] = .bool(true)
        let report = lint(ats)
        let misspelt = try #require(finding(report, "unknown-key"))
        #expect(
            misspelt.message
                == "NSAllowsArbitaryLoads is not an ATS key at top level and is ignored; it looks like a misspelling of NSAllowsArbitraryLoads"
        )
        #expect(misspelt.severity == .error)
        #expect(finding(report, "undocumented-key")?.keyPath.components.last == "NSExceptionAllowsLocalNetworking")
    }

    @Test func atsKeysAtTheInfoPlistRootAreMisplaced() throws {
        let root: [String: PlistValue] = ["CFBundleIdentifier": .string("x"), "NSAllowsArbitraryLoads": .bool(true)]
        let source = LoadedInfoPlist(
            path: "Info.plist", kind: .infoPlist, innerPath: nil, infoPlist: root, atsValue: nil, format: "XML")
        let report = ATSLinter(source: source).lint()
        let item = try #require(finding(report, "misplaced-key"))
        #expect(
            item.message
                == "NSAllowsArbitraryLoads is at the Info.plist root, outside NSAppTransportSecurity, so ATS never reads it"
        )
        #expect(report.exitStatus(strict: false) == 2)
    }

    @Test func legacyKeysAreWarnings() throws {
        let report = lint(exceptions(["example.com": ["NSTemporaryExceptionAllowsInsecureHTTPLoads": .bool(true)]]))
        let item = try #require(finding(report, "legacy-key"))
        #expect(
            item.message == "NSTemporaryExceptionAllowsInsecureHTTPLoads is a legacy spelling that current iOS ignores")
        #expect(item.severity == .warning)
    }

    @Test func localNameEntryWithoutHTTPIsStricterThanTheDefault() {
        let report = lint(exceptions(["localhost": [:]]))
        #expect(finding(report, "local-exception-stricter")?.severity == .warning)
    }

    @Test func explicitLocalNetworkingNoIsAWarning() {
        #expect(
            finding(lint([ATSKey.allowsLocalNetworking: .bool(false)]), "local-networking-no")?.severity == .warning)
    }

    @Test func ipKeysBeforeIOS17AndTLSFloorOn26() {
        let ats = exceptions([
            "203.0.113.0/24": [ATSKey.includesSubdomains: .bool(true)],
            "legacy.example.com": [ATSKey.exceptionMinimumTLSVersion: .string("TLSv1.0")],
        ])
        #expect(finding(lint(ats, platform: "ios:16.0"), "ip-key-old-os") != nil)
        #expect(finding(lint(ats, platform: "ios:18.0"), "ip-key-old-os") == nil)
        #expect(finding(lint(ats), "inert-key")?.message == "NSIncludesSubdomains has no effect on an IP or CIDR entry")
        #expect(finding(lint(ats, platform: "ios:26.0"), "tls-floor") != nil)
        #expect(finding(lint(ats, platform: "ios:18.0"), "tls-floor") == nil)
    }

    @Test func appReviewJustificationFlags() {
        var ats = exceptions([
            "http.example.com": [ATSKey.exceptionAllowsInsecureHTTPLoads: .bool(true)],
            "old.example.com": [ATSKey.exceptionMinimumTLSVersion: .string("TLSv1.1")],
            "pfs.example.com": [ATSKey.exceptionRequiresForwardSecrecy: .bool(false)],
        ])
        ats[ATSKey.allowsArbitraryLoadsInWebContent] = .bool(true)
        ats[ATSKey.allowsLocalNetworking] = .bool(true)
        let flags = lint(ats).findings.filter { $0.code == "app-review" }.map(\.keyPath.description).sorted()
        #expect(
            flags == [
                "NSAppTransportSecurity → NSAllowsArbitraryLoadsInWebContent",
                "NSAppTransportSecurity → NSExceptionDomains → http.example.com → NSExceptionAllowsInsecureHTTPLoads",
                "NSAppTransportSecurity → NSExceptionDomains → old.example.com → NSExceptionMinimumTLSVersion",
            ])
    }

    @Test func cleanConfigurationExitsZeroEvenWhenStrict() {
        let report = lint(exceptions(["example.com": [ATSKey.includesSubdomains: .bool(true)]]))
        #expect(report.count(.error) == 0 && report.count(.warning) == 0)
        #expect(report.exitStatus(strict: true) == 0)
    }

    @Test(
        "NSRequiresCertificateTransparency is obsolete from platform-wide CT on, and the line names the platform",
        arguments: [
            ("ios:27.0", true), ("ios:18.0", true), ("ios:12.1.1", true), ("ios:12.1", false), ("macos:26", true),
            ("macos:10.14.2", false),
        ])
    func obsoleteCTKeyNamesTheVersions(_ platform: String, _ flagged: Bool) throws {
        let report = lint(
            exceptions(["example.com": [ATSKey.requiresCertificateTransparency: .bool(true)]]), platform: platform)
        let found = finding(report, "obsolete-key")
        #expect((found != nil) == flagged)
        if let found {
            let emulated = Platform(parsing: platform)!
            #expect(found.message.hasPrefix("NSRequiresCertificateTransparency is obsolete on \(emulated):"))
            let since = PlatformFeature.platformCertificateTransparency.threshold(for: emulated.family)
            #expect(found.message.contains("since \(emulated.family.displayName) \(since)"))
            #expect(found.keyPath.description.hasSuffix(ATSKey.requiresCertificateTransparency))
        }
    }

    @Test(
        "a TLSv1.0/TLSv1.1 minimum has no effect on iOS/macOS 26+, still needs App Review, and names the platform",
        arguments: [
            ("TLSv1.0", "ios:27.0", true), ("TLSv1.1", "ios:26.0", true), ("TLSv1.1", "macos:26.1", true),
            ("TLSv1.0", "ios:18.0", false), ("TLSv1.2", "ios:27.0", false),
        ])
    func lowTLSMinimumOn26(_ version: String, _ platform: String, _ flagged: Bool) throws {
        let report = lint(
            exceptions(["legacy.example.com": [ATSKey.exceptionMinimumTLSVersion: .string(version)]]),
            platform: platform)
        let found = finding(report, "tls-floor")
        #expect((found != nil) == flagged)
        if let found {
            #expect(found.severity == .warning)
            #expect(found.message.hasPrefix("\(version) has no effect on \(Platform(parsing: platform)!) "))
            #expect(found.message.contains("iOS/macOS 26 and later"))
            #expect(found.message.contains("App Review still asks for a justification"))
            #expect(found.fix?.contains("below iOS 26 / macOS 26") == true)
        }
        // The App Review note itself stays, on every platform, for any minimum below TLS 1.2.
        let review = report.findings.contains { $0.code == "app-review" && $0.message.contains(version) }
        #expect(review == (version != "TLSv1.2"))
    }
}
