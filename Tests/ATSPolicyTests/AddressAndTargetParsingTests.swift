import Foundation
import Testing

@testable import ATSPolicy

// IPAddress, CIDRBlock and RequestTarget parsing tables.

/// A valid address, its family and its canonical (RFC 5952) text (nil: not checked, because
/// RFC 5952 recommends the dotted tail for IPv4-mapped forms and the engine prints hex; the text
/// form is only cosmetic, as exception keys are compared as written).
struct AddressCase: Sendable, CustomTestStringConvertible {
    let text: String
    let family: IPAddress.Family
    let canonical: String?

    var testDescription: String { text }
}

private let validAddresses: [AddressCase] = [
    AddressCase(text: "127.0.0.1", family: .v4, canonical: "127.0.0.1"),
    AddressCase(text: "0.0.0.0", family: .v4, canonical: "0.0.0.0"),
    AddressCase(text: "255.255.255.255", family: .v4, canonical: "255.255.255.255"),
    AddressCase(text: "203.0.113.5", family: .v4, canonical: "203.0.113.5"),
    AddressCase(text: "::", family: .v6, canonical: "::"),
    AddressCase(text: "::1", family: .v6, canonical: "::1"),
    AddressCase(text: "fe80::1", family: .v6, canonical: "fe80::1"),
    AddressCase(text: "2001:db8::1", family: .v6, canonical: "2001:db8::1"),
    AddressCase(text: "2001:0db8:0000:0000:0000:0000:0000:0001", family: .v6, canonical: "2001:db8::1"),
    AddressCase(text: "2001:DB8::A", family: .v6, canonical: "2001:db8::a"),
    AddressCase(text: "1:2:3:4:5:6:7:8", family: .v6, canonical: "1:2:3:4:5:6:7:8"),
    AddressCase(text: "1:0:0:1:0:0:0:1", family: .v6, canonical: "1:0:0:1::1"),
    AddressCase(text: "1::", family: .v6, canonical: "1::"),
    AddressCase(text: "1:2:3:4:5:6:7::", family: .v6, canonical: "1:2:3:4:5:6:7:0"),
    AddressCase(text: "::ffff:192.168.1.20", family: .v6, canonical: nil),
    AddressCase(text: "::1.2.3.4", family: .v6, canonical: nil),
    AddressCase(text: "2001:db8:12::34", family: .v6, canonical: "2001:db8:12::34"),
]

private let invalidAddresses: [String] = [
    "", " 127.0.0.1", "127.0.0.1 ", "256.0.0.1", "1.2.3", "1.2.3.4.5", "1.2.3.", ".1.2.3", "1.2.3.-4", "1.2.3.4/8",
    "1.2.3.1234", "a.b.c.d", "example.com", "localhost", ":::", "::1::", "1::2::3", "1:2:3:4:5:6:7:8:9",
    "1:2:3:4:5:6:7", "12345::", "g::1", "fe80::1%en0", "fe80::1%25en0", "[::1]", "::ffff:1.2.3", "::ffff:1.2.3.4.5",
    "1.2.3.4::", "١٢٧.0.0.1",
]

/// A valid CIDR key, its normalised form and one address inside / outside.
struct CIDRCase: Sendable, CustomTestStringConvertible {
    let text: String
    let normalized: String
    let inside: String
    let outside: String

    var testDescription: String { text }
}

