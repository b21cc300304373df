import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSTLS

/// Tests for: Apple's CT log list: parsing, validation and the per-user cache.
@Suite("Apple's CT log list: parsing, validation, cache")
struct CTLogListTests {
    static let logs = [
        TestCTLog(name: "argon", operatorName: "Google"),
        TestCTLog(name: "xenon", operatorName: "Google", state: .readonly(since: Date(timeIntervalSinceNow: -86400))),
        TestCTLog(name: "sabre", operatorName: "Sectigo", kind: .staticCTAPI),
        TestCTLog(name: "old", operatorName: "Sectigo", state: .retired(at: Date(timeIntervalSinceNow: -86400))),
    ]

    @Test func parsesAListInApplesLayout() throws {
        let list = try CTLogList.parse(TestCTLog.appleList(Self.logs, version: "7.1"))
        #expect(list.version == "7.1")
        #expect(list.entries.count == 4)
        #expect(list.operators == ["Google", "Sectigo"])
        #expect(list.entries.map(\.facts.kind) == [.rfc6962, .rfc6962, .rfc6962, .staticCTAPI])
        let retired = try #require(list.entries.first { $0.facts.description == "old" })
        #expect(retired.facts.state.name == "retired")
        #expect(retired.logID == Self.logs[3].log.logID)
        let store = try CTLogStore(list: list)
        #expect(store.logCount == 4)
        #expect(store.facts(forLogID: Self.logs[2].log.logID)?.kind == .staticCTAPI)
        #expect(store.facts(forLogID: [1, 2, 3]) == nil)
    }

    /// Edits the first log of a valid list.
    static func editedList(_ edit: (inout [String: Any]) -> Void) throws -> Data {
        var document =
            try JSONSerialization.jsonObject(with: TestCTLog.appleList([TestCTLog(name: "one")])) as! [String: Any]
        var operators = document["operators"] as! [[String: Any]]
        var logs = operators[0]["logs"] as! [[String: Any]]
        edit(&logs[0])
        operators[0]["logs"] = logs
        document["operators"] = operators
        return try JSONSerialization.data(withJSONObject: document)
    }

