import Foundation
import Testing

@testable import ATSPolicy

// Reference §2.4 (finding the exception entry) and §2.5 (local hosts and IP addresses).

private func with(_ base: Expect, _ adjust: (inout Expect) -> Void) -> Expect {
    var value = base
    adjust(&value)
    return value
}

private func allowed(by key: String) -> Expect { with(.allowed) { $0.exceptionKey = .some(key) } }
private func blocked(by key: String?) -> Expect { with(.blocked) { $0.exceptionKey = .some(key) } }
private func local(_ kind: LocalHostKind) -> Expect { with(.allowed) { $0.local = .some(kind) } }
private let notLocal = with(.blocked) { $0.local = .some(nil) }

private let localRows: [Scenario] = [
    Scenario(
        name: "localhost → unqualified, allowed", ats: nil, url: "http://localhost/", expect: local(.unqualifiedName)),
    Scenario(
        name: "devbox → unqualified, allowed", ats: nil, url: "http://devbox:3000/", expect: local(.unqualifiedName)),
    Scenario(name: "printer.local → .local, allowed", ats: nil, url: "http://printer.local/", expect: local(.dotLocal)),
    Scenario(
        name: "printer.local. → .local, allowed", ats: nil, url: "http://printer.local./", expect: local(.dotLocal)),
    Scenario(
        name: "Printer.LOCAL → lower-cased .local, allowed", ats: nil, url: "http://Printer.LOCAL/",
        expect: local(.dotLocal)),
    Scenario(
        name: "a.b.printer.local → .local, allowed", ats: nil, url: "http://a.b.printer.local/",
        expect: local(.dotLocal)),
    Scenario(name: "127.0.0.1 → local address", ats: nil, url: "http://127.0.0.1/", expect: local(.localAddress)),
    Scenario(name: "127.8.9.10 → loopback /8", ats: nil, url: "http://127.8.9.10/", expect: local(.localAddress)),
    Scenario(name: "[::1] → local address", ats: nil, url: "http://[::1]:8080/", expect: local(.localAddress)),
    Scenario(name: "[fe80::1] → link-local", ats: nil, url: "http://[fe80::1]/", expect: local(.localAddress)),
    Scenario(name: "169.254.10.20 → link-local", ats: nil, url: "http://169.254.10.20/", expect: local(.localAddress)),
    Scenario(name: "192.168.1.20 → RFC 1918", ats: nil, url: "http://192.168.1.20/", expect: local(.localAddress)),
    Scenario(name: "10.1.2.3 → RFC 1918", ats: nil, url: "http://10.1.2.3/", expect: local(.localAddress)),
    Scenario(name: "172.16.0.1 → RFC 1918", ats: nil, url: "http://172.16.0.1/", expect: local(.localAddress)),
    Scenario(name: "172.31.255.254 → RFC 1918", ats: nil, url: "http://172.31.255.254/", expect: local(.localAddress)),
    Scenario(name: "[fd12::1] → ULA fc00::/7", ats: nil, url: "http://[fd12::1]/", expect: local(.localAddress)),
    Scenario(
        name: "[::ffff:192.168.1.20] → IPv4-mapped private, local", ats: nil, url: "http://[::ffff:192.168.1.20]/",
        expect: local(.localAddress)),
    Scenario(
        name: "[::ffff:127.0.0.1] → IPv4-mapped loopback, local", ats: nil, url: "http://[::ffff:127.0.0.1]/",
        expect: local(.localAddress)),
    Scenario(name: "172.32.0.1 → outside 172.16/12, blocked", ats: nil, url: "http://172.32.0.1/", expect: notLocal),
    Scenario(name: "100.64.0.1 (CGNAT) → not local, blocked", ats: nil, url: "http://100.64.0.1/", expect: notLocal),
    Scenario(name: "203.0.113.1 → not local, blocked", ats: nil, url: "http://203.0.113.1/", expect: notLocal),
    Scenario(name: "[fe00::1] → not local, blocked", ats: nil, url: "http://[fe00::1]/", expect: notLocal),
    Scenario(name: "[2001:db8::1] → not local, blocked", ats: nil, url: "http://[2001:db8::1]/", expect: notLocal),
    Scenario(
        name: "[::ffff:203.0.113.1] → IPv4-mapped public, blocked", ats: nil, url: "http://[::ffff:203.0.113.1]/",
        expect: notLocal),
    Scenario(
        name: "nas.example.com (a name, even if it resolves privately) → blocked", ats: nil,
        url: "http://nas.example.com/", expect: notLocal),
    Scenario(
        name: "printer.local.example.com → not .local, blocked", ats: nil, url: "http://printer.local.example.com/",
        expect: notLocal),
    Scenario(
        name: "localhost https → not governed", ats: nil, url: "https://localhost/",
        expect: Expect(outcome: .https, atsRequired: false, governed: false, trust: .standard, mayOverride: true)),
    // Explicit NSAllowsLocalNetworking.
    Scenario(
        name: "LOCAL=YES: localhost allowed", ats: dict([keyLocal: yes]), url: "http://localhost/",
        expect: local(.unqualifiedName)),
    Scenario(
        name: "LOCAL=YES: 192.168.1.20 allowed", ats: dict([keyLocal: yes]), url: "http://192.168.1.20/",
        expect: local(.localAddress)),
    Scenario(
        name: "LOCAL=YES: example.com blocked", ats: dict([keyLocal: yes]), url: "http://example.com/",
        expect: .blocked),
    Scenario(
        name: "LOCAL=NO (strict default): localhost blocked", ats: dict([keyLocal: no]), url: "http://localhost/",
        expect: .blocked),
    Scenario(
        name: "LOCAL=NO (strict default): 127.0.0.1 blocked", ats: dict([keyLocal: no]), url: "http://127.0.0.1/",
        expect: .blocked),
    Scenario(
        name: "LOCAL=NO (strict default): printer.local blocked", ats: dict([keyLocal: no]),
        url: "http://printer.local/", expect: .blocked),
    Scenario(
        name: "LOCAL=NO (strict default): [::1] blocked", ats: dict([keyLocal: no]), url: "http://[::1]/",
        expect: .blocked),
    Scenario(
        name: "LOCAL=NO (strict default): localhost https governed", ats: dict([keyLocal: no]),
        url: "https://localhost/", expect: Expect(outcome: .https, governed: true, minTLS: .tls12, trust: .ats)),
    Scenario(
        name: "LOCAL=NO (lenient switch): localhost allowed", ats: dict([keyLocal: no]), url: "http://localhost/",
        options: options { $0.explicitLocalNetworkingNoIsStrict = false }, expect: .allowed),
    Scenario(
        name: "LOCAL=NO (lenient switch): 192.168.1.20 allowed", ats: dict([keyLocal: no]),
        url: "http://192.168.1.20/", options: options { $0.explicitLocalNetworkingNoIsStrict = false },
        expect: .allowed),
    Scenario(
        name: "LOCAL=NO + AAL=YES: localhost blocked (AAL cancelled by LOCAL's presence)",
        ats: dict([keyLocal: no, keyAAL: yes]), url: "http://localhost/", expect: .blocked),
    // An exception entry beats the local default, in both directions.
    Scenario(
        name: "ED{myhost.local:{}}: http://myhost.local blocked (entry raises security)",
        ats: exceptions(["myhost.local": dict([:])]), url: "http://myhost.local/", expect: blocked(by: "myhost.local")),
    Scenario(
        name: "ED{localhost:{}}: http://localhost blocked", ats: exceptions(["localhost": dict([:])]),
        url: "http://localhost/", expect: blocked(by: "localhost")),
    Scenario(
        name: "LOCAL=NO + ED{printer.local:{HTTP=YES}}: allowed (entry lowers security)",
        ats: exceptions(["printer.local": dict([keyHTTP: yes])], globals: [keyLocal: no]),
        url: "http://printer.local/", expect: allowed(by: "printer.local")),
    Scenario(
        name: "ED{0.0.0.0/1:{HTTP=NO}}: http://127.0.0.1 blocked by the entry",
        ats: exceptions(["0.0.0.0/1": dict([keyHTTP: no])]), url: "http://127.0.0.1/", expect: blocked(by: "0.0.0.0/1")),
    Scenario(
        name: "ED{::/1:{HTTP=NO}}: http://[::1] blocked by the entry", ats: exceptions(["::/1": dict([keyHTTP: no])]),
        url: "http://[::1]/", expect: blocked(by: "::/1")),
    Scenario(
        name: "ED{0.0.0.0/0:{}}: http://192.168.1.20 blocked by the entry", ats: exceptions(["0.0.0.0/0": dict([:])]),
        url: "http://192.168.1.20/", expect: blocked(by: "0.0.0.0/0")),
    Scenario(
        name: "ED{10/8:{}} (shorthand): http://10.1.2.3 blocked by the entry", ats: exceptions(["10/8": dict([:])]),
        url: "http://10.1.2.3/", expect: blocked(by: "10/8")),
    Scenario(
        name: "ED{192.168.1.20:{}}: exact address entry beats the local default",
        ats: exceptions(["192.168.1.20": dict([:])]), url: "http://192.168.1.20/", expect: blocked(by: "192.168.1.20")),
]