private let validBlocks: [CIDRCase] = [
    CIDRCase(text: "10.0.0.0/8", normalized: "10.0.0.0/8", inside: "10.255.0.1", outside: "11.0.0.1"),
    CIDRCase(text: "10/8", normalized: "10.0.0.0/8", inside: "10.1.2.3", outside: "9.255.255.255"),
    CIDRCase(text: "172.16/12", normalized: "172.16.0.0/12", inside: "172.31.0.1", outside: "172.32.0.1"),
    CIDRCase(text: "192.168.1/24", normalized: "192.168.1.0/24", inside: "192.168.1.99", outside: "192.168.2.1"),
    CIDRCase(
        text: "198.51.100.0/27", normalized: "198.51.100.0/27", inside: "198.51.100.31", outside: "198.51.100.32"),
    CIDRCase(text: "0.0.0.0/0", normalized: "0.0.0.0/0", inside: "203.0.113.5", outside: "::1"),
    CIDRCase(text: "0.0.0.0/1", normalized: "0.0.0.0/1", inside: "127.0.0.1", outside: "128.0.0.1"),
    CIDRCase(text: "203.0.113.5/32", normalized: "203.0.113.5/32", inside: "203.0.113.5", outside: "203.0.113.4"),
    CIDRCase(text: "::/0", normalized: "::/0", inside: "2001:db8::1", outside: "203.0.113.5"),
    CIDRCase(text: "::/1", normalized: "::/1", inside: "::1", outside: "8000::1"),
    CIDRCase(text: "2001:db8::/32", normalized: "2001:db8::/32", inside: "2001:db8:ffff::1", outside: "2001:db9::1"),
    CIDRCase(
        text: "2001:db8:12::/48", normalized: "2001:db8:12::/48", inside: "2001:db8:12::34", outside: "2001:db8:13::"),
    CIDRCase(text: "fe80::/10", normalized: "fe80::/10", inside: "febf::1", outside: "fec0::1"),
    CIDRCase(text: "fc00::/7", normalized: "fc00::/7", inside: "fdff::1", outside: "fe00::1"),
    CIDRCase(text: "::1/128", normalized: "::1/128", inside: "::1", outside: "::2"),
]

private let invalidBlocks: [String] = [
    "10.0.0.0/33", "10/33", "2001:db8::/129", "fe80::%lo0/10", "fe80::1%en0/64", "10.0.0.0/", "/8", "10.0.0.0/8/8",
    "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/a", "10.0.0.0/ 8", "example.com/8", "256/8", "1.2.3.4.5/8", "10.0.0.0",
    "10.0.0.0/1000", "",
]

/// A URL and the target it must give.
struct TargetCase: Sendable, CustomTestStringConvertible {
    let url: String
    let scheme: URLScheme
    let host: String
    let port: Int
    let isIP: Bool

    var testDescription: String { url }
}

private let validTargets: [TargetCase] = [
    TargetCase(url: "http://example.com/", scheme: .http, host: "example.com", port: 80, isIP: false),
    TargetCase(url: "https://example.com", scheme: .https, host: "example.com", port: 443, isIP: false),
    TargetCase(
        url: "https://Example.COM:8443/Path?Q=1#F", scheme: .https, host: "example.com", port: 8443, isIP: false),
    TargetCase(url: "HTTP://EXAMPLE.COM/", scheme: .http, host: "example.com", port: 80, isIP: false),
    TargetCase(
        url: "http://user:pa%40ss@api.example.com/x", scheme: .http, host: "api.example.com", port: 80, isIP: false),
    TargetCase(url: "http://user@host.example:81", scheme: .http, host: "host.example", port: 81, isIP: false),
    TargetCase(url: "http://example.com./", scheme: .http, host: "example.com.", port: 80, isIP: false),
    TargetCase(url: "http://printer.local.:631/", scheme: .http, host: "printer.local.", port: 631, isIP: false),
    TargetCase(url: "http://localhost:8080", scheme: .http, host: "localhost", port: 8080, isIP: false),
    TargetCase(url: "http://example.com?x=1", scheme: .http, host: "example.com", port: 80, isIP: false),
    TargetCase(url: "http://example.com#frag", scheme: .http, host: "example.com", port: 80, isIP: false),
    TargetCase(url: "http://192.168.1.20/", scheme: .http, host: "192.168.1.20", port: 80, isIP: true),
    TargetCase(url: "https://203.0.113.5:8443/", scheme: .https, host: "203.0.113.5", port: 8443, isIP: true),
    TargetCase(url: "http://[::1]/", scheme: .http, host: "::1", port: 80, isIP: true),
    TargetCase(url: "http://[::1]:8080/", scheme: .http, host: "::1", port: 8080, isIP: true),
    TargetCase(url: "https://[2001:DB8::1]/", scheme: .https, host: "2001:db8::1", port: 443, isIP: true),
    TargetCase(url: "http://[2001:0db8::1]/", scheme: .http, host: "2001:0db8::1", port: 80, isIP: true),
    TargetCase(url: "http://[::ffff:192.168.1.20]/", scheme: .http, host: "::ffff:192.168.1.20", port: 80, isIP: true),
    TargetCase(url: "ws://chat.example.com/socket", scheme: .http, host: "chat.example.com", port: 80, isIP: false),
    TargetCase(url: "wss://chat.example.com/socket", scheme: .https, host: "chat.example.com", port: 443, isIP: false),
    TargetCase(url: "http://example.com:65535/", scheme: .http, host: "example.com", port: 65535, isIP: false),
    TargetCase(url: "http://example.com:1/", scheme: .http, host: "example.com", port: 1, isIP: false),
    TargetCase(url: "http://example.com:/", scheme: .http, host: "example.com", port: 80, isIP: false),
]

