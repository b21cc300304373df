import Testing

@testable import ATSAppTrust
@testable import ATSTLS

/// Tests for: `--challenge HOST_PATTERN[=KINDS]` and `--challenge-every N` parsing, and host matching.
@Suite("Challenge spec parsing")
struct ChallengeSpecTests {
    @Test func aPatternWithoutKindsGetsEveryKindInOrder() throws {
        let spec = try ChallengeSpec(parsing: #"api\.example\.com"#)
        #expect(spec.pattern == #"api\.example\.com"#)
        #expect(spec.kinds == ChallengeKind.allCases)
        #expect(spec.kinds.count == 12)
    }

    @Test func kindsFollowTheLastEqualsSignInTheOrderGiven() throws {
        let spec = try ChallengeSpec(parsing: ".*=tls1.0, wrong-host,expired")
        #expect(spec.pattern == ".*")
        #expect(spec.kinds == [.tls10Only, .wrongHost, .expired])
        #expect(spec.description == ".*=tls1.0,wrong-host,expired")
    }

    @Test func kindNamesIgnoreCaseDashesDotsAndUnderscores() throws {
        let spec = try ChallengeSpec(parsing: "h=TLS10,tls1_1,static_rsa,WrongHost,noSAN,Sha1,RSA-1024,untrustedca")
        #expect(
            spec.kinds == [
                .tls10Only, .tls11Only, .staticRSAOnly, .wrongHost, .noSAN, .sha1Signature, .rsa1024, .untrustedCA,
            ])
    }

    @Test func groupsExpandAndRepeatedKindsCountOnce() throws {
        #expect(try ChallengeSpec(parsing: "h=handshakes").kinds == [.tls10Only, .tls11Only, .staticRSAOnly])
        #expect(try ChallengeSpec(parsing: "h=certificates").kinds.count == 9)
        #expect(try ChallengeSpec(parsing: "h=expired,all").kinds.first == .expired)
        #expect(try ChallengeSpec(parsing: "h=all").kinds == ChallengeKind.allCases)
        #expect(try ChallengeSpec(parsing: "h=expired,expired,tls1.0,expired").kinds == [.expired, .tls10Only])
    }

    @Test func everyKindRoundTripsThroughItsRawName() {
        for kind in ChallengeKind.allCases {
            #expect(ChallengeKind(name: kind.rawValue) == kind)
            #expect(ChallengeKind(rawValue: kind.rawValue) == kind)
        }
        #expect(Set(ChallengeKind.allCases.map { ChallengeKind.squeezed($0.rawValue) }).count == 12)
    }

    @Test func anUnknownKindIsNamedWithTheFlagAndTheChoices() {
        let error = #expect(throws: ChallengeSpecError.self) { try ChallengeSpec(parsing: ".*=expired,wrong-hots") }
        #expect(error?.flag == "--challenge")
        #expect(error?.argument == ".*=expired,wrong-hots")
        #expect(error?.description.hasPrefix("--challenge '.*=expired,wrong-hots': unknown kind 'wrong-hots'") == true)
        #expect(error?.problem.contains("wrong-host, self-signed, untrusted-ca") == true)
    }

    @Test func emptyPartsAreRefusedNamingThePart() {
        let noKinds = #expect(throws: ChallengeSpecError.self) { try ChallengeSpec(parsing: "api=") }
        #expect(noKinds?.problem.contains("no kinds after '='") == true)
        let emptyKind = #expect(throws: ChallengeSpecError.self) { try ChallengeSpec(parsing: "api=expired,,tls1.0") }
        #expect(emptyKind?.problem.contains("an empty kind in 'expired,,tls1.0'") == true)
        let noPattern = #expect(throws: ChallengeSpecError.self) { try ChallengeSpec(parsing: "=expired") }
        #expect(noPattern?.problem.contains("host pattern before '=' is empty") == true)
        #expect(throws: ChallengeSpecError.self) { try ChallengeSpec(parsing: "") }
    }

    @Test func anInvalidRegularExpressionIsRefusedNamingThePattern() {
        let error = #expect(throws: ChallengeSpecError.self) { try ChallengeSpec(parsing: "api(.example=expired") }
        #expect(error?.problem.hasPrefix("the host pattern 'api(.example' is not a valid regular expression") == true)
        // Unbalanced on its own, balanced once wrapped: still refused.
        #expect(throws: ChallengeSpecError.self) { try ChallengeSpec(parsing: "a)|(b") }
    }

    @Test func anEqualsSignInsideALookAheadBelongsToThePattern() throws {
        let spec = try ChallengeSpec(parsing: "(?=api\\.).*")
        #expect(spec.pattern == "(?=api\\.).*")
        #expect(spec.kinds == ChallengeKind.allCases)
        #expect(spec.matches(host: "api.example.com"))
        #expect(!spec.matches(host: "www.example.com"))
    }

    @Test func thePatternMustMatchTheWholeHostWithoutCase() throws {
        let exact = try ChallengeSpec(parsing: #"api\.example\.com"#)
        #expect(exact.matches(host: "api.example.com"))
        #expect(exact.matches(host: "API.Example.COM."))
        #expect(!exact.matches(host: "api.example.com.evil.test"))
        #expect(!exact.matches(host: "xapi.example.com"))
        let alternation = try ChallengeSpec(parsing: "a|ab")
        #expect(alternation.matches(host: "ab"))
        #expect(!alternation.matches(host: "abc"))
        let subdomains = try ChallengeSpec(parsing: #".*\.example\.com=expired"#)
        #expect(subdomains.matches(host: "a.b.example.com"))
        #expect(!subdomains.matches(host: "example.com"))
        let everything = try ChallengeSpec(parsing: ".*")
        #expect(everything.matches(host: "anything.test"))
        #expect(everything.matches(host: "[2001:db8::1]"))
        let address = try ChallengeSpec(parsing: #"2001:db8::1"#)
        #expect(address.matches(host: "[2001:db8::1]"))
    }

    @Test func everyIsAWholeNumberOfAtLeastOne() throws {
        #expect(try ChallengeSpec.parseEvery("1") == 1)
        #expect(try ChallengeSpec.parseEvery(" 3 ") == 3)
        for bad in ["0", "-2", "two", "", "1.5"] {
            let error = #expect(throws: ChallengeSpecError.self) { try ChallengeSpec.parseEvery(bad) }
            #expect(error?.description.hasPrefix("--challenge-every '\(bad)': expected a whole number") == true)
        }
    }

    @Test func aSettingsKeyCanStandInForTheFlag() {
        let error = #expect(throws: ChallengeSpecError.self) {
            try ChallengeSpec(parsing: "x=bogus", flag: "challenge[2]")
        }
        #expect(error?.description.hasPrefix("challenge[2] 'x=bogus'") == true)
    }
}
