import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The App trust section of the session report: challenge results per host and kind, AFSecurityPolicy
/// verdicts on the real and interception chains, kept apart from every ATS figure; in report.json (against
/// the schema), report.html and junit.xml.
@Suite(.serialized) struct SessionReportAppTrustTests {
    typealias F = ReportFixtures

    // MARK: - Records as the proxy writes them

    /// A challenged connection's record: a refusal is the CONNECT's, an acceptance the request's (answered 502).
    static func challenge(_ host: String, _ kind: ChallengeKind, accepted: Bool) -> RequestRecord {
        let outcome = ChallengeOutcome(host: host, kind: kind, result: accepted ? .sentRequest : .closedWithoutRequest)
        let appTrust = AppTrustRecord(challenge: kind.rawValue, challengeMeaning: outcome.meaning)
        return RequestRecord(
            time: F.start, clientAddress: "127.0.0.1:50000", taskID: "C.1", method: accepted ? "GET" : "CONNECT",
            url: accepted ? "https://\(host)/v1/items" : "https://\(host):443/", host: host, httpProtocol: "http/1.1",
            source: .urlsession, result: accepted ? .challengeAccepted : .challengeRefused, atsRequired: false,
            ruleChain: [], rule: outcome.meaning, status: accepted ? 502 : nil, bytesToClient: accepted ? 300 : 0,
            durationMilliseconds: 3, appTrust: appTrust)
    }

    static let interceptionRefusal =
        "refused: the proxy's chain carries no pinned public key (the app breaks under interception; use --passthrough for this host)"
    static let realRefusal =
        "refused: the chain carries no pinned public key (the app would refuse the production server)"
    static let realAcceptance = "the chain is trusted and carries a pinned public key (depth 1)"

    /// An ordinary completed request that opened an upstream connection to a host an `--af-policy` names.
    static func pinned(_ url: String, real: AppTrustRecord.Verdict, interception: AppTrustRecord.Verdict)
        -> RequestRecord
    {
        let pinning = AppTrustRecord.Pinning(
            policy: #"pinned\.example\.com=public-key,pins=Pins"#, scenario: 4,
            scenarioMeaning:
                "trusted root, validity dates and host name, and a public key of the chain must equal a pinned certificate's key",
            realChain: real, interceptionChain: interception)
        var record = F.record(url, tls: F.tls())
        record.appTrust = AppTrustRecord(pinning: pinning)
        return record
    }

    static let accepts = AppTrustRecord.Verdict(accepted: true, meaning: realAcceptance)

    /// api.example.com: ordinary traffic plus passes and a finding across kinds; pinned.example.com: the
    /// policy refuses the interception chain; both.example.com: the policy refuses the real chain and a
    /// challenge was accepted; evil.example.com: only ever challenged.
    static var appTrustTraffic: [RequestRecord] {
        [
            F.record("https://api.example.com/v1/items", tls: F.tls()),
            F.record("https://api.example.com/v1/other", tls: F.tls()),
            challenge("api.example.com", .wrongHost, accepted: false),
            challenge("api.example.com", .expired, accepted: true),
            challenge("api.example.com", .tls10Only, accepted: false),
            challenge("api.example.com", .wrongHost, accepted: false),
            challenge("api.example.com", .expired, accepted: false),
            pinned(
                "https://pinned.example.com/a", real: accepts,
                interception: .init(accepted: false, meaning: interceptionRefusal)),
            pinned(
                "https://pinned.example.com/a", real: accepts,
                interception: .init(accepted: false, meaning: interceptionRefusal)),
            challenge("pinned.example.com", .selfSigned, accepted: false),
            pinned(
                "https://both.example.com/", real: .init(accepted: false, meaning: realRefusal),
                interception: .init(accepted: false, meaning: interceptionRefusal)),
            pinned(
                "https://both.example.com/", real: accepts,
                interception: .init(accepted: false, meaning: interceptionRefusal)),
            challenge("both.example.com", .untrustedCA, accepted: true),
            challenge("evil.example.com", .noSAN, accepted: true),
            challenge("evil.example.com", .staticRSAOnly, accepted: false),
        ]
    }

