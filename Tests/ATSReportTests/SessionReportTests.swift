import ATSConfigFiles
import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// The minimal dictionary, its round trip through the policy engine, the comparison with the
/// loaded configuration, and the accumulator.
@Suite struct SessionReportTests {
    typealias F = ReportFixtures

    // MARK: - Minimal dictionary on recorded traffic

    /// Full ATS loaded; cleartext, an old server, a static-RSA server, an expired certificate and
    /// a good host.
    static let mixedTraffic: [RequestRecord] = [
        F.record(
            "http://api.example.com/v1/items", .blockedCleartext, error: -1022,
            rule:
                "No exception entry, not a local host, and NSAllowsArbitraryLoads is not set, so ATS is required (the default).",
            fix: "add NSExceptionDomains → api.example.com with NSExceptionAllowsInsecureHTTPLoads = YES"),
        F.record(
            "http://api.example.com/v1/other", .blockedCleartext, error: -1022, rule: "ATS is required (the default)."),
        F.record(
            "https://legacy.example.org/", .failed, error: -1200, stream: .secureTransport(-9836),
            rule:
                "the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3); this server supports only TLS 1.0 and TLS 1.1"
        ),
        F.record(
            "https://rsa.example.net/feed", .reported, error: -1200, stream: .secureTransport(-9824),
            tls: F.tls("TLSv1.2", cipher: "TLS_RSA_WITH_AES_128_GCM_SHA256", keyExchange: "RSA", leafKey: "RSA 2048"),
            rule: "the server chose TLS_RSA_WITH_AES_128_GCM_SHA256, a static-RSA suite without forward secrecy"),
        F.record(
            "https://expired.example.com/", .failed, error: -1200, stream: .secureTransport(-9802), tls: F.tls(),
            rule: "the server certificate expired on 2024-01-01T00:00:00Z", fix: "no Info.plist change can allow this"),
        F.record("https://good.example.com/", tls: F.tls()),
        F.record("https://good.example.com/again", tls: F.tls()),
    ]

    @Test func minimalDictionaryForFullATSTraffic() throws {
        let document = F.report(Self.mixedTraffic).document()
        let minimal = document.minimalDictionary
        let entries = Dictionary(uniqueKeysWithValues: minimal.entries.map { ($0.key, $0) })
        #expect(Set(entries.keys) == ["api.example.com", "legacy.example.org", "rsa.example.net"])
        #expect(entries["api.example.com"]?.allowsInsecureHTTPLoads == true)
        #expect(entries["api.example.com"]?.minimumTLSVersion == nil)
        #expect(entries["legacy.example.org"]?.minimumTLSVersion == "TLSv1.1")
        #expect(entries["legacy.example.org"]?.allowsInsecureHTTPLoads == false)
        #expect(entries["rsa.example.net"]?.requiresForwardSecrecy == false)
        #expect(entries.values.allSatisfy { !$0.includesSubdomains })
        #expect(!minimal.allowsLocalNetworking)
        #expect(minimal.roundTripVerified)
        #expect(minimal.unfixable.map(\.host) == ["expired.example.com"])
        #expect(minimal.unfixable.first?.reason.hasPrefix("no Info.plist change can allow this") == true)
        #expect(minimal.unfixable.first?.code == "-1200 [3:-9802]")
        // App Review notes (reference §6) as comments, and nothing for the PFS waiver.
        #expect(minimal.plist.hasPrefix("<key>NSAppTransportSecurity</key>\n<dict>"))
        #expect(minimal.plist.contains("<!-- NSExceptionAllowsInsecureHTTPLoads: App Review asks for a justification"))
        #expect(minimal.plist.contains("<!-- NSExceptionMinimumTLSVersion: App Review asks for a justification"))
        #expect(minimal.plist.contains("<!-- NSExceptionRequiresForwardSecrecy: no App Review justification needed"))
        #expect(!minimal.plist.contains("NSAllowsArbitraryLoads"))
    }

