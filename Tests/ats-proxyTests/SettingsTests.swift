import ATSTLS
import ATSTestSupport
import Foundation
import Testing

/// Runs the built binary in a chosen working directory with a chosen environment (no variables
/// inherited beyond PATH, and HOME pointing at a temporary directory).
enum Invocation {
    typealias Result = CLITests.Result

    static func environment(home: String, _ extra: [String: String] = [:]) -> [String: String] {
        var environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": home]
        environment.merge(extra) { $1 }
        return environment
    }

    static func run(
        _ arguments: [String], in directory: String, environment: [String: String], timeout: TimeInterval = 30
    ) throws -> Result {
        try CLITests.launch(
            CLITests.binary, arguments, directory: directory, environment: environment, timeout: timeout)
    }

    /// `settings show --format json` as key → (value, from).
    static func settings(_ arguments: [String] = [], in directory: String, environment: [String: String]) throws
        -> [String: (value: String, from: String)]
    {
        let result = try run(
            ["settings", "show", "--format", "json"] + arguments, in: directory, environment: environment)
        guard result.status == 0 else { throw E2E.Failure("settings show failed: \(result.stderr)") }
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        var table: [String: (value: String, from: String)] = [:]
        for entry in object?["settings"] as? [[String: String]] ?? [] {
            table[entry["key"] ?? ""] = (entry["value"] ?? "", entry["from"] ?? "")
        }
        return table
    }
}

/// Settings file and `ATS_PROXY_*` environment: precedence, discovery, paths and bad input.
@Suite struct SettingsTests {
    /// `--proxy-auth`'s password never appears in `settings show` (text or JSON), from a file or a variable.
    @Test func settingsShowHidesTheProxyPassword() throws {
        let directory = try TemporaryDirectory("settings-secret")
        _ = try directory.write("ats-proxy.yaml", "proxy-auth: carol:from-the-file\n")
        let fromFile = try Invocation.settings(in: directory.path, environment: [:])
        #expect(fromFile["proxy-auth"]?.value == "user carol, password hidden", "\(fromFile)")
        let text = try Invocation.run(
            ["settings", "show"], in: directory.path, environment: ["ATS_PROXY_PROXY_AUTH": "alice:s3cr:et"])
        #expect(text.stdout.contains("user alice, password hidden"), "\(text.stdout)")
        #expect(!text.stdout.contains("s3cr") && !text.stdout.contains("from-the-file"), "\(text.stdout)")
    }

    @Test func precedenceIsFlagsThenEnvironmentThenFileThenDefaults() throws {
        let directory = try TemporaryDirectory("settings")
        _ = try directory.write(
            "ats-proxy.yaml",
            """
            platform: ios:16.0
            mode: report
            listen: [127.0.0.1:9999]
            upstream-ca: roots/a.pem
            max-connections: 50
            quiet: true
            """)
        let environment = Invocation.environment(
            home: directory.path, ["ATS_PROXY_PLATFORM": "macos:14", "ATS_PROXY_LISTEN": "127.0.0.1:7000,[::1]:7000"])
        let table = try Invocation.settings(
            ["--listen", "127.0.0.1:6000"], in: directory.path, environment: environment)
        #expect(table["listen"]?.value == "127.0.0.1:6000" && table["listen"]?.from == "flag")
        #expect(table["platform"]?.value == "macos:14" && table["platform"]?.from == "environment")
        #expect(table["mode"]?.value == "report" && table["mode"]?.from == "file")
        #expect(table["max-connections"]?.value == "50")
        #expect(table["quiet"]?.value == "true")
        #expect(table["upstream-ca"]?.value == directory.url.appendingPathComponent("roots/a.pem").path)
        #expect(table["diagnostics"]?.value == "1" && table["diagnostics"]?.from == "default")
        // Without the flag the environment's list wins over the file.
        let withoutFlag = try Invocation.settings(in: directory.path, environment: environment)
        #expect(withoutFlag["listen"]?.value == "127.0.0.1:7000, [::1]:7000")
        #expect(withoutFlag["listen"]?.from == "environment")
    }

