import Testing

@testable import ATSPolicy

/// Legacy IPv4 numbers (`inet_aton` forms) are read as the address a socket would connect to, and the
/// engine decides every spelling of one address alike (issue 17, finding 4).
@Suite struct LegacyAddressTests {
    @Test(arguments: [
        ("127.1", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"), ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"), ("0X7F.1", "127.0.0.1"), ("127.0.1", "127.0.0.1"), ("10.0.0.1", "10.0.0.1"),
        ("010.0.0.1", "8.0.0.1"), ("0", "0.0.0.0"), ("0x", "0.0.0.0"), ("192.168.0x1.01", "192.168.1.1"),
        ("4294967295", "255.255.255.255"),
    ])
    func legacyNumbersParseAsTheAddressTheyMean(text: String, address: String) throws {
        let parsed = try #require(IPAddress(parsingHost: text))
        #expect(parsed.description == address)
        #expect(RequestTarget.canonicalHost(text) == address)
    }

    @Test(arguments: [
        "4294967296", "256.0.0.1", "1.2.3.4.5", "08.0.0.1", "0x1g", "1..2", "1.2.3.", "example.com", "1.2.3.com",
        "cafe", "deadbeef", "", "0x100000000",
    ])
    func otherTextIsNoLegacyNumber(text: String) {
        #expect(IPAddress.parseLegacyIPv4(Substring(text)) == nil, "\(text)")
    }

    @Test func namesAndIPv6AreOnlyLowerCased() {
        #expect(RequestTarget.canonicalHost("Example.COM") == "example.com")
        #expect(RequestTarget.canonicalHost("::FFFF:127.0.0.1") == "::ffff:127.0.0.1")
        #expect(RequestTarget.canonicalHost("cafe.example") == "cafe.example")
        #expect(IPAddress(parsingHost: "::ffff:127.0.0.1")?.mappedIPv4?.description == "127.0.0.1")
    }

    @Test func strictParsingForConfigurationKeysIsUnchanged() {
        #expect(IPAddress(parsing: "127.1") == nil)
        #expect(IPAddress(parsing: "2130706433") == nil)
        #expect(IPAddress(parsing: "10.0.0.1")?.description == "10.0.0.1")
    }

    @Test func aURLWithALegacyNumberTargetsTheCanonicalAddress() throws {
        let parsed = try RequestTarget(parsing: "http://0x7f000001:8080/a")
        #expect(parsed.host == "127.0.0.1" && parsed.port == 8080)
        #expect(parsed.ipAddress?.description == "127.0.0.1")
        #expect(parsed.url == "http://0x7f000001:8080/a")
    }

    @Test(arguments: ["http://2130706433/", "http://127.1/", "http://0177.0.0.1/", "http://0x7f000001/"])
    func everySpellingOfLoopbackIsDecidedLikeLoopback(url: String) {
        let reference = decide(nil, "http://127.0.0.1/")
        let spelled = decide(nil, url)
        #expect(spelled.outcome == reference.outcome, "\(url)")
        #expect(spelled.atsRequired == reference.atsRequired, "\(url)")
        #expect(spelled.ruleTexts == reference.ruleTexts, "\(url)")
    }

    @Test func anIPExceptionCoversTheLegacySpellingsOfItsAddress() {
        let ats = exceptions(["203.0.113.5": dict([keyHTTP: yes])])
        let reference = decide(ats, "http://203.0.113.5/")
        #expect(reference.atsRequired == false)
        for url in ["http://203.0.113.5/", "http://3405803781/", "http://0xcb.0.0x71.5/", "http://203.0.28933/"] {
            #expect(decide(ats, url).atsRequired == false, "\(url)")
        }
        #expect(decide(ats, "http://203.0.113.6/").atsRequired == true)
    }

    @Test func loopbackAndUnspecifiedAddressesAreRecognized() {
        #expect(IPAddress(parsing: "127.8.9.1")!.isLoopback)
        #expect(IPAddress(parsing: "::1")!.isLoopback)
        #expect(IPAddress(parsing: "::ffff:127.0.0.1")!.isLoopback)
        #expect(!IPAddress(parsing: "128.0.0.1")!.isLoopback)
        #expect(!IPAddress(parsing: "::2")!.isLoopback)
        #expect(IPAddress(parsing: "0.0.0.0")!.isUnspecified)
        #expect(IPAddress(parsing: "::")!.isUnspecified)
        #expect(!IPAddress(parsing: "::1")!.isUnspecified)
    }
}
