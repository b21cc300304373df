import ATSAppTrust
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// `--af-policy HOST_PATTERN=MODE[,pins=DIR][,allow-invalid][,no-domain-check]`: parsing, pins, host matching.
@Suite("--af-policy parsing")
struct AFPolicySpecTests {
    /// A pins directory with the leaf as DER (.cer) and the root and intermediate as one PEM bundle, plus a file
    /// with another extension that must be ignored.
    static func pinsDirectory() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory("af-pins")
        try Data(AFChains.leaf.derBytes).write(to: URL(fileURLWithPath: directory.file("leaf.cer")))
        let bundle = try TestPKI.root.pemBytes() + TestPKI.intermediate.pemBytes()
        try Data(bundle).write(to: URL(fileURLWithPath: directory.file("cas.pem")))
        _ = try directory.write("README.txt", "not a certificate")
        return directory
    }

    @Test func fullSpecLoadsDERAndPEMPins() throws {
        let directory = try Self.pinsDirectory()
        let spec = try AFPolicySpec(
            parsing: #"api\.example\.com=certificate,pins=\#(directory.path),allow-invalid,no-domain-check"#)
        #expect(spec.hostPattern == #"api\.example\.com"#)
        #expect(spec.policy.mode == .certificate)
        #expect(spec.policy.allowInvalidCertificates)
        #expect(!spec.policy.validatesDomainName)
        #expect(
            spec.policy.pinnedDER
                == Set([AFChains.leaf.derBytes, TestPKI.root.derBytes, TestPKI.intermediate.derBytes]))
        #expect(spec.policy.scenario == .certificateAllowInvalidNoDomainCheck)
    }

    @Test func defaultsAreAFNetworkings() throws {
        let spec = try AFPolicySpec(parsing: "example.com=none")
        #expect(spec.policy.mode == .none)
        #expect(!spec.policy.allowInvalidCertificates)
        #expect(spec.policy.validatesDomainName)
        #expect(spec.policy.pinnedCertificates.isEmpty)
        #expect(spec.policy.scenario == .noneDefault)
    }

    @Test func pinsMayBeOneFile() throws {
        let directory = try Self.pinsDirectory()
        let spec = try AFPolicySpec(parsing: "h=public-key,pins=\(directory.file("leaf.cer"))")
        #expect(spec.policy.pinnedDER == [AFChains.leaf.derBytes])
    }

    @Test func patternMatchesTheWholeHostCaseInsensitively() throws {
        let spec = try AFPolicySpec(parsing: #"api\.example\.com=none"#)
        #expect(spec.matches(host: "api.example.com"))
        #expect(spec.matches(host: "API.Example.COM."))
        #expect(!spec.matches(host: "xapi.example.com"))
        #expect(!spec.matches(host: "api.example.com.evil.test"))
        let wildcard = try AFPolicySpec(parsing: #".*\.example\.com=none"#)
        #expect(wildcard.matches(host: "cdn.example.com"))
        #expect(!wildcard.matches(host: "example.com"))
        let alternation = try AFPolicySpec(parsing: "a.test|b.test=none")
        #expect(alternation.matches(host: "b.test"))
        #expect(!alternation.matches(host: "a.testx"))
        let ip = try AFPolicySpec(parsing: #"::1|127\.0\.0\.1=none"#)
        #expect(ip.matches(host: "[::1]"))
    }

    @Test func firstMatchingSpecWins() throws {
        let specs = try [
            AFPolicySpec(parsing: #"api\.example\.com=none,allow-invalid,no-domain-check"#),
            AFPolicySpec(parsing: #".*=none"#),
        ]
        #expect(AFPolicySpec.first(specs, matching: "api.example.com")?.policy.allowInvalidCertificates == true)
        #expect(AFPolicySpec.first(specs, matching: "other.test")?.policy.allowInvalidCertificates == false)
        #expect(AFPolicySpec.first(Array(specs.prefix(1)), matching: "other.test") == nil)
    }

    @Test func equalsSignInThePatternBeforeTheMode() throws {
        let directory = try Self.pinsDirectory()
        let spec = try AFPolicySpec(parsing: "(?=a)a.test=public-key,pins=\(directory.file("leaf.cer"))")
        #expect(spec.hostPattern == "(?=a)a.test")
    }

    static let badSpecs: [(spec: String, problem: String)] = [
        ("example.com", "expected HOST_PATTERN=MODE"),
        ("example.com=pinned", "unknown mode 'pinned'"),
        ("=none", "the host pattern before '=' is empty"),
        ("([a=none", "is not a valid regular expression"),
        ("h=none,allow-invalid,allow-invalid", "'allow-invalid' is given twice"),
        ("h=none,no-domain-check,no-domain-check", "'no-domain-check' is given twice"),
        ("h=none,validate", "unknown part 'validate'"),
        ("h=certificate", "mode certificate needs pins=DIR"),
        ("h=public-key", "mode public-key needs pins=DIR"),
        ("h=public-key,pins=", "'pins=' needs a directory or file"),
        ("h=public-key,pins=/nonexistent/af-pins", "pins=/nonexistent/af-pins: no such file or directory"),
    ]

    @Test(arguments: badSpecs.indices)
    func badSpecIsRefusedNamingThePart(_ index: Int) {
        let (text, problem) = Self.badSpecs[index]
        do {
            _ = try AFPolicySpec(parsing: text)
            Issue.record("'\(text)' was accepted")
        } catch let error as AFPolicySpecError {
            #expect(error.description.hasPrefix("--af-policy '\(text)': "), "\(error)")
            #expect(error.problem.contains(problem), "\(error)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func badPinFilesAreNamed() throws {
        let directory = try TemporaryDirectory("af-bad-pins")
        let empty = try TemporaryDirectory("af-empty-pins")
        _ = try directory.write("broken.cer", "garbage")
        _ = try empty.write("notes.txt", "nothing")
        #expect(throws: AFPolicySpecError.self) { try AFPolicySpec(parsing: "h=certificate,pins=\(directory.path)") }
        do {
            _ = try AFPolicySpec(parsing: "h=certificate,pins=\(directory.path)")
        } catch let error as AFPolicySpecError {
            #expect(error.problem.contains("broken.cer is neither a DER nor a PEM certificate"), "\(error)")
        }
        do {
            _ = try AFPolicySpec(parsing: "h=certificate,pins=\(empty.path)")
            Issue.record("an empty pins directory was accepted")
        } catch let error as AFPolicySpecError {
            #expect(error.problem.contains("no .cer, .der, .crt or .pem file"), "\(error)")
        }
    }
}

/// The text explain and diagnose print, and the verdicts' meanings for each chain role.
@Suite("--af-policy report text")
struct AFPolicyReportTests {
    @Test func explainLinesNameScenarioAndChainIndependentVerdicts() throws {
        let refused = try AFPolicySpec(parsing: "h.test=none,allow-invalid")
        let lines = AFPolicyReport.policyLines(refused, host: "h.test")
        #expect(lines[0] == "App pinning (AFSecurityPolicy) for h.test [--af-policy 'h.test=none,allow-invalid']:")
        #expect(
            lines[1]
                == "Policy : AFSSLPinningModeNone, allowInvalidCertificates = YES, validatesDomainName = YES, 0 pinned certificates"
        )
        #expect(lines[2].hasPrefix("Scenario : 3 (None/YES/*): "))
        #expect(lines[3].hasPrefix("Any chain : REFUSE: AFNetworking refuses every server"))
        #expect(lines[3].contains("you MUST use pinning"))
        let open = try AFPolicySpec(parsing: "h.test=none,allow-invalid,no-domain-check")
        #expect(
            AFPolicyReport.policyLines(open, host: "h.test")[3].hasPrefix(
                "Any chain : ACCEPT: accepted without any validation"))
        let strict = try AFPolicySpec(parsing: "h.test=none")
        #expect(AFPolicyReport.policyLines(strict, host: "h.test").count == 3)
        #expect(
            AFPolicyReport.policyLines(nil, host: "x.test") == [
                "App pinning (AFSecurityPolicy) for x.test: no --af-policy matches this host"
            ])
    }

    @Test func interceptionAdviceNamesPassthrough() {
        let verdict = AFVerdict.refused(.noPinnedPublicKeyInChain)
        #expect(
            verdict.meaning(for: .interception, host: "api.example.com")
                == "the app's pinned public keys match no certificate of the interception chain: interception breaks this app; run with --passthrough api.example.com or test with the real chain"
        )
        #expect(verdict.meaning(for: .real, host: "api.example.com").contains("would refuse the production server"))
        let anchors = AFVerdict.refused(.pinnedAnchorsRejectChain(AFTrustFailure(issues: [])))
        #expect(anchors.meaning(for: .interception, host: "h").contains("--passthrough h"))
    }

    @Test func everyVerdictHasAMeaningForBothRoles() {
        let expired = TestPKI.trust.evaluate(
            chain: [AFChains.expiredLeaf, TestPKI.intermediate], policy: .basicX509, at: AFChains.now)
        let failure = AFTrustFailure(issues: expired.issues)
        let verdicts: [AFVerdict] = [
            .accepted(.withoutValidation), .accepted(.trustedChain(nameChecked: true)),
            .accepted(.trustedChain(nameChecked: false)), .accepted(.pinnedCertificate(depth: 1)),
            .accepted(.pinnedPublicKey(depths: [0], trustChecked: true)),
            .accepted(.pinnedPublicKey(depths: [0, 2], trustChecked: false)),
            .refused(.domainValidationNeedsPinning), .refused(.chainNotTrusted(failure)),
            .refused(.pinnedAnchorsRejectChain(failure)), .refused(.noPinnedCertificateInChain),
            .refused(.noPinnedPublicKeyInChain),
        ]
        for verdict in verdicts {
            for role in [AFChainRole.real, .interception] {
                let text = verdict.meaning(for: role, host: "h.test")
                #expect(!text.isEmpty && !text.contains("\n"), "\(verdict)")
            }
        }
        #expect(
            AFVerdict.refused(.chainNotTrusted(failure)).meaning(for: .real, host: "h").contains("expired (depth 0)"))
    }
}