/// The SEC-TEST `testIncludesSubdomains` configuration.
private let secTestEntries = exceptions([
    "example.com": dict([keyIS: yes, keyHTTP: yes]),
    "subhostname.example.com": dict([keyIS: no, keyTLS: .string("TLSv1.3")]),
    "another.subhostname.example.com": dict([keyTLS: .string("TLSv1.1")]),
])

private let hostRows: [Scenario] = [
    Scenario(
        name: "AAL=YES + ED{example.com:{}} (no IS): www.example.com gets the global policy",
        ats: exceptions(["example.com": dict([:])], globals: [keyAAL: yes]), url: "http://www.example.com/",
        expect: with(.allowed) { $0.exceptionKey = .some(nil) }),
    Scenario(
        name: "AAL=YES + ED{example.com:{}} (no IS): example.com itself is full ATS",
        ats: exceptions(["example.com": dict([:])], globals: [keyAAL: yes]), url: "http://example.com/",
        expect: blocked(by: "example.com")),
    Scenario(
        name: "exact: ED{api.example.com} covers api.example.com",
        ats: exceptions(["api.example.com": dict([keyHTTP: yes])]),
        url: "http://api.example.com/", expect: allowed(by: "api.example.com")),
    Scenario(
        name: "exact: ED{api.example.com} does not cover the parent example.com",
        ats: exceptions(["api.example.com": dict([keyHTTP: yes])]), url: "http://example.com/", expect: blocked(by: nil)
    ),
    Scenario(
        name: "exact: ED{api.example.com} without IS does not cover v1.api.example.com",
        ats: exceptions(["api.example.com": dict([keyHTTP: yes])]), url: "http://v1.api.example.com/",
        expect: blocked(by: nil)),
    Scenario(
        name: "SEC-TEST: test.another.subhostname.example.com → example.com (HTTP allowed)", ats: secTestEntries,
        url: "http://test.another.subhostname.example.com/", expect: allowed(by: "example.com")),
    Scenario(
        name: "SEC-TEST: test.another.subhostname.example.com https → example.com, TLS 1.2", ats: secTestEntries,
        url: "https://test.another.subhostname.example.com/",
        expect: Expect(minTLS: .tls12, trust: .standard, exceptionKey: "example.com")),
    Scenario(
        name: "SEC-TEST: another.subhostname.example.com → its own entry, TLS 1.1", ats: secTestEntries,
        url: "https://another.subhostname.example.com/",
        expect: Expect(minTLS: .tls11, trust: .ats, exceptionKey: "another.subhostname.example.com")),
    Scenario(
        name: "SEC-TEST: subhostname.example.com → its own entry, TLS 1.3, http blocked", ats: secTestEntries,
        url: "http://subhostname.example.com/", expect: blocked(by: "subhostname.example.com")),
    Scenario(
        name: "SEC-TEST: x.subhostname.example.com → walks past the IS=NO parent to example.com",
        ats: secTestEntries, url: "http://x.subhostname.example.com/", expect: allowed(by: "example.com")),
    Scenario(
        name: "most specific wins, never combined: v1.api.example.com → api.example.com (TLS 1.2, not 1.0)",
        ats: exceptions([
            "example.com": dict([keyIS: yes, keyHTTP: yes, keyTLS: .string("TLSv1.0")]),
            "api.example.com": dict([keyIS: yes]),
        ]), url: "https://v1.api.example.com/",
        expect: Expect(governed: true, minTLS: .tls12, trust: .ats, exceptionKey: "api.example.com")),
    Scenario(
        name: "most specific wins, never combined: http://v1.api.example.com blocked",
        ats: exceptions([
            "example.com": dict([keyIS: yes, keyHTTP: yes]), "api.example.com": dict([keyIS: yes]),
        ]), url: "http://v1.api.example.com/", expect: blocked(by: "api.example.com")),
    Scenario(
        name: "depth any (default): a.b.c.example.com covered",
        ats: exceptions(["example.com": dict([keyIS: yes, keyHTTP: yes])]),
        url: "http://a.b.c.example.com/", expect: allowed(by: "example.com")),
    Scenario(
        name: "depth one: www.example.com covered", ats: exceptions(["example.com": dict([keyIS: yes, keyHTTP: yes])]),
        url: "http://www.example.com/", options: options { $0.subdomainDepth = .one },
        expect: allowed(by: "example.com")),
    Scenario(
        name: "depth one: a.b.example.com not covered",
        ats: exceptions(["example.com": dict([keyIS: yes, keyHTTP: yes])]),
        url: "http://a.b.example.com/", options: options { $0.subdomainDepth = .one }, expect: blocked(by: nil)),
    Scenario(
        name: "depth one: a.b.example.com still uses a nearer IS entry b.example.com",
        ats: exceptions([
            "example.com": dict([keyIS: yes]), "b.example.com": dict([keyIS: yes, keyHTTP: yes]),
        ]), url: "http://a.b.example.com/", options: options { $0.subdomainDepth = .one },
        expect: allowed(by: "b.example.com")),
    Scenario(
        name: "case: key Example.com never matches", ats: exceptions(["Example.com": dict([keyHTTP: yes])]),
        url: "http://example.com/", expect: blocked(by: nil)),
    Scenario(
        name: "case: key Example.com with IS never covers www.example.com",
        ats: exceptions(["Example.com": dict([keyHTTP: yes, keyIS: yes])]), url: "http://www.example.com/",
        expect: blocked(by: nil)),
    Scenario(
        name: "case: URL host EXAMPLE.com matches key example.com",
        ats: exceptions(["example.com": dict([keyHTTP: yes])]),
        url: "http://EXAMPLE.com/", expect: allowed(by: "example.com")),
    Scenario(
        name: "port: key example.com:8080 never matches", ats: exceptions(["example.com:8080": dict([keyHTTP: yes])]),
        url: "http://example.com:8080/", expect: blocked(by: nil)),
    Scenario(
        name: "port: key example.com matches any port", ats: exceptions(["example.com": dict([keyHTTP: yes])]),
        url: "http://example.com:8080/", expect: allowed(by: "example.com")),
    Scenario(
        name: "wildcard: key *.example.com never matches api.example.com",
        ats: exceptions(["*.example.com": dict([keyHTTP: yes, keyIS: yes])]), url: "http://api.example.com/",
        expect: blocked(by: nil)),
    Scenario(
        name: "wildcard: key *.example.com never matches example.com",
        ats: exceptions(["*.example.com": dict([keyHTTP: yes])]), url: "http://example.com/", expect: blocked(by: nil)),
    Scenario(
        name: "trailing dot: key example.com. matches host example.com.",
        ats: exceptions(["example.com.": dict([keyHTTP: yes])]), url: "http://example.com./",
        expect: allowed(by: "example.com.")),
    Scenario(
        name: "trailing dot: key example.com. does not match host example.com",
        ats: exceptions(["example.com.": dict([keyHTTP: yes])]), url: "http://example.com/", expect: blocked(by: nil)),
    Scenario(
        name: "trailing dot: key example.com does not match host example.com.",
        ats: exceptions(["example.com": dict([keyHTTP: yes])]), url: "http://example.com./", expect: blocked(by: nil)),
    Scenario(
        name: "trailing dot: key example.com with IS does not cover www.example.com.",
        ats: exceptions(["example.com": dict([keyHTTP: yes, keyIS: yes])]), url: "http://www.example.com./",
        expect: blocked(by: nil)),
    Scenario(
        name: "trailing dot: key example.com. with IS covers www.example.com.",
        ats: exceptions(["example.com.": dict([keyHTTP: yes, keyIS: yes])]), url: "http://www.example.com./",
        expect: allowed(by: "example.com.")),
    Scenario(
        name: "an IP entry never applies to a name", ats: exceptions(["203.0.113.5": dict([keyHTTP: yes])]),
        url: "http://example.com/", expect: blocked(by: nil)),
    Scenario(
        name: "NSIncludesSubdomains is ignored for IP entries (www.203.0.113.5 is a name)",
        ats: exceptions(["203.0.113.5": dict([keyHTTP: yes, keyIS: yes])]), url: "http://www.203.0.113.5/",
        expect: blocked(by: nil)),
    Scenario(
        name: "NSIncludesSubdomains is ignored for IP entries (the address itself still matches)",
        ats: exceptions(["203.0.113.5": dict([keyHTTP: yes, keyIS: yes])]), url: "http://203.0.113.5/",
        expect: allowed(by: "203.0.113.5")),
    Scenario(
        name: "NSIncludesSubdomains is ignored for CIDR entries",
        ats: exceptions(["203.0.113.0/24": dict([keyHTTP: yes, keyIS: yes])]), url: "http://a.203.0.113.0/",
        expect: blocked(by: nil)),
]

