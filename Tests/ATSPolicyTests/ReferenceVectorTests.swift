import Foundation
import Testing

@testable import ATSPolicy

// Every example vector of reference §8. Defaults of the table: iOS 18 with the iOS 18 SDK,
// URLSession, no trust override, public host names. For cleartext rows the verdict is the
// policy's; for HTTPS rows (whose verdict needs a handshake) the row asserts the requirement that
// decides it, named in the row's description.

private let tls13AES128: UInt16 = 0x1301
private let tls13AES256: UInt16 = 0x1302
private let tls13ChaCha: UInt16 = 0x1303
private let ecdheRSAAES128GCM: UInt16 = 0xC02F
private let ecdheECDSAAES256GCM: UInt16 = 0xC02C
private let staticRSA: [UInt16] = [0x009D, 0x009C, 0x0035, 0x002F]
private let rsaAES128CBCSHA256: UInt16 = 0x003C

private let exampleOnly = exceptions(["example.com": dict([:])])
private let exampleHTTP = exceptions(["example.com": dict([keyHTTP: yes])])
private let exampleHTTPSubdomains = exceptions(["example.com": dict([keyHTTP: yes, keyIS: yes])])
private let examplePFSOff = exceptions(["example.com": dict([keyPFS: no])])
private let aal = dict([keyAAL: yes])

/// The requirements of a fully ATS-governed host on iOS 18 (reference §3.2).
private let fullATS = Expect(
    outcome: .https, atsRequired: true, governed: true, minTLS: .tls12, maxTLS: .tls13, forwardSecrecy: true,
    offers: [tls13AES128, ecdheRSAAES128GCM], lacks: staticRSA, trust: .ats, mayOverride: false, minRSA: 2048,
    minEC: 256, atsKeySize: true, minHash: .sha256)

/// HTTPS without ATS: ordinary trust only, and the app may override it (reference §2.3 step 4).
private let notGoverned = Expect(
    outcome: .https, atsRequired: false, governed: false, trust: .standard, mayOverride: true, overrides: false)

private func with(_ base: Expect, _ adjust: (inout Expect) -> Void) -> Expect {
    var value = base
    adjust(&value)
    return value
}