/// A string that is not a URL the engine can judge, and which error it must give.
struct BadTargetCase: Sendable, CustomTestStringConvertible {
    enum Kind: Sendable { case notAbsolute, unsupportedScheme(String), badPort }
    let url: String
    let kind: Kind

    var testDescription: String { url }
}

private let invalidTargets: [BadTargetCase] = [
    BadTargetCase(url: "example.com", kind: .notAbsolute),
    BadTargetCase(url: "/path/only", kind: .notAbsolute),
    BadTargetCase(url: "", kind: .notAbsolute),
    BadTargetCase(url: "http://", kind: .notAbsolute),
    BadTargetCase(url: "http:///path", kind: .notAbsolute),
    BadTargetCase(url: "://example.com", kind: .notAbsolute),
    BadTargetCase(url: "http://exa mple.com/", kind: .notAbsolute),
    BadTargetCase(url: "http://[::1/", kind: .notAbsolute),
    BadTargetCase(url: "http://[not-an-ip]/", kind: .notAbsolute),
    BadTargetCase(url: "http://[::1]x/", kind: .notAbsolute),
    BadTargetCase(url: "http://user@/", kind: .notAbsolute),
    BadTargetCase(url: "http://::1/", kind: .notAbsolute),
    BadTargetCase(url: "http://2001:db8::1/", kind: .notAbsolute),
    BadTargetCase(url: "http://fe80::1:8080/", kind: .notAbsolute),
    BadTargetCase(url: "mailto:someone@example.com", kind: .notAbsolute),
    BadTargetCase(url: "ftp://example.com/file", kind: .unsupportedScheme("ftp")),
    BadTargetCase(url: "FILE:///etc/hosts", kind: .unsupportedScheme("file")),
    BadTargetCase(url: "gopher://example.com/", kind: .unsupportedScheme("gopher")),
    BadTargetCase(url: "httpx://example.com/", kind: .unsupportedScheme("httpx")),
    BadTargetCase(url: "http://example.com:0/", kind: .badPort),
    BadTargetCase(url: "http://example.com:65536/", kind: .badPort),
    BadTargetCase(url: "http://example.com:-1/", kind: .badPort),
    BadTargetCase(url: "http://example.com:abc/", kind: .badPort),
    BadTargetCase(url: "http://[::1]:99999/", kind: .badPort),
]

@Suite("IPAddress, CIDRBlock and RequestTarget parsing")
struct AddressAndTargetParsingTests {
    @Test("valid IP addresses", arguments: validAddresses)
    func validAddress(_ row: AddressCase) {
        let address = IPAddress(parsing: row.text)
        #expect(address?.family == row.family)
        #expect(address?.bytes.count == (row.family == .v4 ? 4 : 16))
        if let canonical = row.canonical {
            #expect(address?.description == canonical)
        }
        #expect(address.flatMap { IPAddress(parsing: $0.description) } == address)
    }

    @Test("invalid IP addresses (zone ids included)", arguments: invalidAddresses)
    func invalidAddress(_ text: String) {
        #expect(IPAddress(parsing: text) == nil)
    }

