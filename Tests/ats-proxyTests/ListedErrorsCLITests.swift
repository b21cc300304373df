import ATSTestSupport
import Foundation
import Testing

/// Regression tests for the errors in what the command line said (issue 16, item 7).
@Suite struct ListedErrorsCLITests {
    @Test func tlsFloorOptionTakesTheDocumentedSpellingAndTheOldOne() throws {
        for spelling in ["--tls-floor-26", "--tls-floor26"] {
            let result = try CLITests.run([
                "explain", spelling, "off", "--platform", "ios:26.0", "https://example.com/",
            ])
            #expect(result.status == 0, "\(spelling): \(result.stderr)")
        }
    }

    @Test func misspeltOptionIsNamedInsteadOfItsValue() throws {
        let result = try CLITests.run(["explain", "--tls-flor", "off", "http://example.com/"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("unknown option '--tls-flor'"), "\(result.stderr)")
        #expect(!result.stderr.contains("'off' is not an absolute"))
    }

    /// Discussion paragraphs are single logical lines: on a wide terminal none breaks mid-sentence.
    @Test(arguments: [[], ["run"], ["exec"], ["explain"], ["lint"], ["diagnose"], ["settings"], ["ca"]])
    func helpParagraphsDoNotBreakMidSentence(command: [String]) throws {
        let directory = try TemporaryDirectory("help")
        let result = try Invocation.run(
            command + ["--help"], in: directory.path,
            environment: Invocation.environment(home: directory.path, ["COLUMNS": "2000"]))
        #expect(result.status == 0)
        let discussion = result.stdout.components(separatedBy: "USAGE:")[0]
        for line in discussion.split(separator: "\n") where !line.hasPrefix(" ") && !line.hasPrefix("Example") {
            #expect(line.hasSuffix(".") || line.hasSuffix(":") || line.hasSuffix(")"), "\(command): '\(line)'")
        }
    }

    @Test func repositoryCarriesItsOwnATSDocument() throws {
        let root = CLITests.repository
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let package = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(!readme.contains("shared/"))
        #expect(!package.contains("shared/"))
        #expect(readme.contains("[docs/ATS-BEHAVIOUR.md](docs/ATS-BEHAVIOUR.md)"))
        let document = try String(contentsOf: root.appendingPathComponent("docs/ATS-BEHAVIOUR.md"), encoding: .utf8)
        #expect(document.contains("## Sources"))
        #expect(
            document.contains(
                "https://developer.apple.com/documentation/bundleresources/information-property-list/nsapptransportsecurity"
            ))
    }

    @Test func jsonLogTaskIDIsNotTheConsoleFormat() throws {
        let proxy = try ProxyProcess(plist: infoPlist(""), arguments: ["--log-format", "json"])
        let result = try Curl.fetch("http://blocked.example.test/", proxy: proxy)
        #expect(result.httpCode == 403)
        let log = proxy.waitForLog("\"taskID\"")
        let line = try #require(log.split(separator: "\n").first { $0.hasPrefix("{") })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let taskID = try #require(object["taskID"] as? String)
        #expect(taskID.range(of: #"^[0-9A-F-]{36}\.1$"#, options: .regularExpression) != nil, "\(taskID)")
        // The console lines keep CFNetwork's <UUID>.<N>.
        let console = try #require((object["consoleLines"] as? [String])?.first { $0.contains("Task <") })
        #expect(console.contains("Task <\(taskID.dropLast(2))>.<1>"), "\(console)")
    }
}