    @Test func roundTripAllowsEveryObservedLoadAndNothingBroader() throws {
        let document = F.report(Self.mixedTraffic).document()
        let parsed = try F.parseFragment(document.minimalDictionary.plist)
        #expect(parsed.messages.isEmpty)
        // Every observed load passes with what the server offered.
        #expect(try F.allows(parsed, "http://api.example.com/v1/items"))
        #expect(try F.allows(parsed, "https://legacy.example.org/", serverVersion: .tls11))
        #expect(try F.allows(parsed, "https://rsa.example.net/feed", serverVersion: .tls12, staticRSA: true))
        #expect(try F.allows(parsed, "https://good.example.com/"))
        // Nothing broader: the lowest version is the server's best, not TLS 1.0; other hosts and
        // schemes stay under full ATS.
        #expect(try !F.allows(parsed, "https://legacy.example.org/", serverVersion: .tls10))
        #expect(try !F.allows(parsed, "http://unobserved.example.com/"))
        #expect(try !F.allows(parsed, "http://www.api.example.com/"))
        #expect(try !F.allows(parsed, "http://good.example.com/"))
        #expect(try !F.allows(parsed, "http://legacy.example.org/"))
        #expect(try !F.allows(parsed, "https://unobserved.example.com/", serverVersion: .tls11))
        #expect(try !F.allows(parsed, "https://good.example.com/", serverVersion: .tls12, staticRSA: true))
    }

    @Test func emptyDictionaryWhenFullATSAllowsEverything() throws {
        let document = F.report([
            F.record("https://good.example.com/", tls: F.tls()), F.record("http://localhost:8080/", atsRequired: false),
            F.record("http://192.168.1.20/status", atsRequired: false),
        ]).document()
        #expect(document.minimalDictionary.entries.isEmpty)
        #expect(!document.minimalDictionary.allowsLocalNetworking)
        #expect(document.minimalDictionary.roundTripVerified)
        let parsed = try F.parseFragment(document.minimalDictionary.plist)
        #expect(parsed.exceptionDomains.isEmpty && !parsed.allowsLocalNetworking.isPresent)
        #expect(try F.allows(parsed, "http://localhost:8080/"))
    }