    @Test("equal bytes for different IPv6 spellings; the string form is what exception keys compare")
    func ipv6Spellings() {
        #expect(IPAddress(parsing: "2001:0db8::1") == IPAddress(parsing: "2001:db8:0:0:0:0:0:1"))
        #expect(
            IPAddress(parsing: "2001:db8::1")?.bytes == [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1])
    }

    @Test("IPv4-mapped IPv6 exposes its IPv4 address")
    func mapped() {
        #expect(IPAddress(parsing: "::ffff:192.168.1.20")?.mappedIPv4 == IPAddress(parsing: "192.168.1.20"))
        #expect(IPAddress(parsing: "::ffff:c0a8:114")?.mappedIPv4 == IPAddress(parsing: "192.168.1.20"))
        #expect(IPAddress(parsing: "::192.168.1.20")?.mappedIPv4 == nil)
        #expect(IPAddress(parsing: "192.168.1.20")?.mappedIPv4 == nil)
        #expect(IPAddress(parsing: "2001:db8::1")?.mappedIPv4 == nil)
    }

    @Test("valid CIDR blocks", arguments: validBlocks)
    func validBlock(_ row: CIDRCase) {
        guard let block = CIDRBlock(parsing: row.text) else {
            Issue.record("\(row.text) did not parse")
            return
        }
        #expect(block.description == row.normalized)
        #expect(block.contains(IPAddress(parsing: row.inside)!))
        #expect(!block.contains(IPAddress(parsing: row.outside)!))
        #expect(ExceptionKeyKind.classify(row.text) == .cidr(ExceptionKeyKind.CIDRText(block)))
    }

    @Test("invalid CIDR blocks", arguments: invalidBlocks)
    func invalidBlock(_ text: String) {
        #expect(CIDRBlock(parsing: text) == nil)
        if text.contains("/") {
            #expect(ExceptionKeyKind.classify(text) == .invalidCIDR)
        }
    }

    @Test(
        "exception keys classify as host, address or CIDR",
        arguments: [
            ("example.com", "host"), ("Example.COM", "host"), ("*.example.com", "host"), ("example.com:443", "host"),
            ("example.com.", "host"), ("localhost", "host"), ("192.168.42.63", "address"),
            ("2001:db8:12::34", "address"),
            ("::1", "address"), ("2001:db8:12::/48", "cidr"), ("10/8", "cidr"), ("10.0.0.0/33", "invalid"),
            ("fe80::%lo0/10", "invalid"), ("a/b", "invalid"),
        ])
    func classify(_ key: String, _ kind: String) {
        let actual: String
        switch ExceptionKeyKind.classify(key) {
        case .host: actual = "host"
        case .address: actual = "address"
        case .cidr: actual = "cidr"
        case .invalidCIDR: actual = "invalid"
        }
        #expect(actual == kind)
    }

    @Test("valid request targets", arguments: validTargets)
    func validTarget(_ row: TargetCase) throws {
        let value = try RequestTarget(parsing: row.url)
        #expect(value.scheme == row.scheme)
        #expect(value.host == row.host)
        #expect(value.port == row.port)
        #expect(value.url == row.url)
        #expect((value.ipAddress != nil) == row.isIP)
    }

    @Test("invalid request targets give a clear error", arguments: invalidTargets)
    func invalidTarget(_ row: BadTargetCase) {
        do {
            let value = try RequestTarget(parsing: row.url)
            Issue.record("parsed \(value.host) instead of failing")
        } catch {
            switch (row.kind, error) {
            case (.notAbsolute, .notAbsolute(let text)):
                #expect(text == row.url)
                #expect(error.description.contains("not an absolute http:// or https:// URL"))
            case (.unsupportedScheme(let expected), .unsupportedScheme(let text, let scheme)):
                #expect(text == row.url)
                #expect(scheme == expected)
                #expect(error.description.contains("'\(expected)'"))
                #expect(error.description.contains("http"))
            case (.badPort, .badPort(let text)):
                #expect(text == row.url)
                #expect(error.description.contains("port"))
            default:
                Issue.record("wrong error \(error) for \(row.url)")
            }
            if !row.url.isEmpty {
                #expect(error.description.contains(row.url))
            }
        }
    }

    @Test("RequestTarget built directly lower-cases the host and fills in the default port")
    func directInit() {
        let value = RequestTarget(scheme: .https, host: "API.Example.com")
        #expect(value.host == "api.example.com")
        #expect(value.port == 443)
        #expect(value.url == "https://api.example.com/")
        let v6 = RequestTarget(scheme: .http, host: "::1", port: 8080)
        #expect(v6.url == "http://[::1]:8080/")
    }
}