    @Test func refusesWhatIsNotAValidList() throws {
        let other = TestCTLog(name: "other")
        let cases: [(String, Data)] = [
            ("not JSON", Data("<html>moved</html>".utf8)),
            ("no operators", Data(#"{"operators": []}"#.utf8)),
            ("no logs", Data(#"{"operators": [{"name": "A", "logs": []}]}"#.utf8)),
            ("wrong type", Data(#"{"operators": {"name": "A"}}"#.utf8)),
            ("key not base64", try Self.editedList { $0["key"] = "!!!" }),
            ("key not an SPKI", try Self.editedList { $0["key"] = Data([1, 2, 3, 4]).base64EncodedString() }),
            (
                "log_id of another key",
                try Self.editedList { $0["log_id"] = Data(other.log.logID).base64EncodedString() }
            ),
            ("unknown state", try Self.editedList { $0["state"] = ["shining": ["timestamp": "2025-01-01T00:00:00Z"]] }),
            (
                "two states",
                try Self.editedList {
                    $0["state"] = [
                        "usable": ["timestamp": "2025-01-01T00:00:00Z"],
                        "retired": ["timestamp": "2025-02-01T00:00:00Z"],
                    ]
                }
            ),
            ("bad date", try Self.editedList { $0["state"] = ["usable": ["timestamp": "yesterday"]] }),
            ("no key", try Self.editedList { $0.removeValue(forKey: "key") }),
        ]
        for (name, data) in cases {
            #expect(throws: CTLogListError.self, "\(name)") { try CTLogList.parse(data) }
        }
    }

    @Test func cacheInstallsAValidListAndKeepsItWhenARefusedOneArrives() throws {
        let directory = try TemporaryDirectory("ct-cache")
        let cache = CTLogListCache(directory: directory.path + "/per-user")
        guard case .missing = cache.state() else { Issue.record("a new cache is not empty"); return }
        let fetched = Date(timeIntervalSinceNow: -10 * 86400)
        try cache.install(TestCTLog.appleList(Self.logs), source: "https://example.test/list.json", now: fetched)
        guard case .fresh(let list, let info, let age) = cache.state() else {
            Issue.record("installed list is not fresh")
            return
        }
        #expect(list.entries.count == 4)
        #expect(info.source == "https://example.test/list.json")
        #expect(age == 10)
        #expect(throws: CTLogListError.self) { try cache.install(Data("{}".utf8), source: "bad") }
        guard case .fresh(let kept, let keptInfo, _) = cache.state() else {
            Issue.record("a refused list replaced the cache")
            return
        }
        #expect(kept.entries.count == 4)
        #expect(keptInfo.source == "https://example.test/list.json")
        guard case .stale(_, _, let staleAge) = cache.state(maximumAgeDays: 7) else {
            Issue.record("a 10-day-old list is not stale with a 7-day limit")
            return
        }
        #expect(staleAge == 10)
    }

    @Test func commandLineListMayBeApplesJSONOrOpenSSLFormat() throws {
        let directory = try TemporaryDirectory("ct-file")
        let json = directory.file("list.json")
        try TestCTLog.appleList(Self.logs).write(to: URL(fileURLWithPath: json))
        let fromJSON = try CTLogStore.load(file: json)
        #expect(fromJSON.logCount == 4)
        #expect(fromJSON.facts(forLogID: Self.logs[1].log.logID)?.operatorName == "Google")
        let cnf = try directory.write("list.cnf", CTLogStore.fileContents([Self.logs[0].log]))
        let fromCNF = try CTLogStore.load(file: cnf)
        #expect(fromCNF.logCount == 1)
        #expect(fromCNF.facts(forLogID: Self.logs[0].log.logID)?.operatorName == "argon")
        let broken = try directory.write("broken.json", "{\"operators\": 5}")
        #expect(throws: CertificateAuthorityError.self) { try CTLogStore.load(file: broken) }
    }

    @Test func namesFromAListCannotAddConfigurationLines() {
        let text = CTLogStore.fileContents([CTLog(name: "evil\nkey = AAAA\n[x]", publicKeyDER: [1])])
        #expect(text.components(separatedBy: "\n").filter { $0.hasPrefix("key") }.count == 1)
        #expect(!text.contains("[x]"))
    }
}

/// Tests for: Apple's CT policy end to end: minted logs, a list in Apple's layout, real handshakes.
@Suite("Apple's CT policy against loopback servers with minted logs")
struct AppleCTEndToEndTests {
    static let usableA = TestCTLog(name: "usable-a", operatorName: "Alpha")
    static let usableA2 = TestCTLog(name: "usable-a2", operatorName: "Alpha")
    static let usableB = TestCTLog(name: "usable-b", operatorName: "Beta")
    static let usableC = TestCTLog(name: "usable-c", operatorName: "Gamma")
    static let tiledC = TestCTLog(name: "tiled-c", operatorName: "Gamma", kind: .staticCTAPI)
    static let retiredB = TestCTLog(
        name: "retired-b", operatorName: "Beta", state: .retired(at: Date(timeIntervalSinceNow: -3 * 86400)))
    static let all = [usableA, usableA2, usableB, usableC, tiledC, retiredB]
    static let store = try! CTLogStore(list: try! CTLogList.parse(TestCTLog.appleList(all)))

    /// NSRequiresCertificateTransparency honoured (`--requires-ct always`): CT applies to the test root.
    static let ctRequired = Policies.make(
        { configuration in
            var entry = ExceptionDomain(key: TestPKI.host)
            entry.requiresCertificateTransparency = true
            configuration.exceptionDomains[TestPKI.host] = entry
        }, options: { $0.requiresCTKey = .always })

    /// The verdict for a leaf valid `days` days carrying one SCT per `(log, age in days)`.
    static func verdict(days: Double, _ scts: [(TestCTLog, Double)]) throws -> UpstreamVerdict {
        var spec = TestPKI.leafSpec()
        spec.notBefore = Date(timeIntervalSinceNow: -3600)
        spec.notAfter = spec.notBefore.addingTimeInterval(days * 86400)
        let leaf = TestCTLog.embedding(
            scts.map { ($0.0, Date(timeIntervalSinceNow: -$0.1 * 86400)) }, in: TestPKI.leaf(spec),
            issuer: TestPKI.intermediate, issuerKey: TestPKI.intermediateKey)
        let server = try TestServer(.tls(TestPKI.serverContext(leaf: leaf)))
        defer { server.stop() }
        return check(server, ctRequired, ctLogs: store)
    }

    @Test func zeroOneTwoAndThreeSCTs() throws {
        let none = try Self.verdict(days: 90, [])
        #expect(Expectation.of(none) == .blocked(.secureConnectionFailed, -9802))
        #expect(none.rule.contains("0 SCTs from approved logs count (2 needed)"), "\(none.rule)")
        let one = try Self.verdict(days: 90, [(Self.usableA, 0.01)])
        #expect(one.isBlocked)
        #expect(one.rule.contains("1 SCT from approved logs counts (2 needed)"), "\(one.rule)")
        let two = try Self.verdict(days: 90, [(Self.usableA, 0.01), (Self.usableB, 0.01)])
        #expect(two.outcome == .allowed, "\(two.rule)")
        #expect(Set(two.summary?.scts.compactMap(\.log?.operatorName) ?? []) == ["Alpha", "Beta"])
        let twoForLongLeaf = try Self.verdict(days: 198, [(Self.usableA, 0.01), (Self.usableB, 0.01)])
        #expect(twoForLongLeaf.rule.contains("(3 needed)"), "\(twoForLongLeaf.rule)")
        let three = try Self.verdict(days: 198, [(Self.usableA, 0.01), (Self.usableB, 0.01), (Self.usableC, 0.01)])
        #expect(three.outcome == .allowed, "\(three.rule)")
    }

    @Test func twoFromOneOperatorAreNotEnough() throws {
        let verdict = try Self.verdict(days: 90, [(Self.usableA, 0.01), (Self.usableA2, 0.01)])
        #expect(Expectation.of(verdict) == .blocked(.secureConnectionFailed, -9802))
        #expect(verdict.rule.contains("one log operator"), "\(verdict.rule)")
        #expect(verdict.fix?.contains("two operators") == true, "\(verdict.fix ?? "")")
    }

    @Test func retiredLogCountsOnlyForSCTsBeforeItsRetirement() throws {
        let before = try Self.verdict(days: 90, [(Self.usableA, 0.01), (Self.retiredB, 10)])
        #expect(before.outcome == .allowed, "\(before.rule)")
        let after = try Self.verdict(days: 90, [(Self.usableA, 0.01), (Self.retiredB, 1)])
        #expect(after.isBlocked)
        #expect(after.rule.contains("1 SCT from approved logs counts"), "\(after.rule)")
    }

    @Test func tiledLogSCTsValidateAndCount() throws {
        let verdict = try Self.verdict(days: 90, [(Self.usableA, 0.01), (Self.tiledC, 0.01)])
        #expect(verdict.outcome == .allowed, "\(verdict.rule)")
        let tiled = try #require(verdict.summary?.scts.first { $0.log?.kind == .staticCTAPI })
        #expect(tiled.status == .valid)
    }

    /// `summary` as if its chain ended in a system root, with or without a CT log list.
    static func systemRooted(_ summary: HandshakeSummary, logs: Bool) -> HandshakeSummary {
        HandshakeSummary(
            host: summary.host, version: summary.version, cipher: summary.cipher, group: summary.group,
            peerSignatureDigest: summary.peerSignatureDigest, presentedChain: summary.presentedChain,
            builtChain: summary.builtChain, verificationIssues: [], anchor: .system, scts: summary.scts,
            ctLogsAvailable: logs, ocspStapleBytes: 0, alpn: summary.alpn, time: summary.time)
    }

    @Test func systemRootedChainIsJudgedWithAListAndNotEvaluatedWithout() throws {
        let standard = Policies.standard.decide(Self.target).requirements
        let judge = UpstreamJudge(requirements: standard)
        let bare = try #require(try Self.verdict(days: 90, []).summary)
        // Under a user-installed root (the test root) CT does not apply on modern iOS.
        #expect(judge.ctStatus(bare) == .notRequired)
        #expect(judge.ctStatus(Self.systemRooted(bare, logs: false)) == .notEvaluated)
        #expect(
            judge.ctStatus(Self.systemRooted(bare, logs: false)).text == "CT not evaluated: run `ats-proxy ct update`")
        #expect(judge.trustProblems(Self.systemRooted(bare, logs: false)).isEmpty)
        guard case .fails = judge.ctStatus(Self.systemRooted(bare, logs: true)) else {
            Issue.record("a system-rooted leaf without SCTs passed CT with a list loaded")
            return
        }
        #expect(
            judge.trustProblems(Self.systemRooted(bare, logs: true)).contains { problem in
                if case .certificateTransparency = problem { true } else { false }
            })
        let good = try #require(
            try Self.verdict(days: 90, [(Self.usableA, 0.01), (Self.usableB, 0.01)]).summary)
        guard case .complies(let result) = judge.ctStatus(Self.systemRooted(good, logs: true)) else {
            Issue.record("two SCTs from two operators did not comply")
            return
        }
        #expect(result.path == .embedded)
        #expect(judge.ctStatus(Self.systemRooted(good, logs: true)).text?.hasPrefix("complies") == true)
    }

    static let target = RequestTarget(scheme: .https, host: TestPKI.host, port: 443)
}