    @Test func hostsMergeUnderAParentOnlyWithThreeSiblingsOrTheParentItself() throws {
        let records = [
            F.record("http://a.cdn.example.com/x.png", atsRequired: false),
            F.record("http://b.cdn.example.com/y.png", atsRequired: false),
            F.record("http://c.cdn.example.com/z.png", atsRequired: false),
            F.record("http://one.two.example.net/", atsRequired: false),
            F.record("http://two.example.net/", atsRequired: false),
            F.record("http://x.pair.example.org/", atsRequired: false),
            F.record("http://y.pair.example.org/", atsRequired: false),
        ]
        let document = F.report(records, ats: ["NSAllowsArbitraryLoads": .bool(true)]).document()
        let entries = Dictionary(uniqueKeysWithValues: document.minimalDictionary.entries.map { ($0.key, $0) })
        #expect(
            Set(entries.keys) == ["cdn.example.com", "two.example.net", "x.pair.example.org", "y.pair.example.org"])
        #expect(entries["cdn.example.com"]?.includesSubdomains == true)
        #expect(
            entries["cdn.example.com"]?.coveredHosts == ["a.cdn.example.com", "b.cdn.example.com", "c.cdn.example.com"])
        #expect(entries["two.example.net"]?.includesSubdomains == true)
        #expect(entries["two.example.net"]?.coveredHosts == ["one.two.example.net", "two.example.net"])
        #expect(entries["x.pair.example.org"]?.includesSubdomains == false)
        #expect(document.minimalDictionary.roundTripVerified)
        let parsed = try F.parseFragment(document.minimalDictionary.plist)
        for record in records { #expect(try F.allows(parsed, record.url)) }
        #expect(try F.allows(parsed, "http://d.cdn.example.com/"))  // the documented price of merging
        #expect(try !F.allows(parsed, "http://cdn.example.com.evil.org/"))
        #expect(try !F.allows(parsed, "http://z.pair.example.org/"))
        #expect(try !F.allows(parsed, "http://example.com/"))
    }

    @Test func noMergeUnderAPublicSuffixOrLocalNames() throws {
        let records = ["a.co.uk", "b.co.uk", "c.co.uk", "one.local", "two.local", "three.local"].map {
            F.record("http://\($0)/", .blockedCleartext, error: -1022)
        }
        let options = EvaluationOptions(platform: Platform(family: .iOS, version: OSVersion(9, 0)))
        let document = F.report(records, options: options).document()
        #expect(document.minimalDictionary.entries.allSatisfy { !$0.includesSubdomains })
        #expect(document.minimalDictionary.entries.count == 6)
        #expect(document.minimalDictionary.roundTripVerified)
    }

    @Test func noMergeWhenASiblingNeedsADifferentRelaxation() throws {
        let records = [
            F.record("http://a.svc.example.com/", .blockedCleartext, error: -1022),
            F.record("http://b.svc.example.com/", .blockedCleartext, error: -1022),
            F.record("http://c.svc.example.com/", .blockedCleartext, error: -1022),
            F.record("https://d.svc.example.com/", tls: F.tls()),
        ]
        let document = F.report(records).document()
        let keys = document.minimalDictionary.entries.map(\.key)
        #expect(keys == ["a.svc.example.com", "b.svc.example.com", "c.svc.example.com"])
        let parsed = try F.parseFragment(document.minimalDictionary.plist)
        #expect(try !F.allows(parsed, "http://d.svc.example.com/"))
    }

    @Test func lowestNeededTLSVersionPerHostFromFactsFixesAndAssumptions() throws {
        let records = [
            // Report mode: the handshake completed and the facts say TLS 1.0.
            F.record(
                "https://old.example.com/", .reported, error: -1200, stream: .secureTransport(-9836),
                tls: F.tls("TLSv1.0", cipher: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", keyExchange: "ECDHE")),
            // The fix names the version.
            F.record(
                "https://fixed.example.com/", .failed, error: -1200, stream: .secureTransport(-9836),
                rule: "the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3)",
                fix: "add NSExceptionDomains → fixed.example.com with NSExceptionMinimumTLSVersion = TLSv1.1"),
            // Nothing says which version: TLSv1.0 is assumed and noted.
            F.record(
                "https://unknown.example.com/", .failed, error: -1200, stream: .secureTransport(-9836),
                rule: "the server accepts none of the TLS versions this host allows (TLS 1.2–TLS 1.3)"),
        ]
        let document = F.report(records).document()
        let versions = Dictionary(
            uniqueKeysWithValues: document.minimalDictionary.entries.map { ($0.key, $0.minimumTLSVersion) })
        #expect(versions["old.example.com"] == "TLSv1.0")
        #expect(versions["fixed.example.com"] == "TLSv1.1")
        #expect(versions["unknown.example.com"] == "TLSv1.0")
        #expect(document.minimalDictionary.notes.contains { $0.hasPrefix("unknown.example.com: ") })
        #expect(document.minimalDictionary.roundTripVerified)
    }

    @Test func arbitraryLoadsTrafficIsJudgedByItsNegotiatedFacts() throws {
        let records = [
            // Allowed under NSAllowsArbitraryLoads; the empty dictionary needs TLS 1.0 and static RSA.
            F.record(
                "https://ancient.example.com/",
                tls: F.tls("TLSv1.0", cipher: "TLS_RSA_WITH_AES_128_CBC_SHA", keyExchange: "RSA"),
                atsRequired: false),
            F.record(
                "https://dhe.example.com/",
                tls: F.tls("TLSv1.2", cipher: "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", keyExchange: "DHE"),
                atsRequired: false),
        ]
        let document = F.report(records, ats: ["NSAllowsArbitraryLoads": .bool(true)]).document()
        let minimal = document.minimalDictionary
        #expect(minimal.entries.map(\.key) == ["ancient.example.com"])
        #expect(minimal.entries.first?.minimumTLSVersion == "TLSv1.0")
        #expect(minimal.entries.first?.requiresForwardSecrecy == false)
        #expect(minimal.entries.first?.allowsInsecureHTTPLoads == false)
        #expect(minimal.unfixable.map(\.host) == ["dhe.example.com"])
        #expect(minimal.roundTripVerified)
        let parsed = try F.parseFragment(minimal.plist)
        #expect(try F.allows(parsed, "https://ancient.example.com/", serverVersion: .tls10, staticRSA: true))
        #expect(try !F.allows(parsed, "http://ancient.example.com/"))
    }

    @Test func tlsFloorOnOS26MakesOldServersUnfixable() throws {
        var options = EvaluationOptions(platform: Platform(family: .iOS, version: OSVersion(26, 0)))
        options.tls12FloorOn26 = true
        let document = F.report(
            [
                F.record(
                    "https://old.example.com/", .reported, error: -1200, stream: .secureTransport(-9836),
                    tls: F.tls("TLSv1.0", cipher: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", keyExchange: "ECDHE"))
            ], options: options
        ).document()
        #expect(document.minimalDictionary.entries.isEmpty)
        #expect(document.minimalDictionary.unfixable.first?.reason.contains("does not honour") == true)
        #expect(document.minimalDictionary.roundTripVerified)
    }

    @Test func trustAndPinFailuresAreListedNotRelaxed() throws {
        let document = F.report(
            [
                F.record(
                    "https://weak.example.com/", .failed, error: -1200, stream: .secureTransport(-9802),
                    tls: F.tls(
                        "TLSv1.2", cipher: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", keyExchange: "ECDHE",
                        leafKey: "RSA 1024"),
                    rule: "the server certificate has an RSA 1024-bit key; at least 2048 bits are required"),
                F.record(
                    "https://unknown-root.example.com/", .failed, error: -1202, stream: .secureTransport(-9813),
                    tls: F.tls(),
                    rule: "the chain ends in the root CN=Private, which is not trusted", atsRequired: false),
                F.record(
                    "https://pinned.example.com/", .failed, error: -1200, stream: .secureTransport(-9802), tls: F.tls(),
                    rule:
                        "the certificate chain matches none of the NSPinnedLeafIdentities of NSPinnedDomains → pinned.example.com"
                ),
                F.record(
                    "https://down.example.com/", .failed, error: -1003, stream: StreamError(domain: 12, code: 8),
                    rule: "not resolved"),
            ],
            ats: [
                "NSPinnedDomains": .dictionary([
                    "pinned.example.com": .dictionary(["NSPinnedLeafIdentities": .array([])])
                ])
            ]
        ).document()
        let minimal = document.minimalDictionary
        #expect(minimal.entries.isEmpty)
        #expect(
            Set(minimal.unfixable.map(\.host)) == [
                "weak.example.com", "unknown-root.example.com", "pinned.example.com",
            ])
        #expect(minimal.unfixable.contains { $0.reason.contains("identity pinning") })
        let status = Dictionary(uniqueKeysWithValues: document.hosts.map { ($0.host, $0.status) })
        #expect(status["weak.example.com"] == .violation)
        #expect(status["unknown-root.example.com"] == .trustFailure)
        #expect(status["down.example.com"] == .transportFailure)
        // Worst first.
        #expect(document.hosts.map(\.status) == document.hosts.map(\.status).sorted(by: >))
    }

    @Test func explicitLocalNetworkingNoIsNotCarriedIntoTheMinimalDictionary() throws {
        let document = F.report(
            [
                F.record(
                    "http://localhost:3000/api", .blockedCleartext, error: -1022,
                    rule: "The host is an unqualified name, but NSAllowsLocalNetworking = NO is explicit",
                    fix: "set NSAllowsLocalNetworking = YES (or remove the explicit NO), or load the URL over https://")
            ], ats: ["NSAllowsLocalNetworking": .bool(false)]
        ).document()
        #expect(document.minimalDictionary.entries.isEmpty)
        #expect(!document.minimalDictionary.allowsLocalNetworking)
        let parsed = try F.parseFragment(document.minimalDictionary.plist)
        #expect(try F.allows(parsed, "http://localhost:3000/api"))
    }

    @Test func oldPlatformWithoutLocalExemptionGetsPerHostEntries() throws {
        let options = EvaluationOptions(platform: Platform(family: .iOS, version: OSVersion(9, 0)))
        let document = F.report([F.record("http://devbox/", .blockedCleartext, error: -1022)], options: options)
            .document()
        #expect(document.minimalDictionary.entries.map(\.key) == ["devbox"])
        #expect(document.minimalDictionary.roundTripVerified)
        let parsed = try F.parseFragment(document.minimalDictionary.plist)
        #expect(try F.allows(parsed, "http://devbox/", options: options))
    }

    // MARK: - Comparison with the loaded configuration

    @Test func arbitraryLoadsIsOverBroadWhenTwoHostExceptionsWouldDo() throws {
        let document = F.report(
            [
                F.record("http://images.example.com/a.png", atsRequired: false),
                F.record("http://tracker.example.net/p", atsRequired: false),
                F.record("https://api.example.com/", tls: F.tls(), atsRequired: false),
            ], ats: ["NSAllowsArbitraryLoads": .bool(true)]
        ).document()
        let finding = try #require(document.comparison.overBroad.first { $0.code == "over-broad-global-key" })
        #expect(finding.keyPath == "NSAppTransportSecurity → NSAllowsArbitraryLoads")
        #expect(finding.message.contains("2 host exceptions would do"))
        #expect(
            finding.message.contains("images.example.com, tracker.example.net")
                || finding.message.contains("3 observed"))
        #expect(document.minimalDictionary.entries.map(\.key) == ["images.example.com", "tracker.example.net"])
    }

    @Test func presenceRuleUnexercisedAndUnneededKeys() throws {
        let ats: [String: PlistValue] = [
            "NSAllowsArbitraryLoads": .bool(true), "NSAllowsLocalNetworking": .bool(true),
            "NSExceptionDomains": .dictionary([
                "unused.example.com": .dictionary(["NSExceptionAllowsInsecureHTTPLoads": .bool(true)]),
                "secure.example.com": .dictionary([
                    "NSExceptionAllowsInsecureHTTPLoads": .bool(true), "NSIncludesSubdomains": .bool(true),
                    "NSExceptionRequiresForwardSecrecy": .bool(false),
                ]),
            ]),
        ]
        let records = [
            F.record("https://secure.example.com/", tls: F.tls(), atsRequired: false),
            F.record("http://localhost:8080/", atsRequired: false),
        ]
        let document = F.report(records, ats: ats).document()
        let comparison = document.comparison
        #expect(
            comparison.unexercisedExceptions.map(\.keyPath) == [
                "NSAppTransportSecurity → NSExceptionDomains → unused.example.com"
            ])
        #expect(comparison.ignoredKeys.map(\.code) == ["aal-ignored"])
        let overBroad = Set(comparison.overBroad.map(\.keyPath))
        #expect(overBroad.contains("NSAppTransportSecurity → NSAllowsLocalNetworking"))
        #expect(
            overBroad.contains(
                "NSAppTransportSecurity → NSExceptionDomains → secure.example.com → NSExceptionAllowsInsecureHTTPLoads")
        )
        #expect(
            overBroad.contains(
                "NSAppTransportSecurity → NSExceptionDomains → secure.example.com → NSExceptionRequiresForwardSecrecy"))
        #expect(
            overBroad.contains(
                "NSAppTransportSecurity → NSExceptionDomains → secure.example.com → NSIncludesSubdomains"))
        #expect(document.configuration.allowsArbitraryLoads == "YES")
        #expect(document.configuration.exceptionDomains.map(\.key) == ["secure.example.com", "unused.example.com"])

        // With the source known, the linter reports the presence rule itself.
        let directory = try F.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ATS.plist").path
        let data = try PropertyListSerialization.data(
            fromPropertyList: PlistValue.dictionary(ats).foundationObject, format: .xml, options: 0)
        try data.write(to: URL(fileURLWithPath: path))
        let loaded = try ConfigSourceReader.load(path: path)
        let linted = F.report(records, ats: ats, source: loaded).document()
        let ignored = try #require(linted.comparison.ignoredKeys.first { $0.code == "aal-ignored" })
        #expect(ignored.message.contains("NSAllowsLocalNetworking"))
    }

    // MARK: - Accumulator

    @Test func hostSummaryCountsVerdictsAndTLS() throws {
        let document = F.report(Self.mixedTraffic).document()
        #expect(document.totals.requests == 7)
        #expect(document.totals.violations == 5)
        #expect(document.totals.hosts == 5)
        let api = try #require(document.hosts.first { $0.host == "api.example.com" })
        #expect(api.requests == 2 && api.blocked == 2 && api.status == .violation)
        #expect(api.verdicts.map(\.code) == ["-1022", "-1022"])
        #expect(api.needs.cleartext)
        let rsa = try #require(document.hosts.first { $0.host == "rsa.example.net" })
        #expect(rsa.reported == 1 && rsa.tls.first?.keyExchange == "RSA" && rsa.tls.first?.leafKey == "RSA 2048")
        #expect(rsa.verdicts.first?.code == "-1200 [3:-9824]")
        #expect(rsa.failedRule?.contains("static-RSA") == true)
        let good = try #require(document.hosts.first { $0.host == "good.example.com" })
        #expect(good.status == .ok && good.allowed == 2 && good.tls.first?.count == 2 && good.verdicts.count == 1)
        #expect(document.hosts.last?.host == "good.example.com")
    }

    @Test func recordIsThreadSafe() async throws {
        let report = F.report([])
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for index in 0..<250 {
                        report.record(
                            F.record(
                                index % 2 == 0
                                    ? "http://h\(worker).example.com/\(index)" : "https://h\(worker).example.com/",
                                index % 2 == 0 ? .blockedCleartext : .completed, error: index % 2 == 0 ? -1022 : nil,
                                tls: index % 2 == 0 ? nil : F.tls()))
                    }
                }
            }
        }
        report.record(F.record("http://ats-proxy.invalid/ca.pem"))
        #expect(report.requestCount == 2000)
        #expect(report.violationCount == 1000)
        let document = report.document()
        #expect(document.hosts.count == 8)
        #expect(document.hosts.allSatisfy { $0.requests == 250 && $0.blocked == 125 && $0.allowed == 125 })
        // Eight sibling hosts needing the same relaxation merge under their parent.
        #expect(document.minimalDictionary.entries.map(\.key) == ["example.com"])
        #expect(document.minimalDictionary.entries.first?.coveredHosts.count == 8)
    }

    // MARK: - Report directory

    @Test func checkWritableCreatesTheDirectoryAndRejectsFiles() throws {
        let base = try F.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: base) }
        let nested = base.appendingPathComponent("a/b/report").path
        try SessionReport.checkWritable(directory: nested)
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: nested, isDirectory: &isDirectory) && isDirectory.boolValue)
        #expect(try FileManager.default.contentsOfDirectory(atPath: nested).isEmpty)
        let file = base.appendingPathComponent("plain-file").path
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        #expect(throws: SessionReportError.self) { try SessionReport.checkWritable(directory: file) }
        #expect(throws: SessionReportError.self) { try SessionReport.checkWritable(directory: file + "/sub") }
        #expect(throws: SessionReportError.self) { try SessionReport.checkWritable(directory: "") }
    }

    @Test func writeProducesTheThreeFiles() throws {
        let base = try F.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: base) }
        let directory = base.appendingPathComponent("out").path
        try F.report(Self.mixedTraffic).write(to: directory)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(names == ["junit.xml", "report.html", "report.json"])
        let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/report.json"))
        let decoded = try JSONDecoder().decode(SessionReportDocument.self, from: data)
        #expect(decoded == F.report(Self.mixedTraffic).document())
    }
}
