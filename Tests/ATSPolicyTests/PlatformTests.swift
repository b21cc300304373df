import Foundation
import Testing

@testable import ATSPolicy

// Platform thresholds (reference §2.1–2.2, §2.5, §3.1–3.4, §4.1, §4.4.1, NIAP in §1.1) and the
// cipher-suite lists per era (§3.2).

/// One row of the threshold table: the first version with the feature and one just below it.
struct ThresholdCase: Sendable, CustomTestStringConvertible {
    let feature: PlatformFeature
    let family: PlatformFamily
    let first: String
    let below: String

    var testDescription: String { "\(feature.rawValue) on \(family.displayName): \(first) yes, \(below) no" }
}

private func rows(_ feature: PlatformFeature, ios: (String, String), macos: (String, String)) -> [ThresholdCase] {
    [
        ThresholdCase(feature: feature, family: .iOS, first: ios.0, below: ios.1),
        ThresholdCase(feature: feature, family: .macOS, first: macos.0, below: macos.1),
    ]
}

/// Thresholds as the reference gives them (macOS as the iOS equivalent release).
private let thresholdCases: [ThresholdCase] =
    rows(.appTransportSecurity, ios: ("9.0", "8.4.1"), macos: ("10.11", "10.10.5"))
    + rows(.fineGrainedGlobalKeys, ios: ("10.0", "9.3.6"), macos: ("10.12", "10.11.6"))
    + rows(.platformRejectsSHA1AndSmallRSA, ios: ("11.0", "10.3.4"), macos: ("10.13", "10.12.6"))
    + rows(.platformCertificateTransparency, ios: ("12.1.1", "12.1"), macos: ("10.14.3", "10.14.2"))
    + rows(.tls13, ios: ("12.2", "12.1.4"), macos: ("10.14.4", "10.14.3"))
    + rows(.strictServerCertificates, ios: ("13.0", "12.5.7"), macos: ("10.15", "10.14.6"))
    + rows(.chachaAndRSA256CBCSuites, ios: ("13.0", "12.5"), macos: ("10.15", "10.14.6"))
    + rows(.cbcSHA2SuitesRemoved, ios: ("15.4", "15.3.1"), macos: ("12.3", "12.2.1"))
    + rows(.taskIdentifierConsoleLines, ios: ("12.0", "11.4.1"), macos: ("10.14", "10.13.6"))
    + rows(.modernCleartextConsoleWording, ios: ("15.0", "14.8"), macos: ("12.0", "11.7"))
    + rows(.externalIPAddressesRequireATS, ios: ("17.0", "16.7"), macos: ("14.0", "13.6"))
    + rows(.modernSecureConnectionFailedText, ios: ("18.0", "17.7"), macos: ("15.0", "14.7"))
    + rows(.tls12AbsoluteFloor, ios: ("26.0", "18.6"), macos: ("26.0", "15.6"))
    + rows(.niapTLSPackage, ios: ("26.4", "26.3"), macos: ("26.4", "26.3.1"))
    + rows(.postQuantumKeyExchange, ios: ("26.0", "18.7"), macos: ("26.0", "15.7"))
    + rows(.systemServicesRequireATS, ios: ("27.0", "26.5"), macos: ("27.0", "26.5"))

/// An ATS suite list per era, as IANA code points.
struct SuiteEraCase: Sendable, CustomTestStringConvertible {
    let platform: String
    let forwardSecret: Set<UInt16>
    let staticRSA: Set<UInt16>

    var testDescription: String { platform }
}

private let tls13Suites: Set<UInt16> = [0x1301, 0x1302, 0x1303]
/// The PFS list of the 2015–18 documentation.
private let docsPFS: Set<UInt16> = [
    0xC02C, 0xC02B, 0xC024, 0xC023, 0xC00A, 0xC009, 0xC030, 0xC02F, 0xC028, 0xC027, 0xC013,
]
/// Added in code of the iOS 13 era: the ChaCha20 suites and ECDHE_RSA_AES_256_CBC_SHA.
private let lateAdditions: Set<UInt16> = [0xCCA9, 0xCCA8, 0xC014]
private let cbcSHA2PFS: Set<UInt16> = [0xC024, 0xC023, 0xC028, 0xC027]
private let staticRSAModern: Set<UInt16> = [0x009D, 0x009C, 0x0035, 0x002F]
private let staticRSACBCSHA2: Set<UInt16> = [0x003D, 0x003C]