private let cleartextVectors: [Scenario] = [
    Scenario(name: "#1 {} http://example.com → blocked -1022", ats: nil, url: "http://example.com/", expect: .blocked),
    Scenario(
        name: "#1 empty dict {} http://example.com → blocked -1022", ats: dict([:]), url: "http://example.com/",
        expect: .blocked),
    Scenario(name: "#3 AAL=YES http://example.com → allowed", ats: aal, url: "http://example.com/", expect: .allowed),
    Scenario(
        name: "#4 AAL=YES, WEB=YES http (URLSession) → blocked on iOS 10+", ats: dict([keyAAL: yes, keyWeb: yes]),
        url: "http://example.com/", expect: .blocked),
    Scenario(
        name: "#4 AAL=YES, WEB=YES http (URLSession) → allowed on iOS 9", ats: dict([keyAAL: yes, keyWeb: yes]),
        url: "http://example.com/", options: options("ios:9.0"), expect: .allowed),
    Scenario(
        name: "#5 AAL=YES, WEB=NO http → blocked (presence, not value)", ats: dict([keyAAL: yes, keyWeb: no]),
        url: "http://example.com/", expect: .blocked),
    Scenario(
        name: "#6 AAL=YES, MEDIA=YES http (URLSession) → blocked", ats: dict([keyAAL: yes, keyMedia: yes]),
        url: "http://example.com/", expect: .blocked),
    Scenario(
        name: "#7 WEB=YES http loaded by WKWebView → allowed", ats: dict([keyWeb: yes]), url: "http://example.com/",
        source: .webkit, expect: .allowed),
    Scenario(
        name: "#9 AAL=YES, LOCAL=YES http://printer.local → allowed", ats: dict([keyAAL: yes, keyLocal: yes]),
        url: "http://printer.local/", expect: with(.allowed) { $0.local = .dotLocal }),
    Scenario(
        name: "#11 AAL=<integer>1</integer> http → allowed (default: integer 1 is YES)",
        ats: dict([keyAAL: .integer(1)]), url: "http://example.com/", expect: .allowed),
    Scenario(
        name: "#11 AAL=<integer>1</integer> http → blocked with integerOneIsYes off",
        ats: dict([keyAAL: .integer(1)]), url: "http://example.com/",
        parse: ParseOptions(integerOneIsYes: false), expect: .blocked),
    Scenario(
        name: "#15 ED{example.com:{HTTP=YES}} http://example.com → allowed", ats: exampleHTTP,
        url: "http://example.com/", expect: with(.allowed) { $0.exceptionKey = "example.com" }),
    Scenario(
        name: "#16 ED{example.com:{HTTP=YES}} http://www.example.com → blocked (no IS)", ats: exampleHTTP,
        url: "http://www.example.com/", expect: with(.blocked) { $0.exceptionKey = .some(nil) }),
    Scenario(
        name: "#17 ED{example.com:{HTTP=YES, IS=YES}} http://www.example.com → allowed", ats: exampleHTTPSubdomains,
        url: "http://www.example.com/", expect: with(.allowed) { $0.exceptionKey = "example.com" }),
    Scenario(
        name: "#18 ED{example.com:{HTTP=YES, IS=YES}} http://a.b.example.com → allowed (default subdomainDepth any)",
        ats: exampleHTTPSubdomains, url: "http://a.b.example.com/",
        expect: with(.allowed) { $0.exceptionKey = "example.com" }),
    Scenario(
        name: "#18 ED{example.com:{HTTP=YES, IS=YES}} http://a.b.example.com → blocked (subdomainDepth one)",
        ats: exampleHTTPSubdomains, url: "http://a.b.example.com/", options: options { $0.subdomainDepth = .one },
        expect: with(.blocked) { $0.exceptionKey = .some(nil) }),
    Scenario(
        name: "#21 ED{Example.COM:{HTTP=YES}} http://example.com → blocked (keys must be lower case)",
        ats: exceptions(["Example.COM": dict([keyHTTP: yes])]), url: "http://example.com/",
        expect: with(.blocked) { $0.exceptionKey = .some(nil) }),
    Scenario(
        name: "#21 ED{Example.COM:{HTTP=YES}} http://Example.COM → blocked (URL host is lower-cased)",
        ats: exceptions(["Example.COM": dict([keyHTTP: yes])]), url: "http://Example.COM/",
        expect: with(.blocked) { $0.exceptionKey = .some(nil) }),
    Scenario(
        name: "#23 ED{*.example.com:{HTTP=YES}} http://api.example.com → blocked (no wildcards)",
        ats: exceptions(["*.example.com": dict([keyHTTP: yes])]), url: "http://api.example.com/",
        expect: with(.blocked) { $0.exceptionKey = .some(nil) }),
    Scenario(
        name: "#25 {} http://localhost:8080 → allowed on iOS 10+", ats: nil, url: "http://localhost:8080/",
        expect: with(.allowed) { $0.local = .unqualifiedName }),
    Scenario(
        name: "#25 {} http://localhost:8080 → blocked on iOS 9", ats: nil, url: "http://localhost:8080/",
        options: options("ios:9.0"), expect: .blocked),
    Scenario(
        name: "#26 {} http://devbox (unqualified) → allowed", ats: nil, url: "http://devbox/",
        expect: with(.allowed) { $0.local = .unqualifiedName }),
    Scenario(
        name: "#29 {} http://192.168.1.20 → allowed (RFC 1918 is local by default)", ats: nil,
        url: "http://192.168.1.20/", expect: with(.allowed) { $0.local = .localAddress }),
    Scenario(
        name: "#29 {} http://192.168.1.20 → blocked when local networks are loopback only", ats: nil,
        url: "http://192.168.1.20/",
        options: options { $0.localNetworks = [CIDRBlock(parsing: "127.0.0.0/8")!, CIDRBlock(parsing: "::1/128")!] },
        expect: with(.blocked) { $0.local = .some(nil) }),
    Scenario(
        name: "#30 {} http://203.0.113.5 → blocked on iOS 17 with the iOS 17 SDK", ats: nil,
        url: "http://203.0.113.5/", options: options("ios:17.0"), expect: .blocked),
    Scenario(
        name: "#30 {} http://203.0.113.5 → blocked on iOS 18 (default)", ats: nil, url: "http://203.0.113.5/",
        expect: .blocked),
    Scenario(
        name: "#30 {} http://203.0.113.5 → allowed on iOS 16", ats: nil, url: "http://203.0.113.5/",
        options: options("ios:16.4"), expect: .allowed),
    Scenario(
        name: "#30 {} http://203.0.113.5 → allowed on iOS 10", ats: nil, url: "http://203.0.113.5/",
        options: options("ios:10.0"), expect: .allowed),
    Scenario(
        name: "#30 {} http://203.0.113.5 → allowed on iOS 17 with an iOS 16 SDK", ats: nil,
        url: "http://203.0.113.5/", options: options("ios:17.0", sdk: "16.4"), expect: .allowed),
    Scenario(
        name: "#31 ED{203.0.113.0/24:{HTTP=YES}} http://203.0.113.5 → allowed (iOS 17+)",
        ats: exceptions(["203.0.113.0/24": dict([keyHTTP: yes])]), url: "http://203.0.113.5/",
        expect: with(.allowed) { $0.exceptionKey = "203.0.113.0/24" }),
    Scenario(
        name: "#69 {} https → redirect to http://example.com → the redirect target is blocked -1022", ats: nil,
        url: "http://example.com/", expect: .blocked),
]

