import ATSTestSupport
import Foundation
import Testing

/// `lint --format sarif`: the log validates against the official SARIF 2.1.0 schema (`Fixtures/sarifcheck.py`)
/// and points at the line and column of each offending key in an XML plist; a binary plist is named without a
/// region.
@Suite struct SARIFLintTests {
    /// One parsed result line of `sarifcheck.py`.
    struct Finding {
        let ruleId: String
        let level: String
        let uri: String?
        let startLine: Int?
        let startColumn: Int?
        let endLine: Int?
        let endColumn: Int?
        let keyPath: String
    }

    /// Runs `lint --format sarif` on `config` (from `directory`), validates the output, and returns the results.
    static func lint(config: String, directory: String) throws -> (status: Int32, findings: [Finding], sarif: String) {
        let result = try CLITests.launch(
            CLITests.binary, ["lint", "--format", "sarif", "--config", config], directory: directory, timeout: 60)
        let output = try TemporaryDirectory("sarif")
        let path = try output.write("lint.sarif", result.stdout)
        let check = try E2E.run("/usr/bin/env", ["python3", E2E.fixture("sarifcheck.py"), path], timeout: 60)
        #expect(check.status == 0 && check.stdoutText.contains("SARIF OK"), "\(check.stdoutText)\(check.stderrText)")
        let findings = check.stdoutText.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
            line -> Finding? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                return nil
            }
            return Finding(
                ruleId: object["ruleId"] as? String ?? "", level: object["level"] as? String ?? "",
                uri: object["uri"] as? String, startLine: object["startLine"] as? Int,
                startColumn: object["startColumn"] as? Int, endLine: object["endLine"] as? Int,
                endColumn: object["endColumn"] as? Int, keyPath: object["keyPath"] as? String ?? "")
        }
        return (result.status, findings, result.stdout)
    }

    /// A plist whose wildcard key sits on line 10 at column 13, a misplaced root key on line 5 at column 5, and a
    /// key after a two-byte character on line 12 (columns count characters, not bytes).
    static let plist = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
            <key>NSAllowsArbitraryLoads</key><true/>
            <key>NSAppTransportSecurity</key>
            <dict>
                <key>NSExceptionDomains</key>
                <dict>
                    <key>*.example.com</key>
                    <dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
                    <key>caf\u{E9}.example.com</key><dict><key>NSIncludesSubdomainz</key><true/></dict>
                </dict>
            </dict>
        </dict>
        </plist>
        """

    @Test func xmlFindingsCarryTheLineAndColumnOfTheirKey() throws {
        let directory = try TemporaryDirectory("sarif-xml")
        try FileManager.default.createDirectory(
            atPath: directory.file("App"), withIntermediateDirectories: true)
        _ = try directory.write("App/Info.plist", Self.plist)
        let (status, findings, sarif) = try Self.lint(config: "App/Info.plist", directory: directory.path)
        #expect(status == 2, "errors make lint exit 2 in every format")

        let wildcard = try #require(findings.first { $0.ruleId == "wildcard-key" }, "\(sarif)")
        #expect(wildcard.level == "error")
        #expect(wildcard.uri == "App/Info.plist")
        #expect(wildcard.startLine == 10)
        #expect(wildcard.startColumn == 13)
        #expect(wildcard.endLine == 10)
        #expect(wildcard.endColumn == 13 + "<key>*.example.com</key>".count)
        #expect(wildcard.keyPath == "NSAppTransportSecurity → NSExceptionDomains → *.example.com")

        let misplaced = try #require(findings.first { $0.ruleId == "misplaced-key" })
        #expect(misplaced.startLine == 5)
        #expect(misplaced.startColumn == 5)

        let misspelt = try #require(findings.first { $0.ruleId == "unknown-key" })
        #expect(misspelt.startLine == 12)
        let line12 = Self.plist.split(separator: "\n", omittingEmptySubsequences: false)[11]
        let expectedColumn = line12.distance(
            from: line12.startIndex, to: try #require(line12.range(of: "<key>NSIncludesSubdomainz")).lowerBound)
        #expect(misspelt.startColumn == expectedColumn + 1)

        // Every rule carries an id, a short description and help text; the log names the working directory base.
        let log = try #require(try JSONSerialization.jsonObject(with: Data(sarif.utf8)) as? [String: Any])
        let run = try #require((log["runs"] as? [[String: Any]])?.first)
        let rules = try #require(
            ((run["tool"] as? [String: Any])?["driver"] as? [String: Any])?["rules"] as? [[String: Any]])
        #expect(rules.count >= 30)
        for rule in rules {
            #expect(((rule["shortDescription"] as? [String: Any])?["text"] as? String)?.isEmpty == false)
            #expect(((rule["help"] as? [String: Any])?["text"] as? String)?.isEmpty == false)
        }
        let bases = try #require(run["originalUriBaseIds"] as? [String: [String: Any]])
        #expect((bases["%SRCROOT%"]?["uri"] as? String)?.hasSuffix("/") == true)
    }

    @Test func aBinaryPlistIsNamedWithoutARegion() throws {
        let directory = try TemporaryDirectory("sarif-binary")
        let object: [String: Any] = [
            "NSAppTransportSecurity": ["NSExceptionDomains": ["*.example.com": ["NSIncludesSubdomains": true]]]
        ]
        let data = try PropertyListSerialization.data(fromPropertyList: object, format: .binary, options: 0)
        try data.write(to: URL(fileURLWithPath: directory.file("Info.plist")))
        let (status, findings, sarif) = try Self.lint(config: directory.file("Info.plist"), directory: directory.path)
        #expect(status == 2)
        let wildcard = try #require(findings.first { $0.ruleId == "wildcard-key" }, "\(sarif)")
        #expect(wildcard.uri?.hasPrefix("file:///") == true)
        #expect(wildcard.uri?.hasSuffix("/Info.plist") == true)
        #expect(wildcard.startLine == nil)
    }
}

/// `--baseline report.json` for `exec` and `run` through a real proxy, and exec's `$GITHUB_STEP_SUMMARY`.
/// Cleartext loads to `*.example.test` are blocked (-1022) by the proxy itself, so no origin is needed.
@Suite(.serialized) struct BaselineTests {
    /// Runs `ats-proxy exec` with a private CA directory and `environment` added to the clean one.
    static func exec(
        _ arguments: [String], hosts: [String], environment: [String: String] = [:]
    ) throws -> CLITests.Result {
        let caDirectory = try TemporaryDirectory("baseline-ca")
        let fetches = hosts.map { "curl -s -o /dev/null http://\($0)/" }.joined(separator: "\n")
        let script = try ExecTests.script(fetches)
        return try CLITests.launch(
            CLITests.binary,
            ["exec", "--ca-dir", caDirectory.path, "--diagnostics", "0", "--trust-overlay", "off"] + arguments + [
                "--", script,
            ],
            environment: E2E.environment.merging(environment) { _, added in added }, timeout: 90)
    }

    /// A baseline report.json from a session that loaded a.example.test and b.example.test over cleartext.
    static func baseline() throws -> (TemporaryDirectory, String) {
        let directory = try TemporaryDirectory("baseline-report")
        let first = try exec(["--report", directory.path], hosts: ["a.example.test", "b.example.test"])
        #expect(first.status == 3, "\(first.stderr)")
        let path = directory.file("report.json")
        #expect(FileManager.default.fileExists(atPath: path))
        return (directory, path)
    }

    @Test func onlyViolationsAbsentFromTheBaselineFailExec() throws {
        let (directory, baseline) = try Self.baseline()
        defer { withExtendedLifetime(directory) {} }
        let summary = try TemporaryDirectory("step-summary")
        let summaryPath = try summary.write("summary.md", "earlier step\n")

        // c is new, a is gone, b is in both: status 3 for c alone.
        let changed = try Self.exec(
            ["--baseline", baseline], hosts: ["b.example.test", "c.example.test"],
            environment: ["GITHUB_STEP_SUMMARY": summaryPath])
        #expect(changed.status == 3, "\(changed.stderr)")
        #expect(changed.stderr.contains("1 new violation, 1 gone since the baseline, 1 unchanged"), "\(changed.stderr)")
        #expect(changed.stderr.contains("  new: c.example.test -1022: "))
        #expect(changed.stderr.contains("  gone: a.example.test -1022: "))
        #expect(!changed.stderr.contains("new: b.example.test"))

        // The step summary was appended after what the earlier step wrote.
        let markdown = String(decoding: FileManager.default.contents(atPath: summaryPath) ?? Data(), as: UTF8.self)
        #expect(markdown.hasPrefix("earlier step\n"))
        #expect(markdown.contains("## ats-proxy: 2 ATS violations in 2 requests (exit 3)"), "\(markdown)")
        let rows = markdown.split(separator: "\n").filter { $0.hasPrefix("| ") && $0.contains("example.test") }
        #expect(rows.count == 2)
        #expect(rows.contains { $0.hasPrefix("| c.example.test | -1022 | 1 |") && $0.hasSuffix("| **new** |") })
        #expect(rows.contains { $0.hasPrefix("| b.example.test | -1022 | 1 |") && $0.hasSuffix("| known |") })
        #expect(rows.allSatisfy { $0.contains("NSExceptionAllowsInsecureHTTPLoads") }, "each row names its fix")
        #expect(markdown.contains("- a.example.test -1022: "), "the gone violation is listed")
        #expect(markdown.contains("### Minimal Info.plist for this session\n\n```xml\n"))
        #expect(markdown.contains("<key>NSAppTransportSecurity</key>"))
        #expect(markdown.contains("<key>c.example.test</key>"))

        // Only known violations: the command's own status (0) stands.
        let known = try Self.exec(["--baseline", baseline], hosts: ["b.example.test"])
        #expect(known.status == 0, "\(known.stderr)")
        #expect(known.stderr.contains("0 new violations, 1 gone since the baseline, 1 unchanged"), "\(known.stderr)")
    }

    @Test func runWithFailOnViolationsCountsOnlyNewOnes() throws {
        let (directory, baseline) = try Self.baseline()
        defer { withExtendedLifetime(directory) {} }
        for (host, expected) in [("b.example.test", Int32(0)), ("d.example.test", Int32(3))] {
            let proxy = try ProxyProcess(
                plist: infoPlist(""), arguments: ["--baseline", baseline, "--fail-on-violations"], logToFile: false)
            let fetched = try Curl.fetch("http://\(host)/", proxy: proxy)
            #expect(fetched.httpCode == 403)
            proxy.child.signal(SIGINT)
            #expect(proxy.child.wait(timeout: 20))
            #expect(proxy.child.process.terminationStatus == expected, "\(proxy.child.stderrText)")
            let stderr = proxy.child.stderrText
            if expected == 3 {
                #expect(stderr.contains("new: d.example.test -1022: "), "\(stderr)")
                #expect(stderr.contains("ATS violations the baseline does not list were seen"))
            } else {
                #expect(stderr.contains("0 new violations, 1 gone since the baseline, 1 unchanged"), "\(stderr)")
            }
        }
    }

    @Test func aBaselineThatIsNotAReportIsAUsageError() throws {
        let file = try CLITests.temporaryFile("report.json", Data("{\"not\": \"a report\"}".utf8))
        let result = try Self.exec(["--baseline", file], hosts: [])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--baseline \(file) is not an ats-proxy report.json"), "\(result.stderr)")
    }
}
