import Foundation
import Testing

@testable import ATSPolicy

// Reference §2.3 step 4 and §3: the HTTPS requirements an exception entry produces.

private func requirements(
    _ entry: [String: PlistValue], _ url: String = "https://example.com/", platform: String = "ios:18.0",
    globals: [String: PlistValue] = [:]
) -> TLSRequirements {
    decide(exceptions(["example.com": .dictionary(entry)], globals: globals), url, options: options(platform))
        .requirements
}

@Suite("Reference §2.3 step 4 / §3: HTTPS requirements of exception entries")
struct RequirementsTests {
    @Test("an empty entry is full ATS even under NSAllowsArbitraryLoads")
    func emptyEntryIsFullATS() {
        let value = requirements([:], globals: [keyAAL: yes])
        #expect(value.atsGoverned)
        #expect(value.minimumVersion == .tls12)
        #expect(value.forwardSecrecyRequired)
        #expect(value.trust.kind == .ats)
        #expect(!value.cipherListUnrestricted)
    }

    @Test("updating changes several fields in one copy, the same value as setting them one by one")
    func updatingSeveralFields() {
        let original = requirements([:])
        let updated = original.updating { fields in
            fields.minimumVersion = .tls10
            fields.minimumRSAKeyBits = 0
        }
        var stepwise = original
        stepwise.minimumVersion = .tls10
        stepwise.minimumRSAKeyBits = 0
        #expect(updated == stepwise)
        #expect(updated.hashValue == stepwise.hashValue)
        #expect(updated.minimumVersion == .tls10 && updated.minimumRSAKeyBits == 0)
        #expect(original.minimumVersion == .tls12 && original.minimumRSAKeyBits == 2048)
        #expect(updated != original)
    }

    @Test("HTTP=YES keeps the TLS and PFS minimums but lets the app override trust")
    func insecureHTTPKeepsTLSMinimums() {
        let value = requirements([keyHTTP: yes])
        #expect(value.atsGoverned)
        #expect(value.minimumVersion == .tls12)
        #expect(value.forwardSecrecyRequired)
        #expect(value.trust.kind == .standard)
        #expect(value.trust.appMayOverride)
        #expect(!value.cipherListUnrestricted)
        #expect(!codes(value.cipherSuites).contains(0x009C))
    }

    @Test("PFS=NO alone adds static RSA; with HTTP=YES the cipher list is unrestricted")
    func forwardSecrecyWaiver() {
        let pfsOnly = requirements([keyPFS: no])
        #expect(!pfsOnly.forwardSecrecyRequired)
        #expect(!pfsOnly.cipherListUnrestricted)
        #expect(pfsOnly.trust.kind == .ats)
        #expect(codes(pfsOnly.cipherSuites).isSuperset(of: [0x009D, 0x009C, 0x0035, 0x002F]))
        let both = requirements([keyPFS: no, keyHTTP: yes])
        #expect(both.cipherListUnrestricted)
        #expect(both.trust.kind == .standard)
        #expect(both.minimumVersion == .tls12)
    }

    @Test("PFS=NO does not touch the TLS version requirement")
    func forwardSecrecyWaiverKeepsTLS() {
        #expect(requirements([keyPFS: no]).minimumVersion == .tls12)
        #expect(requirements([keyPFS: no, keyTLS: .string("TLSv1.0")]).minimumVersion == .tls10)
    }

    @Test("TLSv1.3 minimum is kept on iOS 26; below-1.2 minimums are raised to 1.2 there")
    func iOS26() {
        #expect(requirements([keyTLS: .string("TLSv1.3")], platform: "ios:26.0").minimumVersion == .tls13)
        #expect(requirements([keyTLS: .string("TLSv1.0")], platform: "ios:26.0").minimumVersion == .tls12)
        #expect(requirements([keyTLS: .string("TLSv1.0")], platform: "macos:26.0").minimumVersion == .tls12)
        #expect(requirements([keyTLS: .string("TLSv1.0")], platform: "macos:15.0").minimumVersion == .tls10)
        let local = decide(nil, "https://localhost/", options: options("ios:26.0")).requirements
        #expect(!local.atsGoverned)
        #expect(local.minimumVersion == .tls12)
    }

    @Test("the entry applies to https on any port")
    func anyPort() {
        let value = requirements([keyTLS: .string("TLSv1.1")], "https://example.com:8443/")
        #expect(value.minimumVersion == .tls11)
    }

    @Test("a per-host NIAP value overrides the global one")
    func niapOverride() {
        let ats = exceptions(
            ["example.com": dict([ATSKey.exceptionRequiresNIAP: .string("none")])],
            globals: [ATSKey.requiresNIAP: .string("FCP_v2.1")])
        let host = decide(ats, "https://example.com/", options: options("ios:26.4")).requirements
        #expect(host.niap == NIAPPackage.none)
        let other = decide(ats, "https://other.example/", options: options("ios:26.4")).requirements
        #expect(other.niap == .fcp21)
    }
    @Test(
        "§3.1 platform-wide certificate rules on iOS 13+: SAN, EKU after 2019-07-01, validity caps",
        arguments: [nil, dict([keyAAL: yes])] as [PlistValue?])
    func platformCertificateRules(_ ats: PlistValue?) {
        let value = decide(ats, "https://example.com/").requirements
        #expect(value.requireSubjectAltName)
        #expect(value.requireServerAuthEKUIssuedAfter == TrustDates.utc(2019, 7, 1))
        let caps = Set(
            value.validityCaps.map {
                "\($0.anchors.rawValue) \($0.notBeforeOnOrAfter) \($0.maximumDays) \($0.slackSeconds)"
            })
        let expected = Set([
            "system \(TrustDates.utc(2018, 3, 1)) 825 3600", "system \(TrustDates.utc(2020, 9, 1)) 398 0",
            "user-installed \(TrustDates.utc(2019, 7, 1)) 825 3600",
        ])
        #expect(caps == expected)
        let old = decide(ats, "https://example.com/", options: options("ios:12.4")).requirements
        #expect(!old.requireSubjectAltName)
        #expect(old.requireServerAuthEKUIssuedAfter == nil)
    }
}