private let httpsVectors: [Scenario] = [
    Scenario(
        name: "#2 {} https://example.com, compliant server → ATS governs: TLS 1.2+ ECDHE, a compliant server passes",
        ats: nil, url: "https://example.com/", expect: fullATS),
    Scenario(
        name: "#14 AAL=YES, ED{example.com:{}} https, TLS 1.1-only server → governed, min TLS 1.2 (server fails)",
        ats: exceptions(["example.com": dict([:])], globals: [keyAAL: yes]), url: "https://example.com/",
        expect: with(fullATS) { $0.exceptionKey = "example.com" }),
    Scenario(
        name: "#35 {} https, TLS 1.1-only server → min TLS 1.2 (server fails)", ats: nil,
        url: "https://example.com/", expect: fullATS),
    Scenario(
        name: "#36 ED{example.com:{TLS=TLSv1.1}} https, TLS 1.1 server → min TLS 1.1 on iOS 18 (allowed)",
        ats: exceptions(["example.com": dict([keyTLS: .string("TLSv1.1")])]), url: "https://example.com/",
        expect: Expect(governed: true, minTLS: .tls11, forwardSecrecy: true, trust: .ats, exceptionKey: "example.com")),
    Scenario(
        name: "#36 ED{example.com:{TLS=TLSv1.1}} https, TLS 1.1 server → min TLS 1.1 on iOS 9 (allowed)",
        ats: exceptions(["example.com": dict([keyTLS: .string("TLSv1.1")])]), url: "https://example.com/",
        options: options("ios:9.0"), expect: Expect(governed: true, minTLS: .tls11, maxTLS: .tls12)),
    Scenario(
        name: "#36 ED{example.com:{TLS=TLSv1.1}} https, TLS 1.1 server → floor TLS 1.2 on iOS 26 (blocked)",
        ats: exceptions(["example.com": dict([keyTLS: .string("TLSv1.1")])]), url: "https://example.com/",
        options: options("ios:26.0"), expect: Expect(governed: true, minTLS: .tls12)),
    Scenario(
        name: "#36 ED{example.com:{TLS=TLSv1.1}} https on iOS 26 with tls12FloorOn26 off → min TLS 1.1",
        ats: exceptions(["example.com": dict([keyTLS: .string("TLSv1.1")])]), url: "https://example.com/",
        options: options("ios:26.0") { $0.tls12FloorOn26 = false }, expect: Expect(governed: true, minTLS: .tls11)),
    Scenario(
        name: "#38 ED{example.com:{TLS=TLSv1.3}} https, TLS 1.2-only server → min TLS 1.3 (server fails)",
        ats: exceptions(["example.com": dict([keyTLS: .string("TLSv1.3")])]), url: "https://example.com/",
        expect: Expect(governed: true, minTLS: .tls13, maxTLS: .tls13, exceptionKey: "example.com")),
    Scenario(
        name: "#39 {} https, TLS 1.3-only server → TLS 1.3 within [1.2, 1.3] with its suites offered (allowed)",
        ats: nil, url: "https://example.com/",
        expect: with(fullATS) { $0.offers = [tls13AES128, tls13AES256, tls13ChaCha] }),
    Scenario(
        name: "#40 {} https, static-RSA-only server → forward secrecy required, no static-RSA suite offered (blocked)",
        ats: nil, url: "https://example.com/",
        expect: Expect(governed: true, forwardSecrecy: true, offers: [ecdheRSAAES128GCM], lacks: staticRSA)),
    Scenario(
        name: "#41 ED{example.com:{PFS=NO}} https, static-RSA-only server → static-RSA suites offered (allowed)",
        ats: examplePFSOff, url: "https://example.com/",
        expect: Expect(
            governed: true, minTLS: .tls12, forwardSecrecy: false, offers: staticRSA + [ecdheRSAAES128GCM],
            trust: .ats, exceptionKey: "example.com")),
    Scenario(
        name: "#42 ED{example.com:{PFS=NO}} https, only TLS_RSA_WITH_AES_128_CBC_SHA256 → 0x003C absent on iOS 18",
        ats: examplePFSOff, url: "https://example.com/",
        expect: Expect(forwardSecrecy: false, offers: staticRSA, lacks: [rsaAES128CBCSHA256])),
    Scenario(
        name: "#42 ED{example.com:{PFS=NO}} https, only 0x003C → absent on iOS 15.4 (blocked)", ats: examplePFSOff,
        url: "https://example.com/", options: options("ios:15.4"),
        expect: Expect(forwardSecrecy: false, lacks: [rsaAES128CBCSHA256])),
    Scenario(
        name: "#42 ED{example.com:{PFS=NO}} https, only 0x003C → offered on iOS 15.3 (allowed)", ats: examplePFSOff,
        url: "https://example.com/", options: options("ios:15.3"),
        expect: Expect(forwardSecrecy: false, offers: [rsaAES128CBCSHA256])),
    Scenario(
        name: "#45 AAL=YES https, TLS 1.0-only server → not governed, min TLS 1.0 on iOS 18 (allowed)", ats: aal,
        url: "https://example.com/", expect: with(notGoverned) { $0.minTLS = .tls10 }),
    Scenario(
        name: "#45 AAL=YES https, TLS 1.0-only server → not governed, min TLS 1.2 on iOS 26 (blocked)", ats: aal,
        url: "https://example.com/", options: options("ios:26.0"), expect: with(notGoverned) { $0.minTLS = .tls12 }),
    Scenario(
        name: "#45 AAL=YES https, TLS 1.0 server on macOS 26 → min TLS 1.2", ats: aal, url: "https://example.com/",
        options: options("macos:26.0"), expect: with(notGoverned) { $0.minTLS = .tls12 }),
    Scenario(
        name: "#45 AAL=YES https on iOS 26 with tls12FloorOn26 off → min TLS 1.0", ats: aal,
        url: "https://example.com/", options: options("ios:26.0") { $0.tls12FloorOn26 = false },
        expect: with(notGoverned) { $0.minTLS = .tls10 }),
    Scenario(
        name: "#46 {} https, RSA-1024 leaf from a user CA → ATS minimum RSA 2048 with ATS trust (ATS-trust -1200)",
        ats: nil, url: "https://example.com/",
        expect: Expect(governed: true, trust: .ats, mayOverride: false, minRSA: 2048, atsKeySize: true)),
    Scenario(
        name: "#47 AAL=YES https, RSA-1024 leaf → not governed, platform minimum RSA 2048, default trust (-1202)",
        ats: aal, url: "https://example.com/", expect: with(notGoverned) { $0.minRSA = 2048 }),
    Scenario(
        name: "#48 {} https, SHA-1-signed leaf from a user CA → minimum hash SHA-256 with ATS trust (ATS-trust)",
        ats: nil, url: "https://example.com/", expect: Expect(governed: true, trust: .ats, minHash: .sha256)),
    Scenario(
        name: "#51 {} https, expired certificate → ATS trust, no override (ATS-trust -1200)", ats: nil,
        url: "https://example.com/", expect: Expect(governed: true, trust: .ats, mayOverride: false)),
    Scenario(
        name: "#52 AAL=YES https, expired certificate → default trust (-1201)", ats: aal, url: "https://example.com/",
        expect: notGoverned),
    Scenario(
        name: "#53 {} https, self-signed certificate → ATS trust, the app may not override (ATS-trust)", ats: nil,
        url: "https://example.com/",
        expect: Expect(governed: true, trust: .ats, mayOverride: false, overrides: false)),
    Scenario(
        name: "#53 {} https, self-signed, app delegate tries to accept → still ATS trust, override refused", ats: nil,
        url: "https://example.com/", options: options { $0.trustOverrideHosts = ["example.com"] },
        expect: Expect(governed: true, trust: .ats, mayOverride: false, overrides: false)),
    Scenario(
        name: "#54 ED{example.com:{HTTP=YES}} + delegate accepts any trust, self-signed → override allowed",
        ats: exampleHTTP, url: "https://example.com/", options: options { $0.trustOverrideHosts = ["example.com"] },
        expect: Expect(
            outcome: .https, atsRequired: false, governed: true, minTLS: .tls12, forwardSecrecy: true,
            trust: .standard, mayOverride: true, overrides: true, exceptionKey: "example.com")),
    Scenario(
        name: "#56 AAL=YES https, hostname mismatch → not governed, default trust without override (-1202)",
        ats: aal, url: "https://example.com/", expect: notGoverned),
    Scenario(
        name: "#58 {} https://192.168.1.20, self-signed LAN cert → not ATS, default trust (-1202)", ats: nil,
        url: "https://192.168.1.20/", expect: with(notGoverned) { $0.local = .localAddress }),
    Scenario(
        name: "#59 {} https, public chain without SCTs → CT required for system roots, ATS trust (ATS-trust)",
        ats: nil, url: "https://example.com/", expect: Expect(governed: true, trust: .ats, ctSystemRoots: true)),
    Scenario(
        name: "#60 AAL=YES https, public chain without SCTs → CT still required (platform-wide), default trust",
        ats: aal, url: "https://example.com/",
        expect: with(notGoverned) {
            $0.ctSystemRoots = true
            $0.ctAllChains = false
        }),
    Scenario(
        name: "#61 {} https, no SCTs, user-installed CA → CT only for system roots (allowed)", ats: nil,
        url: "https://example.com/", expect: Expect(governed: true, ctSystemRoots: true, ctAllChains: false)),
    Scenario(
        name: "#64 PIN{example.com:{leaf:[matching]}} https → leaf pinned to the server's digest (allowed)",
        ats: dict([keyPinned: dict(["example.com": dict([keyLeafPins: pinArray([digest(1)])])])]),
        url: "https://example.com/",
        expect: Expect(governed: true, leafPins: [digest(1)], caPins: .some(nil), pinned: true, failsClosed: false)),
    Scenario(
        name: "#65 PIN{example.com:{leaf:[other]}} https → leaf pinned to another digest (blocked -1200)",
        ats: dict([keyPinned: dict(["example.com": dict([keyLeafPins: pinArray([digest(2)])])])]),
        url: "https://example.com/", expect: Expect(governed: true, leafPins: [digest(2)], pinned: true)),
]