private let addressRows: [Scenario] = [
    Scenario(
        name: "IPv4 exact: 203.0.113.5 matches", ats: exceptions(["203.0.113.5": dict([keyHTTP: yes])]),
        url: "http://203.0.113.5/", expect: allowed(by: "203.0.113.5")),
    Scenario(
        name: "IPv4 exact: 203.0.113.6 does not", ats: exceptions(["203.0.113.5": dict([keyHTTP: yes])]),
        url: "http://203.0.113.6/", expect: blocked(by: nil)),
    Scenario(
        name: "IPv6 exact: 2001:db8::1 matches [2001:db8::1]", ats: exceptions(["2001:db8::1": dict([keyHTTP: yes])]),
        url: "http://[2001:db8::1]/", expect: allowed(by: "2001:db8::1")),
    Scenario(
        name: "IPv6 spelling: key 2001:0db8::1 does not match [2001:db8::1]",
        ats: exceptions(["2001:0db8::1": dict([keyHTTP: yes])]), url: "http://[2001:db8::1]/", expect: blocked(by: nil)),
    Scenario(
        name: "IPv6 spelling: key 2001:db8::1 does not match [2001:0db8::1]",
        ats: exceptions(["2001:db8::1": dict([keyHTTP: yes])]), url: "http://[2001:0db8::1]/", expect: blocked(by: nil)),
    Scenario(
        name: "CIDR: 198.51.100.0/24 (YES) + /27 (NO): .100 allowed by /24",
        ats: exceptions(["198.51.100.0/24": dict([keyHTTP: yes]), "198.51.100.0/27": dict([keyHTTP: no])]),
        url: "http://198.51.100.100/", expect: allowed(by: "198.51.100.0/24")),
    Scenario(
        name: "CIDR: 198.51.100.0/24 (YES) + /27 (NO): .0 blocked by /27",
        ats: exceptions(["198.51.100.0/24": dict([keyHTTP: yes]), "198.51.100.0/27": dict([keyHTTP: no])]),
        url: "http://198.51.100.0/", expect: blocked(by: "198.51.100.0/27")),
    Scenario(
        name: "CIDR: 198.51.100.0/24 (YES) + /27 (NO): .31 blocked by /27",
        ats: exceptions(["198.51.100.0/24": dict([keyHTTP: yes]), "198.51.100.0/27": dict([keyHTTP: no])]),
        url: "http://198.51.100.31/", expect: blocked(by: "198.51.100.0/27")),
    Scenario(
        name: "CIDR: 198.51.100.0/24 (YES) + /27 (NO): .32 allowed by /24",
        ats: exceptions(["198.51.100.0/24": dict([keyHTTP: yes]), "198.51.100.0/27": dict([keyHTTP: no])]),
        url: "http://198.51.100.32/", expect: allowed(by: "198.51.100.0/24")),
    Scenario(
        name: "CIDR: /27 (NO) + /24 (YES) + /16 (YES): the longest prefix wins whatever the key order",
        ats: exceptions([
            "198.51.0.0/16": dict([keyHTTP: yes]), "198.51.100.0/27": dict([keyHTTP: no]),
            "198.51.100.0/24": dict([keyHTTP: yes]),
        ]), url: "http://198.51.100.7/", expect: blocked(by: "198.51.100.0/27")),
    Scenario(
        name: "CIDR: the exact address entry wins over a CIDR block",
        ats: exceptions(["198.51.100.0/24": dict([keyHTTP: no]), "198.51.100.9": dict([keyHTTP: yes])]),
        url: "http://198.51.100.9/", expect: allowed(by: "198.51.100.9")),
    Scenario(
        name: "CIDR: IPv6 block 2001:db8:12::/48 covers [2001:db8:12::34]",
        ats: exceptions(["2001:db8:12::/48": dict([keyHTTP: yes])]), url: "http://[2001:db8:12::34]/",
        expect: allowed(by: "2001:db8:12::/48")),
    Scenario(
        name: "CIDR: IPv6 block 2001:db8:12::/48 does not cover [2001:db8:13::1]",
        ats: exceptions(["2001:db8:12::/48": dict([keyHTTP: yes])]), url: "http://[2001:db8:13::1]/",
        expect: blocked(by: nil)),
    Scenario(
        name: "CIDR: an IPv4 block never covers an IPv6 address", ats: exceptions(["0.0.0.0/0": dict([keyHTTP: yes])]),
        url: "http://[2001:db8::1]/", expect: blocked(by: nil)),
    Scenario(
        name: "CIDR: an IPv6 block never covers an IPv4 address", ats: exceptions(["::/0": dict([keyHTTP: yes])]),
        url: "http://203.0.113.5/", expect: blocked(by: nil)),
    Scenario(
        name: "CIDR: 203/8 shorthand covers 203.0.113.5", ats: exceptions(["203/8": dict([keyHTTP: yes])]),
        url: "http://203.0.113.5/", expect: allowed(by: "203/8")),
    Scenario(
        name: "CIDR: 203.0.113/24 shorthand covers 203.0.113.5",
        ats: exceptions(["203.0.113/24": dict([keyHTTP: yes])]),
        url: "http://203.0.113.5/", expect: allowed(by: "203.0.113/24")),
    Scenario(
        name: "CIDR: a /32 covers exactly one address", ats: exceptions(["203.0.113.5/32": dict([keyHTTP: yes])]),
        url: "http://203.0.113.5/", expect: allowed(by: "203.0.113.5/32")),
    Scenario(
        name: "CIDR: a zone-scoped block is invalid and never matches",
        ats: exceptions(["fe80::%lo0/10": dict([keyHTTP: no])]), url: "http://[fe80::1]/", expect: local(.localAddress)),
    Scenario(
        name: "CIDR: a prefix > 32 is invalid and never matches",
        ats: exceptions(["203.0.113.0/33": dict([keyHTTP: yes])]), url: "http://203.0.113.0/", expect: blocked(by: nil)),
    Scenario(
        name: "iOS 16: CIDR keys are not honoured, the IP is exempt anyway",
        ats: exceptions(["203.0.113.0/24": dict([:])]), url: "http://203.0.113.5/", options: options("ios:16.0"),
        expect: with(.allowed) { $0.exceptionKey = .some(nil) }),
    Scenario(
        name: "iOS 17 with SDK 16: CIDR keys are not honoured", ats: exceptions(["203.0.113.0/24": dict([:])]),
        url: "http://203.0.113.5/", options: options("ios:17.0", sdk: "16.0"),
        expect: with(.allowed) { $0.exceptionKey = .some(nil) }),
    Scenario(
        name: "macOS 14: CIDR keys honoured", ats: exceptions(["203.0.113.0/24": dict([keyHTTP: yes])]),
        url: "http://203.0.113.5/", options: options("macos:14.0"), expect: allowed(by: "203.0.113.0/24")),
]