    @Test func namedJSONFileResolvesPathsAgainstItsOwnDirectory() throws {
        let directory = try TemporaryDirectory("settings-json")
        try FileManager.default.createDirectory(
            at: directory.url.appendingPathComponent("app"), withIntermediateDirectories: true)
        _ = try directory.write("app/Info.plist", infoPlist(""))
        _ = try directory.write("app/team.json", #"{"config": "Info.plist", "diagnostics": 2}"#)
        let elsewhere = try TemporaryDirectory("settings-cwd")
        let environment = Invocation.environment(home: elsewhere.path)
        let table = try Invocation.settings(
            ["--settings", directory.file("app/team.json")], in: elsewhere.path, environment: environment)
        #expect(table["config"]?.value == directory.file("app/Info.plist"))
        #expect(table["diagnostics"]?.value == "2")
        // The same file named by the environment, and read by explain (a policy key).
        let explained = try Invocation.run(
            ["explain", "http://example.com/"], in: elsewhere.path,
            environment: Invocation.environment(
                home: elsewhere.path, ["ATS_PROXY_SETTINGS": directory.file("app/team.json")]))
        #expect(explained.stdout.hasPrefix("Configuration: \(directory.file("app/Info.plist"))"), "\(explained.stdout)")
    }

    /// One line naming the file (or variable), the key and the expected type; exit status 2.
    @Test(arguments: [
        ("ats-proxy.json", #"{"listne": "127.0.0.1:1"}"#, "ats-proxy.json: unknown key 'listne'"),
        ("ats-proxy.json", #"{"max-connections": "many"}"#, "ats-proxy.json: key 'max-connections' must be an integer"),
        ("ats-proxy.json", #"{"quiet": "yes"}"#, "ats-proxy.json: key 'quiet' must be true or false"),
        ("ats-proxy.json", #"{"grace-period": "soon"}"#, "ats-proxy.json: key 'grace-period' must be a number"),
        (
            "ats-proxy.json", #"{"listen": 8080}"#,
            "ats-proxy.json: key 'listen' must be HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080), or a list of them, found the number 8080"
        ),
        (
            "ats-proxy.yaml", "mode: blok\n",
            "ats-proxy.yaml: key 'mode' must be one of enforce, report, found 'blok'"
        ),
        ("ats-proxy.yaml", "loops: two\n", "ats-proxy.yaml: key 'loops' must be an integer"),
        ("ats-proxy.yaml", "- listen\n", "ats-proxy.yaml: the settings file must map option names to values"),
        ("ats-proxy.json", "{", "ats-proxy.json: not valid JSON"),
    ])
    func badSettingsFileIsOneLine(name: String, text: String, message: String) throws {
        let directory = try TemporaryDirectory("settings-bad")
        _ = try directory.write(name, text)
        for command in [["run"], [], ["settings", "show"], ["exec", "--", "true"]] {
            let result = try Invocation.run(
                command, in: directory.path, environment: Invocation.environment(home: directory.path))
            #expect(result.status == 2, "\(command)")
            #expect(result.stderr.hasPrefix("ats-proxy: error: \(directory.file(name))"), "\(result.stderr)")
            #expect(result.stderr.contains(message.dropFirst(name.count)), "\(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        }
    }

    @Test func badEnvironmentValueNamesTheVariable() throws {
        let directory = try TemporaryDirectory("settings-env")
        let result = try Invocation.run(
            ["run"], in: directory.path,
            environment: Invocation.environment(home: directory.path, ["ATS_PROXY_MAX_CONNECTIONS": "lots"]))
        #expect(result.status == 2)
        #expect(
            result.stderr
                == "ats-proxy: error: environment variable ATS_PROXY_MAX_CONNECTIONS must be an integer, found 'lots'\n"
        )
    }

    @Test func challengeAndPinningValuesKeepTheirCommasInTheEnvironmentAndTheFile() throws {
        // Their values hold commas (kind lists, policy options): the environment separates values with ';'.
        let directory = try TemporaryDirectory("settings-challenge")
        _ = try directory.write("ats-proxy.yaml", "af-policy: ['api\\.test=none,no-domain-check']\n")
        let environment = Invocation.environment(
            home: directory.path, ["ATS_PROXY_CHALLENGE": #".*\.example\.com=expired,sha1; api\.test=wrong-host"#])
        let table = try Invocation.settings(in: directory.path, environment: environment)
        #expect(table["challenge"]?.value == #".*\.example\.com=expired,sha1, api\.test=wrong-host"#)
        #expect(table["challenge"]?.from == "environment")
        #expect(table["af-policy"]?.value == #"api\.test=none,no-domain-check"#)

        // A bad kind from the environment is refused by the option's own check, naming it.
        let bad = try Invocation.run(
            ["run"], in: directory.path,
            environment: Invocation.environment(home: directory.path, ["ATS_PROXY_CHALLENGE": ".*=expird"]))
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--challenge") && bad.stderr.contains("expird"), "\(bad.stderr)")
    }

    @Test func aSettingsFilesPinsDirectoryIsRelativeToTheFile() throws {
        let directory = try TemporaryDirectory("settings-pins")
        let pins = directory.file("app/pins")
        try FileManager.default.createDirectory(atPath: pins, withIntermediateDirectories: true)
        let authority = try CertificateAuthority.generate()
        try Data(authority.certificate.derBytes).write(to: URL(fileURLWithPath: pins + "/ca.cer"))
        _ = try directory.write("app/team.yaml", "af-policy: ['api\\.test=certificate,pins=pins,allow-invalid']\n")
        // Read from another working directory: the pins are found beside the file, not beside the caller.
        let elsewhere = try TemporaryDirectory("settings-pins-elsewhere")
        let table = try Invocation.settings(
            ["--settings", directory.file("app/team.yaml")], in: elsewhere.path,
            environment: Invocation.environment(home: elsewhere.path))
        let expected = URL(fileURLWithPath: pins).standardizedFileURL.path
        #expect(table["af-policy"]?.value == "api\\.test=certificate,pins=\(expected),allow-invalid")
        #expect(table["af-policy"]?.from == "file")
    }

    @Test func twoDiscoveredFilesOrAMissingNamedFileAreErrors() throws {
        let directory = try TemporaryDirectory("settings-two")
        _ = try directory.write("ats-proxy.json", "{}")
        _ = try directory.write("ats-proxy.yaml", "{}")
        let environment = Invocation.environment(home: directory.path)
        let both = try Invocation.run(["settings"], in: directory.path, environment: environment)
        #expect(both.status == 2)
        #expect(both.stderr.contains("more than one settings file"))
        let missing = try Invocation.run(
            ["settings", "show", "--settings", "nope.yaml"], in: directory.path, environment: environment)
        #expect(missing.status == 2)
        #expect(missing.stderr == "ats-proxy: error: nope.yaml: no such settings file\n")
    }

    /// Adding an option to run without a settings key fails here: the table must stay complete.
    @Test func everyRunOptionIsASetting() throws {
        let directory = try TemporaryDirectory("settings-all")
        let environment = Invocation.environment(home: directory.path, ["COLUMNS": "300"])
        let help = try Invocation.run(["run", "--help"], in: directory.path, environment: environment).stdout
        // The first name of each option line (`--tls-floor-26, --tls-floor26 <…>` gives tls-floor-26).
        var options = Set<String>()
        for line in help.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " }
            guard trimmed.hasPrefix("--"), line.hasPrefix("  ") else { continue }
            let first = trimmed.dropFirst(2).prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            options.insert(String(first))
        }
        options.subtract(["settings", "help", "version"])
        let table = try Invocation.settings(in: directory.path, environment: environment)
        #expect(options.count > 40)
        #expect(
            options.subtracting(table.keys).isEmpty,
            "options without a settings key: \(options.subtracting(table.keys))")
    }
}