@Suite("Reference §8 example vectors")
struct ReferenceVectorTests {
    @Test("cleartext vectors", arguments: cleartextVectors)
    func cleartext(_ scenario: Scenario) {
        scenario.run()
    }

    @Test("https vectors", arguments: httpsVectors)
    func https(_ scenario: Scenario) {
        scenario.run()
    }

    /// #61: the proxy's 397-day RSA-2048 SHA-256 leaf under a user-installed root passes every
    /// requirement: no SCTs needed, the user-root validity cap is 825 days.
    @Test("#61 a 397-day RSA-2048 SHA-256 SAN+EKU leaf under a user root meets every certificate minimum")
    func vector61Details() {
        let requirements = decide(nil, "https://example.com/").requirements
        #expect(requirements.minimumRSAKeyBits <= 2048)
        #expect(requirements.minimumSignatureHash <= .sha256)
        #expect(!requirements.certificateTransparency.allChains)
        let userCaps = requirements.validityCaps.filter { $0.anchors == .userInstalled }
        #expect(!userCaps.isEmpty)
        #expect(userCaps.allSatisfy { $0.maximumDays >= 397 })
        #expect(userCaps.contains { $0.maximumDays == 825 })
    }

    /// #65: the server's digest is not among the pins, so the pin check fails.
    @Test("#65 the compliant server's leaf digest is not in the pinned set")
    func vector65Details() {
        let ats = dict([keyPinned: dict(["example.com": dict([keyLeafPins: pinArray([digest(2)])])])])
        let pins = decide(ats, "https://example.com/").requirements.pins
        let serverDigest = Data(repeating: 1, count: 32)
        #expect(pins?.leafSPKISHA256?.contains(serverDigest) == false)
        #expect(pins?.failsClosed == false)
    }

    /// #69 as a sequence: the https request is fine, the cleartext redirect target is refused.
    @Test("#69 https → http redirect: first hop governed, redirect target blocked -1022")
    func vector69Redirect() {
        let first = decide(nil, "https://example.com/")
        let redirect = decide(nil, "http://example.com/")
        #expect(first.outcome == .https && first.requirements.atsGoverned)
        #expect(redirect.outcome == .cleartextBlocked)
        #expect(redirect.block?.error == .appTransportSecurityRequiresSecureConnection)
        #expect(redirect.block?.streamCode == nil)
    }
}