private let builtInRows: [Scenario] = [
    Scenario(
        name: "built-ins off (default): http://www.apple.com blocked", ats: nil, url: "http://www.apple.com/",
        expect: blocked(by: nil)),
    Scenario(
        name: "built-ins on: http://www.apple.com allowed by apple.com", ats: nil, url: "http://www.apple.com/",
        options: options { $0.builtInAppleExceptions = true }, expect: allowed(by: "apple.com")),
    Scenario(
        name: "built-ins on: https://apple.com → TLS 1.2, PFS not required", ats: nil, url: "https://apple.com/",
        options: options { $0.builtInAppleExceptions = true },
        expect: Expect(governed: true, minTLS: .tls12, forwardSecrecy: false, exceptionKey: "apple.com")),
    Scenario(
        name: "built-ins on: https://ls.apple.com → TLS 1.0 allowed", ats: nil, url: "https://ls.apple.com/",
        options: options { $0.builtInAppleExceptions = true },
        expect: Expect(minTLS: .tls10, exceptionKey: "ls.apple.com")),
    Scenario(
        name: "built-ins on: http://tiles.apple-mapkit.com allowed", ats: nil, url: "http://tiles.apple-mapkit.com/",
        options: options { $0.builtInAppleExceptions = true }, expect: allowed(by: "apple-mapkit.com")),
    Scenario(
        name: "built-ins on: http://a.is.autonavi.com allowed", ats: nil, url: "http://a.is.autonavi.com/",
        options: options { $0.builtInAppleExceptions = true }, expect: allowed(by: "is.autonavi.com")),
    Scenario(
        name: "built-ins on: http://setup.icloud.com allowed", ats: nil, url: "http://setup.icloud.com/",
        options: options { $0.builtInAppleExceptions = true }, expect: allowed(by: "setup.icloud.com")),
    Scenario(
        name: "built-ins on: setup.icloud.com does not include subdomains", ats: nil,
        url: "http://p1.setup.icloud.com/",
        options: options { $0.builtInAppleExceptions = true }, expect: blocked(by: nil)),
    Scenario(
        name: "built-ins on, app's own ED{apple.com:{}}: http://apple.com blocked",
        ats: exceptions(["apple.com": dict([:])]), url: "http://apple.com/",
        options: options { $0.builtInAppleExceptions = true }, expect: blocked(by: "apple.com")),
    Scenario(
        name: "built-ins on, app's own ED{apple.com:{}} (no IS): http://www.apple.com blocked",
        ats: exceptions(["apple.com": dict([:])]), url: "http://www.apple.com/",
        options: options { $0.builtInAppleExceptions = true }, expect: blocked(by: nil)),
    Scenario(
        name: "built-ins on, app's own ED{ls.apple.com:{}}: https://ls.apple.com back to TLS 1.2",
        ats: exceptions(["ls.apple.com": dict([:])]), url: "https://ls.apple.com/",
        options: options { $0.builtInAppleExceptions = true },
        expect: Expect(minTLS: .tls12, forwardSecrecy: true, trust: .ats, exceptionKey: "ls.apple.com")),
]