    // MARK: - The section

    @Test func findingsAndPassesAcrossKindsPerHost() throws {
        let report = F.report(Self.appTrustTraffic)
        let document = report.document()
        let api = try #require(document.appTrust.hosts.first { $0.host == "api.example.com" })
        #expect(api.status == .challengeFinding)
        #expect(api.atsStatus == .ok)
        #expect(api.pinning == nil)
        #expect(api.challenges.map(\.kind) == ["wrong-host", "expired", "tls1.0"])
        #expect(api.challenges.map(\.verdict) == [.pass, .finding, .pass])
        #expect(api.challenges.map(\.passes) == [2, 1, 1])
        #expect(api.challenges.map(\.findings) == [0, 1, 0])
        #expect(api.challengePasses == 4 && api.challengeFindings == 1)
        let expired = api.challenges[1]
        #expect(expired.meaning == ChallengeKind.expired.acceptanceMeaning)
        #expect(expired.category == "certificate" && expired.presents == ChallengeKind.expired.presents)
        #expect(api.challenges[2].category == "handshake")
        #expect(api.challenges[0].meaning.contains("as a client that evaluates trust after the handshake does"))
        // The ATS part sees only the two ordinary requests.
        let atsHost = try #require(document.hosts.first { $0.host == "api.example.com" })
        #expect(atsHost.requests == 2 && atsHost.allowed == 2 && atsHost.failed == 0 && atsHost.status == .ok)
        #expect(atsHost.verdicts.map(\.result) == ["completed"])
        #expect(document.totals.challengePasses == 6 && document.totals.challengeFindings == 3)
        #expect(report.challengeFindingCount == 3)
        #expect(report.violationCount == 0)
    }

