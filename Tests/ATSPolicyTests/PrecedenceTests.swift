import Foundation
import Testing

@testable import ATSPolicy

// Reference §2.1–2.3 and §2.6: when ATS applies, the presence rule of the global keys, OS and SDK
// versions, and the request source.

private func with(_ base: Expect, _ adjust: (inout Expect) -> Void) -> Expect {
    var value = base
    adjust(&value)
    return value
}

private let governedHTTPS = Expect(outcome: .https, atsRequired: true, governed: true, minTLS: .tls12, trust: .ats)
private let ungovernedHTTPS = Expect(outcome: .https, atsRequired: false, governed: false, trust: .standard)

private let presenceRows: [Scenario] = [
    Scenario(name: "{} → blocked", ats: dict([:]), url: "http://example.com/", expect: .blocked),
    Scenario(name: "AAL=YES → allowed", ats: dict([keyAAL: yes]), url: "http://example.com/", expect: .allowed),
    Scenario(name: "AAL=NO → blocked", ats: dict([keyAAL: no]), url: "http://example.com/", expect: .blocked),
    Scenario(
        name: "AAL=YES, MEDIA=YES → blocked", ats: dict([keyAAL: yes, keyMedia: yes]), url: "http://example.com/",
        expect: .blocked),
    Scenario(
        name: "AAL=YES, MEDIA=NO → blocked", ats: dict([keyAAL: yes, keyMedia: no]), url: "http://example.com/",
        expect: .blocked),
    Scenario(
        name: "AAL=YES, WEB=YES → blocked", ats: dict([keyAAL: yes, keyWeb: yes]), url: "http://example.com/",
        expect: .blocked),
    Scenario(
        name: "AAL=YES, WEB=NO → blocked", ats: dict([keyAAL: yes, keyWeb: no]), url: "http://example.com/",
        expect: .blocked),
    Scenario(
        name: "AAL=YES, LOCAL=YES → blocked for a public host", ats: dict([keyAAL: yes, keyLocal: yes]),
        url: "http://example.com/", expect: .blocked),
    Scenario(
        name: "AAL=YES, LOCAL=NO → blocked", ats: dict([keyAAL: yes, keyLocal: no]), url: "http://example.com/",
        expect: .blocked),
    Scenario(
        name: "AAL=YES, all three fine-grained keys NO → blocked",
        ats: dict([keyAAL: yes, keyMedia: no, keyWeb: no, keyLocal: no]), url: "http://example.com/",
        expect: .blocked),
    Scenario(
        name: "AAL=YES, WEB=YES → https not exempted either (ATS extras apply)",
        ats: dict([keyAAL: yes, keyWeb: yes]), url: "https://example.com/", expect: governedHTTPS),
    Scenario(
        name: "AAL=YES → https without ATS extras, min TLS 1.0, app may override trust", ats: dict([keyAAL: yes]),
        url: "https://example.com/",
        expect: with(ungovernedHTTPS) {
            $0.minTLS = .tls10
            $0.mayOverride = true
            $0.forwardSecrecy = false
            $0.offers = [0x009C, 0xC02F]
            $0.atsKeySize = false
            $0.minHash = .sha224
        }),
    // iOS 9: only NSAllowsArbitraryLoads is honoured.
    Scenario(
        name: "iOS 9: AAL=YES, MEDIA=YES → allowed (MEDIA unknown)", ats: dict([keyAAL: yes, keyMedia: yes]),
        url: "http://example.com/", options: options("ios:9.3"), expect: .allowed),
    Scenario(
        name: "iOS 9: AAL=YES, LOCAL=NO → allowed (LOCAL unknown)", ats: dict([keyAAL: yes, keyLocal: no]),
        url: "http://example.com/", options: options("ios:9.0"), expect: .allowed),
    Scenario(
        name: "iOS 9: {} → blocked", ats: nil, url: "http://example.com/", options: options("ios:9.0"),
        expect: .blocked),
    Scenario(
        name: "iOS 9: LOCAL=YES, http://localhost → blocked (LOCAL unknown, local names not exempt)",
        ats: dict([keyLocal: yes]), url: "http://localhost/", options: options("ios:9.0"), expect: .blocked),
    Scenario(
        name: "iOS 9: WEB=YES, WKWebView → blocked (WEB unknown)", ats: dict([keyWeb: yes]), url: "http://example.com/",
        source: .webkit, options: options("ios:9.0"), expect: .blocked),
    Scenario(
        name: "iOS 9: http://192.168.1.20 → blocked (IP literals subject to ATS)", ats: nil,
        url: "http://192.168.1.20/", options: options("ios:9.0"), expect: .blocked),
    Scenario(
        name: "iOS 9: AAL=YES, http://printer.local → allowed", ats: dict([keyAAL: yes]), url: "http://printer.local/",
        options: options("ios:9.0"), expect: .allowed),
    Scenario(
        name: "iOS 10: AAL=YES, WEB=YES → blocked", ats: dict([keyAAL: yes, keyWeb: yes]), url: "http://example.com/",
        options: options("ios:10.0"), expect: .blocked),
    Scenario(
        name: "macOS 10.11: AAL=YES, WEB=YES → allowed", ats: dict([keyAAL: yes, keyWeb: yes]),
        url: "http://example.com/", options: options("macos:10.11"), expect: .allowed),
    Scenario(
        name: "macOS 10.12: AAL=YES, WEB=YES → blocked", ats: dict([keyAAL: yes, keyWeb: yes]),
        url: "http://example.com/", options: options("macos:10.12"), expect: .blocked),
    // Linked-on-or-after: no ATS for apps linked before the iOS 9 SDK.
    Scenario(
        name: "iOS 18, app linked with the iOS 8.4 SDK: {} http → allowed (no ATS)", ats: nil,
        url: "http://example.com/", options: options("ios:18.0", sdk: "8.4"), expect: .allowed),
    Scenario(
        name: "iOS 18, app linked with the iOS 8.4 SDK: {} https → not governed", ats: nil, url: "https://example.com/",
        options: options("ios:18.0", sdk: "8.4"), expect: ungovernedHTTPS),
    Scenario(
        name: "iOS 8 device: {} http → allowed (ATS does not exist)", ats: nil, url: "http://example.com/",
        options: options("ios:8.4"), expect: .allowed),
    Scenario(
        name: "macOS 10.10 device: {} http → allowed", ats: nil, url: "http://example.com/",
        options: options("macos:10.10"), expect: .allowed),
    // IP literals: iOS 10–16 exempt all, iOS 17 with the iOS 17 SDK only local ones.
    Scenario(
        name: "iOS 16: http://203.0.113.1 → allowed (every IP exempt)", ats: nil, url: "http://203.0.113.1/",
        options: options("ios:16.7"), expect: with(.allowed) { $0.local = .anyAddress }),
    Scenario(
        name: "iOS 17 / SDK 17: http://203.0.113.1 → blocked", ats: nil, url: "http://203.0.113.1/",
        options: options("ios:17.0"), expect: with(.blocked) { $0.local = .some(nil) }),
    Scenario(
        name: "iOS 17 / SDK 16.4: http://[2001:db8::1] → allowed", ats: nil, url: "http://[2001:db8::1]/",
        options: options("ios:17.5", sdk: "16.4"), expect: .allowed),
    Scenario(
        name: "macOS 13: http://203.0.113.1 → allowed", ats: nil, url: "http://203.0.113.1/",
        options: options("macos:13.6"), expect: .allowed),
    Scenario(
        name: "macOS 14 / SDK 14: http://203.0.113.1 → blocked", ats: nil, url: "http://203.0.113.1/",
        options: options("macos:14.0"), expect: .blocked),
    Scenario(
        name: "macOS 14 / SDK 13: http://203.0.113.1 → allowed", ats: nil, url: "http://203.0.113.1/",
        options: options("macos:14.0", sdk: "13.3"), expect: .allowed),
    Scenario(
        name: "iOS 18: AAL=YES, http://203.0.113.1 → allowed", ats: dict([keyAAL: yes]), url: "http://203.0.113.1/",
        expect: .allowed),
]