@Suite("Reference §2.4–2.5: exception lookup, local hosts, IP addresses")
struct MatchingTests {
    @Test("local hosts and explicit NSAllowsLocalNetworking", arguments: localRows)
    func localHosts(_ scenario: Scenario) {
        scenario.run()
    }

    @Test("host-name lookup: exact, parents, case, port, wildcard, trailing dot", arguments: hostRows)
    func hostLookup(_ scenario: Scenario) {
        scenario.run()
    }

    @Test("address lookup: exact string, longest CIDR prefix, families, versions", arguments: addressRows)
    func addressLookup(_ scenario: Scenario) {
        scenario.run()
    }

    @Test("Apple's built-in exceptions: off by default, overridable by the app", arguments: builtInRows)
    func builtIns(_ scenario: Scenario) {
        scenario.run()
    }

    @Test("the default local networks are loopback, link-local, RFC 1918 and ULA")
    func defaultLocalNetworks() {
        let expected = [
            "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "::1/128", "fe80::/10",
            "fc00::/7",
        ]
        #expect(Set(EvaluationOptions.defaultLocalNetworks.map(\.description)) == Set(expected))
        #expect(!EvaluationOptions.defaultLocalNetworks.contains { $0.contains(IPAddress(parsing: "100.64.0.1")!) })
    }

    @Test("a configured local network makes its addresses local")
    func configuredLocalNetwork() {
        let tailscale = options { $0.localNetworks.append(CIDRBlock(parsing: "100.64.0.0/10")!) }
        #expect(decide(nil, "http://100.64.0.1/", options: tailscale).outcome == .cleartextAllowed)
        #expect(decide(nil, "http://100.128.0.1/", options: tailscale).outcome == .cleartextBlocked)
    }
}