    @Test func pinningThatRefusesTheInterceptionChain() throws {
        let document = F.report(Self.appTrustTraffic).document()
        let pinned = try #require(document.appTrust.hosts.first { $0.host == "pinned.example.com" })
        #expect(pinned.status == .pinningRefusesInterception)
        #expect(pinned.atsStatus == .ok)
        let pinning = try #require(pinned.pinning)
        #expect(pinning.policy == #"pinned\.example\.com=public-key,pins=Pins"# && pinning.scenario == 4)
        // Two records with one signature: the second takes the report's fast path and still counts.
        #expect(pinning.evaluations == 2)
        #expect(
            pinning.realChain
                == ChainVerdictSummary(accepted: true, acceptances: 2, refusals: 0, meaning: Self.realAcceptance))
        #expect(
            pinning.interceptionChain
                == ChainVerdictSummary(accepted: false, acceptances: 0, refusals: 2, meaning: Self.interceptionRefusal))
        #expect(pinned.challenges.map(\.verdict) == [.pass])
        // Pinning verdicts ride on ordinary requests: ATS counts them as usual.
        let atsHost = try #require(document.hosts.first { $0.host == "pinned.example.com" })
        #expect(atsHost.requests == 2 && atsHost.allowed == 2)
        #expect(document.totals.pinningInterceptionRefused == 2)
    }

    @Test func aHostWithARealChainRefusalAndAFinding() throws {
        let document = F.report(Self.appTrustTraffic).document()
        let both = try #require(document.appTrust.hosts.first { $0.host == "both.example.com" })
        #expect(both.status == .challengeFinding)
        let pinning = try #require(both.pinning)
        // One refusal decides the chain's verdict, with the refusal's meaning, though a later connection passed.
        #expect(
            pinning.realChain
                == ChainVerdictSummary(accepted: false, acceptances: 1, refusals: 1, meaning: Self.realRefusal))
        #expect(!pinning.interceptionChain.accepted)
        #expect(both.challenges.map(\.kind) == ["untrusted-ca"] && both.challenges[0].verdict == .finding)
        #expect(document.totals.pinningRealChainRefused == 1)
        // Worst first: findings (by count, then name), then pinning refusals.
        #expect(
            document.appTrust.hosts.map(\.host) == [
                "api.example.com", "both.example.com", "evil.example.com", "pinned.example.com",
            ])
        #expect(
            document.appTrust.hosts.map(\.status) == [
                .challengeFinding, .challengeFinding, .challengeFinding, .pinningRefusesInterception,
            ])
    }

    @Test func aHostOnlyChallengedLeavesTheATSPartAlone() throws {
        let ordinary = Self.appTrustTraffic.filter {
            $0.result != .challengeAccepted && $0.result != .challengeRefused
        }
        let withChallenges = F.report(Self.appTrustTraffic).document()
        let without = F.report(ordinary).document()
        let evil = try #require(withChallenges.appTrust.hosts.first { $0.host == "evil.example.com" })
        #expect(evil.atsStatus == nil)
        #expect(evil.status == .challengeFinding)
        #expect(evil.challenges.map(\.kind) == ["no-san", "static-rsa"])
        #expect(!withChallenges.hosts.contains { $0.host == "evil.example.com" })
        // Every ATS figure is what the ordinary requests alone give.
        #expect(withChallenges.hosts == without.hosts)
        #expect(withChallenges.minimalDictionary == without.minimalDictionary)
        #expect(withChallenges.comparison == without.comparison)
        var totals = withChallenges.totals
        #expect(totals.requests == ordinary.count && totals.violations == 0 && totals.failed == 0)
        totals.challengePasses = 0
        totals.challengeFindings = 0
        #expect(totals == without.totals)
        #expect(without.appTrust.hosts.map(\.host) == ["both.example.com", "pinned.example.com"])
        // A session without --challenge or --af-policy has an empty section.
        let plain = F.report(SessionReportTests.mixedTraffic).document()
        #expect(plain.appTrust.hosts.isEmpty && plain.totals.challengeFindings == 0)
    }

    // MARK: - The written files

    static func written() throws -> (directory: URL, document: SessionReportDocument) {
        let report = F.report(SessionReportTests.mixedTraffic + Self.appTrustTraffic)
        let directory = try F.temporaryDirectory().appendingPathComponent("report")
        try report.write(to: directory.path)
        return (directory, report.document())
    }

    @Test func reportJSONWithTheSectionValidatesAgainstTheSchema() throws {
        let (directory, _) = try Self.written()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let result = try F.checkReportJSON(
            at: directory.appendingPathComponent("report.json").path,
            """
            for error in validator.iter_errors(document):
                print("invalid:", "/".join(str(p) for p in error.path), error.message)
            hosts = {h["host"]: h for h in document["appTrust"]["hosts"]}
            print("hosts", ",".join(sorted(hosts)))
            print("totals", document["totals"]["challengePasses"], document["totals"]["challengeFindings"],
                  document["totals"]["pinningRealChainRefused"], document["totals"]["pinningInterceptionRefused"])
            print("evil-ats", "atsStatus" in hosts["evil.example.com"], "pinning" in hosts["evil.example.com"])
            print("pinned", hosts["pinned.example.com"]["pinning"]["interceptionChain"]["accepted"])
            # Drift the schema must reject, one at a time.
            drifts = []
            def drift(change):
                changed = copy.deepcopy(document)
                change(changed)
                drifts.append(len(list(validator.iter_errors(changed))) > 0)
            drift(lambda d: d["appTrust"]["hosts"][0].update(surprise=1))
            drift(lambda d: d["appTrust"]["hosts"][0]["challenges"][0].update(verdict="maybe"))
            drift(lambda d: d["appTrust"]["hosts"][0].update(status="fine"))
            drift(lambda d: d["totals"].pop("challengeFindings"))
            drift(lambda d: d.pop("appTrust"))
            drift(lambda d: [h for h in d["appTrust"]["hosts"] if "pinning" in h][0]["pinning"]["realChain"].update(extra=True))
            print("rejected", sum(drifts), len(drifts))
            """)
        #expect(!result.timedOut)
        #expect(result.status == 0, "\(result.output)")
        #expect(!result.output.contains("invalid:"), "\(result.output)")
        #expect(result.output.contains("hosts api.example.com,both.example.com,evil.example.com,pinned.example.com"))
        #expect(result.output.contains("totals 6 3 1 2"), "\(result.output)")
        #expect(result.output.contains("evil-ats False False"), "\(result.output)")
        #expect(result.output.contains("pinned False"))
        #expect(result.output.contains("rejected 6 6"), "\(result.output)")
    }

    @Test func htmlShowsTheSectionAndTheFindingsUpFront() throws {
        let (directory, document) = try Self.written()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let html = try String(contentsOf: directory.appendingPathComponent("report.html"), encoding: .utf8)
        let e = PlistFragmentWriter.escape
        for external in ["<script", "<link", "<img", "<iframe", "url(", "@import", " src=", " href="] {
            #expect(!html.contains(external), "external reference \(external)")
        }
        // The header: the figures and an alert naming what was accepted, before the section and the ATS hosts.
        let header = try #require(html.range(of: "</header>")).lowerBound
        let head = String(html[..<header])
        #expect(head.contains(#"<span class="n">3</span><span class="l">challenge findings</span>"#))
        #expect(head.contains(#"<div class="stat bad"><span class="n">3</span>"#))
        #expect(head.contains("The app accepted 3 forged servers (expired, untrusted-ca, no-san) on 3 hosts"))
        #expect(
            head.contains(
                "The app's pinning policy refuses the real server's chain on both.example.com: the app would fail in production"
            ))
        let section = try #require(html.range(of: #"<section id="app-trust">"#)).lowerBound
        let atsHosts = try #require(html.range(of: #"<section id="hosts">"#)).lowerBound
        #expect(header < section && section < atsHosts)
        let body = String(html[section..<atsHosts])
        #expect(body.contains("<h2>App trust</h2>"))
        #expect(body.contains(#"<table class="apptrust">"#))
        #expect(body.contains("<th>App pinning: real chain</th><th>App pinning: interception chain</th>"))
        // The finding is a failure row carrying its meaning; a pass is a good row.
        #expect(
            body.contains(
                #"<tr class="bad"><td data-h="Check">challenge <code>expired</code>"#))
        #expect(body.contains(e(ChallengeKind.expired.acceptanceMeaning)))
        #expect(body.contains("FINDING: accepted"))
        #expect(body.contains(#"<tr class="good"><td data-h="Check">challenge <code>wrong-host</code>"#))
        #expect(
            body.contains(
                #"<td data-h="Result" class="r bad">FINDING: accepted</td><td data-h="Refused">1</td><td data-h="Accepted">1</td>"#
            ))
        // Pinning refusals, with their meaning; the host only challenged is "not judged" by ATS.
        #expect(body.contains("REFUSES</b> (2×): \(e(Self.interceptionRefusal))"))
        #expect(body.contains("REFUSES</b> (1×): \(e(Self.realRefusal))"))
        #expect(body.contains("not judged (every connection was challenged)"))
        #expect(body.contains(#"<span class="badge bad">forged server accepted</span> evil.example.com"#))
        #expect(body.contains(#"<span class="badge warn">pinning refuses interception</span> pinned.example.com"#))
        // The ATS host list has no card for the challenged-only host.
        #expect(!String(html[atsHosts...]).contains("evil.example.com"))
        #expect(document.appTrust.hosts.count == 4)
        // Kept for a look (and a screenshot) after the run.
        let artifacts = F.packageRoot.appendingPathComponent(".build/test-artifacts", isDirectory: true)
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let artifact = artifacts.appendingPathComponent("session-report-app-trust.html")
        try? FileManager.default.removeItem(at: artifact)
        try FileManager.default.copyItem(at: directory.appendingPathComponent("report.html"), to: artifact)
    }

    /// `(name, failure type, failure message)` of each test case of the "App trust" suite, and the root's
    /// and the suites' counts.
    static func junitCases(_ path: URL) throws -> (cases: [(String, String?, String?)], counts: [String]) {
        let script = """
            import sys, xml.etree.ElementTree as ET
            root = ET.parse(sys.argv[1]).getroot()
            print("root", root.get("tests"), root.get("failures"))
            for prop in root.iter("property"):
                print("property", prop.get("name"), prop.get("value"))
            for suite in root.findall("testsuite"):
                print("suite", suite.get("name"), suite.get("tests"), suite.get("failures"))
            for case in root.findall("./testsuite[@name='App trust']/testcase"):
                failure = case.find("failure")
                fields = [case.get("name"), failure.get("type") if failure is not None else "-",
                          failure.get("message") if failure is not None else "-"]
                print("case\\t" + "\\t".join(fields))
            """
        let result = try F.run("/usr/bin/env", ["python3", "-c", script, path.path], timeout: 60)
        #expect(result.status == 0, "\(result.output)")
        var cases: [(String, String?, String?)] = []
        var counts: [String] = []
        for line in result.output.split(separator: "\n").map(String.init) {
            if line.hasPrefix("case\t") {
                let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
                cases.append((fields[1], fields[2] == "-" ? nil : fields[2], fields[3] == "-" ? nil : fields[3]))
            } else {
                counts.append(line)
            }
        }
        return (cases, counts)
    }

    @Test func junitHasOneCasePerHostAndCheckWithTypedFailures() throws {
        let (directory, document) = try Self.written()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let (cases, counts) = try Self.junitCases(directory.appendingPathComponent("junit.xml"))
        let byName = Dictionary(cases.map { ($0.0, ($0.1, $0.2)) }, uniquingKeysWith: { first, _ in first })
        #expect(cases.count == byName.count, "test case names are unique")
        #expect(
            cases.map(\.0) == [
                "api.example.com: challenge wrong-host", "api.example.com: challenge expired",
                "api.example.com: challenge tls1.0",
                "both.example.com: pinning, real chain", "both.example.com: pinning, interception chain",
                "both.example.com: challenge untrusted-ca",
                "evil.example.com: challenge no-san", "evil.example.com: challenge static-rsa",
                "pinned.example.com: pinning, real chain", "pinned.example.com: pinning, interception chain",
                "pinned.example.com: challenge self-signed",
            ])
        #expect(byName["api.example.com: challenge expired"]?.0 == "ChallengeAccepted")
        #expect(byName["api.example.com: challenge expired"]?.1 == ChallengeKind.expired.acceptanceMeaning)
        #expect(byName["evil.example.com: challenge no-san"]?.1 == ChallengeKind.noSAN.acceptanceMeaning)
        #expect(byName["api.example.com: challenge wrong-host"]?.0 == nil)
        #expect(byName["evil.example.com: challenge static-rsa"]?.0 == nil)
        #expect(byName["pinned.example.com: pinning, interception chain"]?.0 == "PinningBreaksUnderInterception")
        #expect(
            byName["pinned.example.com: pinning, interception chain"]?.1
                == "the app's pinning policy refuses the interception chain of pinned.example.com: \(Self.interceptionRefusal)"
        )
        #expect(byName["pinned.example.com: pinning, real chain"]?.0 == nil)
        #expect(byName["both.example.com: pinning, real chain"]?.0 == "PinningRefusesRealChain")
        #expect(byName["both.example.com: pinning, real chain"]?.1?.hasSuffix(Self.realRefusal) == true)
        let appTrustFailures = cases.filter { $0.1 != nil }.count
        #expect(appTrustFailures == 6)
        let atsFailures = document.hosts.filter { $0.status == .violation }.count
        #expect(
            counts.contains("root \(document.hosts.count + cases.count) \(atsFailures + appTrustFailures)"), "\(counts)"
        )
        #expect(counts.contains("suite App trust \(cases.count) \(appTrustFailures)"), "\(counts)")
        #expect(counts.contains("property challengeFindings 3") && counts.contains("property challengePasses 6"))
        // The ATS suite has one case per ATS host: the challenged-only host is not among them.
        #expect(
            counts.contains { $0.hasPrefix("suite ATS: ") && $0.hasSuffix(" \(document.hosts.count) \(atsFailures)") })
    }

    @Test func junitHasNoAppTrustSuiteWithoutResults() throws {
        let xml = F.report(SessionReportTests.mixedTraffic).junitXML()
        #expect(!xml.contains("App trust"))
        #expect(xml.components(separatedBy: "<testsuite ").count == 2)
    }
}