private let eraCases: [SuiteEraCase] = [
    SuiteEraCase(platform: "ios:9.0", forwardSecret: docsPFS, staticRSA: staticRSAModern.union(staticRSACBCSHA2)),
    SuiteEraCase(platform: "ios:12.1", forwardSecret: docsPFS, staticRSA: staticRSAModern.union(staticRSACBCSHA2)),
    SuiteEraCase(
        platform: "ios:12.2", forwardSecret: docsPFS.union(tls13Suites),
        staticRSA: staticRSAModern.union(staticRSACBCSHA2)),
    SuiteEraCase(
        platform: "ios:13.0", forwardSecret: docsPFS.union(tls13Suites).union(lateAdditions),
        staticRSA: staticRSAModern.union(staticRSACBCSHA2)),
    SuiteEraCase(
        platform: "ios:15.3", forwardSecret: docsPFS.union(tls13Suites).union(lateAdditions),
        staticRSA: staticRSAModern.union(staticRSACBCSHA2)),
    SuiteEraCase(
        platform: "ios:15.4", forwardSecret: docsPFS.union(tls13Suites).union(lateAdditions).subtracting(cbcSHA2PFS),
        staticRSA: staticRSAModern),
    SuiteEraCase(
        platform: "ios:18.0", forwardSecret: docsPFS.union(tls13Suites).union(lateAdditions).subtracting(cbcSHA2PFS),
        staticRSA: staticRSAModern),
    SuiteEraCase(
        platform: "macos:10.14.3", forwardSecret: docsPFS, staticRSA: staticRSAModern.union(staticRSACBCSHA2)),
    SuiteEraCase(
        platform: "macos:10.14.4", forwardSecret: docsPFS.union(tls13Suites),
        staticRSA: staticRSAModern.union(staticRSACBCSHA2)),
    SuiteEraCase(
        platform: "macos:12.2", forwardSecret: docsPFS.union(tls13Suites).union(lateAdditions),
        staticRSA: staticRSAModern.union(staticRSACBCSHA2)),
    SuiteEraCase(
        platform: "macos:12.3", forwardSecret: docsPFS.union(tls13Suites).union(lateAdditions).subtracting(cbcSHA2PFS),
        staticRSA: staticRSAModern),
]

@Suite("Platform thresholds and cipher lists per era")
struct PlatformTests {
    @Test("every PlatformFeature threshold, at and below", arguments: thresholdCases)
    func threshold(_ row: ThresholdCase) {
        let at = Platform(family: row.family, version: OSVersion(parsing: row.first)!)
        let below = Platform(family: row.family, version: OSVersion(parsing: row.below)!)
        #expect(at.has(row.feature))
        #expect(!below.has(row.feature))
        #expect(row.feature.threshold(for: row.family) == OSVersion(parsing: row.first)!)
    }