private let sourceRows: [Scenario] = [
    Scenario(
        name: "MEDIA=YES, AVFoundation → allowed", ats: dict([keyMedia: yes]), url: "http://example.com/",
        source: .media, expect: .allowed),
    Scenario(
        name: "MEDIA=YES, URLSession → blocked", ats: dict([keyMedia: yes]), url: "http://example.com/",
        expect: .blocked),
    Scenario(
        name: "MEDIA=YES, WKWebView → blocked", ats: dict([keyMedia: yes]), url: "http://example.com/",
        source: .webkit, expect: .blocked),
    Scenario(
        name: "MEDIA=NO, AVFoundation → blocked", ats: dict([keyMedia: no]), url: "http://example.com/",
        source: .media, expect: .blocked),
    Scenario(
        name: "WEB=YES, WKWebView → allowed", ats: dict([keyWeb: yes]), url: "http://example.com/", source: .webkit,
        expect: .allowed),
    Scenario(
        name: "WEB=YES, AVFoundation → blocked", ats: dict([keyWeb: yes]), url: "http://example.com/",
        source: .media, expect: .blocked),
    Scenario(
        name: "WEB=YES, URLSession → blocked", ats: dict([keyWeb: yes]), url: "http://example.com/", expect: .blocked),
    Scenario(
        name: "WEB=NO, WKWebView → blocked", ats: dict([keyWeb: no]), url: "http://example.com/", source: .webkit,
        expect: .blocked),
    Scenario(
        name: "AAL=YES, MEDIA=YES, AVFoundation → allowed", ats: dict([keyAAL: yes, keyMedia: yes]),
        url: "http://example.com/", source: .media, expect: .allowed),
    Scenario(
        name: "WEB=YES, WKWebView https → not governed", ats: dict([keyWeb: yes]), url: "https://example.com/",
        source: .webkit, expect: ungovernedHTTPS),
    Scenario(
        name: "WEB=YES + ED{example.com:{}}, WKWebView → blocked (exception domains unaffected)",
        ats: exceptions(["example.com": dict([:])], globals: [keyWeb: yes]), url: "http://example.com/",
        source: .webkit, expect: with(.blocked) { $0.exceptionKey = "example.com" }),
    Scenario(
        name: "WEB=YES + ED{example.com:{}}, WKWebView https → governed by the entry",
        ats: exceptions(["example.com": dict([:])], globals: [keyWeb: yes]), url: "https://example.com/",
        source: .webkit, expect: governedHTTPS),
    Scenario(
        name: "MEDIA=YES + ED{example.com:{}}, AVFoundation → blocked (exception domains unaffected)",
        ats: exceptions(["example.com": dict([:])], globals: [keyMedia: yes]), url: "http://example.com/",
        source: .media, expect: .blocked),
    Scenario(
        name: "WEB=YES + ED{example.com:{HTTP=YES}}, URLSession → allowed by the entry",
        ats: exceptions(["example.com": dict([keyHTTP: yes])], globals: [keyWeb: yes]), url: "http://example.com/",
        expect: .allowed),
    Scenario(
        name: "LOCAL=NO, WEB=YES, WKWebView http://localhost → allowed (web exemption after the local step)",
        ats: dict([keyLocal: no, keyWeb: yes]), url: "http://localhost/", source: .webkit, expect: .allowed),
    Scenario(
        name: "{} AVFoundation http://localhost → allowed (local default, any source)", ats: nil,
        url: "http://localhost/", source: .media, expect: .allowed),
]