    @Test("the table covers every feature for both families")
    func tableIsComplete() {
        for feature in PlatformFeature.allCases {
            for family in PlatformFamily.allCases {
                #expect(
                    thresholdCases.contains { $0.feature == feature && $0.family == family }, "\(feature) \(family)")
            }
        }
    }

    @Test("linked-on-or-after features need the SDK too; the others do not")
    func linkedOnOrAfter() {
        let linked: Set<PlatformFeature> = [.appTransportSecurity, .externalIPAddressesRequireATS]
        for feature in PlatformFeature.allCases {
            #expect(feature.isLinkedOnOrAfter == linked.contains(feature), "\(feature)")
        }
        let oldSDK = Platform(family: .iOS, version: OSVersion(27, 0), sdk: OSVersion(8, 0))
        for feature in PlatformFeature.allCases {
            #expect(oldSDK.has(feature) == !linked.contains(feature), "\(feature)")
        }
        let sdk16 = Platform(family: .iOS, version: OSVersion(17, 0), sdk: OSVersion(16, 4))
        #expect(sdk16.has(.appTransportSecurity))
        #expect(!sdk16.has(.externalIPAddressesRequireATS))
        let macSDK13 = Platform(family: .macOS, version: OSVersion(14, 0), sdk: OSVersion(13, 0))
        #expect(!macSDK13.has(.externalIPAddressesRequireATS))
    }

    @Test("thresholds the reference marks uncertain are flagged")
    func uncertainFlags() {
        let uncertain: Set<PlatformFeature> = [
            .chachaAndRSA256CBCSuites, .cbcSHA2SuitesRemoved, .modernCleartextConsoleWording,
            .taskIdentifierConsoleLines, .modernSecureConnectionFailedText, .tls12AbsoluteFloor,
            .systemServicesRequireATS,
        ]
        for feature in PlatformFeature.allCases {
            #expect(feature.isUncertain == uncertain.contains(feature), "\(feature)")
        }
    }

    @Test(
        "Platform(parsing:) accepts family:version, SDK defaults to the OS",
        arguments: [
            ("ios:18.0", nil, PlatformFamily.iOS, "18.0", "18.0"), ("macos:15", nil, .macOS, "15.0", "15.0"),
            ("iOS:17.4", nil, .iOS, "17.4", "17.4"), ("MACOS:10.14.4", nil, .macOS, "10.14.4", "10.14.4"),
            ("ios:17.0", "16.4", .iOS, "17.0", "16.4"),
        ] as [(String, String?, PlatformFamily, String, String)])
    func platformParsing(_ text: String, _ sdk: String?, _ family: PlatformFamily, _ version: String, _ sdkText: String)
    {
        let value = Platform(parsing: text, sdk: sdk)
        #expect(value?.family == family)
        #expect(value?.version == OSVersion(parsing: version))
        #expect(value?.sdk == OSVersion(parsing: sdkText))
    }

    @Test(
        "Platform(parsing:) rejects malformed input",
        arguments: [
            ("ios", nil), ("ios:", nil), (":18", nil), ("android:14", nil), ("ios:18.x", nil), ("ios:18.0.1.2", nil),
            ("ios:-1", nil), ("ios 18", nil), ("ios:18", "x"), ("ios:18", "17..0"),
        ] as [(String, String?)])
    func platformParsingRejects(_ text: String, _ sdk: String?) {
        #expect(Platform(parsing: text, sdk: sdk) == nil)
    }

    @Test("the default platform is the newest modelled: iOS 27.0 with the iOS 27.0 SDK")
    func defaultPlatform() {
        #expect(Platform.default == Platform(family: .iOS, version: OSVersion(27, 0), sdk: OSVersion(27, 0)))
        #expect(EvaluationOptions().platform == .default)
        #expect(Platform.defaultArgument == "ios:27.0")
        #expect(Platform(parsing: Platform.defaultArgument) == .default)
        #expect(Platform.default.labelled == "iOS 27.0 (default)")
        #expect(Platform(parsing: "ios:18.0")!.labelled == "iOS 18.0")
        #expect(!Platform(parsing: "ios:27.0", sdk: "26.0")!.isDefault)
    }

    @Test("the default platform is at or past every threshold of the table, so it has every rule")
    func defaultPlatformHasEveryFeature() {
        for feature in PlatformFeature.allCases {
            #expect(Platform.default.has(feature), "\(feature)")
            #expect(Platform.default.version >= feature.threshold(for: .iOS), "\(feature)")
        }
    }

    @Test("the default platform applies the TLS 1.2 floor: a TLSv1.0 exception keeps TLS 1.2 (switch off: 1.0)")
    func defaultPlatformAppliesTheTLSFloor() throws {
        var configuration = ATSConfiguration()
        var entry = ExceptionDomain(key: "old.example.com")
        entry.minimumTLSVersion = .tls10
        entry.minimumTLSVersionSpecified = true
        configuration.exceptionDomains["old.example.com"] = entry
        let target = try RequestTarget(parsing: "https://old.example.com/")
        let current = ATSEvaluator(configuration: configuration, options: EvaluationOptions()).evaluate(target)
        #expect(current.requirements.minimumVersion == .tls12)
        #expect(current.ruleTexts.contains { $0.contains("is not honoured on iOS 27.0 (iOS 26 and later)") })
        var off = EvaluationOptions()
        off.tls12FloorOn26 = false
        #expect(
            ATSEvaluator(configuration: configuration, options: off).evaluate(target).requirements.minimumVersion
                == .tls10)
        let old = EvaluationOptions(platform: Platform(parsing: "ios:18.0")!)
        #expect(
            ATSEvaluator(configuration: configuration, options: old).evaluate(target).requirements.minimumVersion
                == .tls10)
    }

    @Test(
        "releases Apple skipped (iOS 19–25, macOS 16–25) are named, with 26 as what came next",
        arguments: [
            ("ios:19.0", true), ("ios:25.9", true), ("ios:18.7", false), ("ios:26.0", false), ("macos:16", true),
            ("macos:25.1", true), ("macos:15.7", false), ("macos:10.15", false), ("macos:26", false),
        ])
    func skippedReleases(_ text: String, _ skipped: Bool) {
        let note = Platform(parsing: text)!.skippedReleaseNote
        #expect((note != nil) == skipped)
        if let note { #expect(note.contains("came \(Platform(parsing: text)!.family.displayName) 26")) }
        #expect(Platform(parsing: "ios:26.0", sdk: "19.0")!.skippedReleaseNote != nil)
    }

    @Test("OSVersion compares missing components as zero")
    func osVersionOrdering() {
        #expect(OSVersion(parsing: "15") == OSVersion(parsing: "15.0.0"))
        #expect(OSVersion(parsing: "15.3.1")! < OSVersion(parsing: "15.4")!)
        #expect(OSVersion(parsing: "10.14.4")! > OSVersion(parsing: "10.14.3")!)
        #expect(OSVersion(parsing: "9.10")! > OSVersion(parsing: "9.3")!)
    }

    @Test("the ATS suite lists per era (ATS group and the static-RSA additions)", arguments: eraCases)
    func suitesPerEra(_ row: SuiteEraCase) {
        let platform = Platform(parsing: row.platform)!
        #expect(codes(CipherSuite.suites([.tls13, .forwardSecret], on: platform)) == row.forwardSecret)
        #expect(codes(CipherSuite.suites([.staticRSA], on: platform)) == row.staticRSA)
        // Through the evaluator: a governed host offers exactly the ATS group; PFS=NO adds static RSA.
        let evaluation = EvaluationOptions(platform: platform)
        let governed = decide(nil, "https://example.com/", options: evaluation).requirements
        #expect(codes(governed.cipherSuites) == row.forwardSecret)
        let waived = decide(
            exceptions(["example.com": dict([keyPFS: no])]), "https://example.com/", options: evaluation
        ).requirements
        #expect(codes(waived.cipherSuites) == row.forwardSecret.union(row.staticRSA))
    }

    @Test("TLS 1.3 is offered from iOS 12.2; TLSv1.3 minimum is unsatisfiable before")
    func tls13Availability() {
        let ats = exceptions(["example.com": dict([keyTLS: .string("TLSv1.3")])])
        let old = decide(ats, "https://example.com/", options: options("ios:12.1")).requirements
        #expect(old.maximumVersion == .tls12)
        #expect(!old.isSatisfiable)
        let new = decide(ats, "https://example.com/", options: options("ios:12.2")).requirements
        #expect(new.maximumVersion == .tls13)
        #expect(new.isSatisfiable)
    }

    @Test("no ATS list ever holds DHE, 3DES, RC4, NULL or export suites")
    func neverCompliant() {
        for suite in CipherSuite.catalogue {
            let name = suite.ianaName
            for banned in ["_DHE_", "3DES", "RC4", "NULL", "EXPORT", "_DES_"] {
                #expect(!name.contains(banned), "\(name)")
            }
            switch suite.group {
            case .tls13: #expect(name.hasPrefix("TLS_AES_") || name.hasPrefix("TLS_CHACHA20_"), "\(name)")
            case .forwardSecret: #expect(name.hasPrefix("TLS_ECDHE_"), "\(name)")
            case .staticRSA: #expect(name.hasPrefix("TLS_RSA_WITH_AES_"), "\(name)")
            }
        }
    }

    @Test("suite names and code points follow IANA")
    func ianaNames() {
        #expect(CipherSuite.byCode(0xC02F)?.ianaName == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
        #expect(CipherSuite.byCode(0x003C)?.ianaName == "TLS_RSA_WITH_AES_128_CBC_SHA256")
        #expect(CipherSuite.byCode(0xCCA9)?.ianaName == "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256")
        #expect(CipherSuite.byCode(0x1303)?.ianaName == "TLS_CHACHA20_POLY1305_SHA256")
        #expect(CipherSuite.byIANAName("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA")?.code == 0xC014)
        #expect(CipherSuite.byCode(0xC014)?.hexCode == "0xC014")
        #expect(CipherSuite.byCode(0x002F)?.hexCode == "0x002F")
        #expect(Set(CipherSuite.catalogue.map(\.code)).count == CipherSuite.catalogue.count)
    }

    @Test("platform-wide certificate rules by era (§3.1): key sizes and hashes without ATS")
    func platformCertificateRules() {
        let aal = dict([keyAAL: yes])
        let ios10 = decide(aal, "https://example.com/", options: options("ios:10.3")).requirements
        #expect(ios10.minimumRSAKeyBits == 0)
        #expect(ios10.minimumSignatureHash == .sha1)
        let ios11 = decide(aal, "https://example.com/", options: options("ios:11.0")).requirements
        #expect(ios11.minimumRSAKeyBits == 2048)
        #expect(ios11.minimumSignatureHash > .sha1)
        let ios13 = decide(aal, "https://example.com/", options: options("ios:13.0")).requirements
        #expect(ios13.minimumRSAKeyBits == 2048)
        #expect(ios13.minimumECKeyBits == 256)
        #expect(ios13.minimumSignatureHash == .sha224)
        #expect(ios13.requireSubjectAltName)
        // ATS rejects SHA-224 where the plain SSL policy allows it.
        #expect(decide(nil, "https://example.com/").requirements.minimumSignatureHash == .sha256)
    }

    @Test("CT: platform-wide from iOS 12.1.1 for system roots; NSRequiresCertificateTransparency per mode")
    func certificateTransparency() {
        let key = exceptions(["example.com": dict([keyCT: yes])])
        let before = decide(key, "https://example.com/", options: options("ios:12.1")).requirements
        #expect(before.certificateTransparency.systemRootsIssuedOnOrAfter == nil)
        #expect(before.certificateTransparency.allChains)
        let after = decide(key, "https://example.com/", options: options("ios:12.1.1")).requirements
        #expect(after.certificateTransparency.systemRootsIssuedOnOrAfter == ctDate)
        #expect(!after.certificateTransparency.allChains)
        let always = decide(key, "https://example.com/", options: options { $0.requiresCTKey = .always })
        #expect(always.requirements.certificateTransparency.allChains)
        let never = decide(key, "https://example.com/", options: options("ios:12.0") { $0.requiresCTKey = .never })
        #expect(!never.requirements.certificateTransparency.allChains)
    }

    @Test("PFS=NO drops the ATS key-size extra (docs) unless the switch is off; the platform minimum stays")
    func forwardSecrecyWaiverKeySize() {
        let ats = exceptions(["example.com": dict([keyPFS: no])])
        let documented = decide(ats, "https://example.com/").requirements
        #expect(!documented.atsKeySizeCheck)
        #expect(documented.minimumRSAKeyBits == 2048)
        let code = decide(ats, "https://example.com/", options: options { $0.forwardSecrecyWaiverSkipsKeySize = false })
        #expect(code.requirements.atsKeySizeCheck)
        #expect(code.requirements.minimumRSAKeyBits == 2048)
        #expect(!code.requirements.forwardSecrecyRequired)
    }

    @Test("NIAP FCP mode from 26.4: TLS 1.2 offers only ECDHE AES-GCM")
    func niap() {
        let ats = dict([ATSKey.requiresNIAP: .string("FCP_v2.1")])
        let on = decide(ats, "https://example.com/", options: options("ios:26.4")).requirements
        #expect(on.niap == .fcp21)
        let tls12 = on.cipherSuites.filter { $0.group != .tls13 }
        #expect(!tls12.isEmpty)
        #expect(tls12.allSatisfy { $0.ianaName.hasPrefix("TLS_ECDHE_") && $0.ianaName.contains("_GCM_") })
        #expect(codes(on.cipherSuites).isSuperset(of: tls13Suites))
        let before = decide(ats, "https://example.com/", options: options("ios:26.3")).requirements
        #expect(before.niap == NIAPPackage.none)
        #expect(codes(before.cipherSuites).contains(0xC013))
    }
}