@Suite("Reference §2.1–2.3, §2.6: presence rule, versions, request source")
struct PrecedenceTests {
    @Test("presence rule and OS/SDK versions", arguments: presenceRows)
    func presence(_ scenario: Scenario) {
        scenario.run()
    }

    @Test("request source (ForMedia / InWebContent)", arguments: sourceRows)
    func source(_ scenario: Scenario) {
        scenario.run()
    }

    @Test("the rule chain names the deciding key")
    func ruleChainNamesTheKey() {
        let aal = decide(dict([keyAAL: yes]), "http://example.com/")
        #expect(aal.ruleChain.contains { $0.keyPath?.components == ["NSAppTransportSecurity", keyAAL] })
        let entry = decide(exceptions(["example.com": dict([keyHTTP: yes, keyIS: yes])]), "http://www.example.com/")
        #expect(
            entry.ruleChain.contains {
                $0.keyPath?.components.starts(with: ["NSAppTransportSecurity", keyED, "example.com"]) == true
            })
        let blocked = decide(nil, "http://example.com/")
        #expect(blocked.fix?.contains(keyHTTP) == true)
    }

    @Test("App Review justification keys on the decision path")
    func justificationKeys() {
        #expect(decide(dict([keyAAL: yes]), "http://example.com/").justificationKeys == [keyAAL])
        #expect(decide(dict([keyWeb: yes]), "http://example.com/", source: .webkit).justificationKeys == [keyWeb])
        #expect(decide(dict([keyMedia: yes]), "http://example.com/", source: .media).justificationKeys == [keyMedia])
        #expect(
            decide(exceptions(["example.com": dict([keyHTTP: yes])]), "http://example.com/").justificationKeys.contains(
                keyHTTP))
        #expect(
            decide(exceptions(["example.com": dict([keyTLS: .string("TLSv1.0")])]), "https://example.com/")
                .justificationKeys.contains(keyTLS))
        #expect(decide(nil, "https://example.com/").justificationKeys.isEmpty)
    }
}
