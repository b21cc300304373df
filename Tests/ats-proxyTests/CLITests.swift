import ATSSystemTools
import ATSTestSupport
import Foundation
import Testing

/// Runs the built `ats-proxy` binary the way a user does and checks exit statuses and the
/// one-line errors for bad input.
@Suite struct CLITests {
    /// The built executable: it sits beside the test bundle in the build products directory.
    static let binary: URL = {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("ats-proxy")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        return URL(fileURLWithPath: "ats-proxy")
    }()

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    static func run(_ arguments: [String]) throws -> Result {
        try launch(binary, arguments, directory: repository.path, timeout: 120)
    }

    /// Runs any tool (curl, python3) with a bounded wait.
    static func runTool(_ path: String, _ arguments: [String], timeout: TimeInterval = 30) throws -> Result {
        try launch(URL(fileURLWithPath: path), arguments, timeout: timeout)
    }

    /// Runs `executable` and collects its output; terminates it after `timeout` seconds. `directory` and
    /// `environment` default to the test runner's.
    static func launch(
        _ executable: URL, _ arguments: [String], directory: String? = nil, environment: [String: String]? = nil,
        timeout: TimeInterval
    ) throws -> Result {
        let scratch = try TemporaryDirectory("launch")
        let stdoutPath = scratch.file("stdout")
        let stderrPath = scratch.file("stderr")
        let process = try ChildProcess(
            executable: executable.path, arguments: arguments,
            environment: environment ?? ProcessInfo.processInfo.environment, currentDirectory: directory,
            standardOutput: .file(stdoutPath), standardError: .file(stderrPath))
        if !process.wait(timeout: timeout) {
            process.send(SIGTERM)
            if !process.wait(timeout: 5) { process.send(SIGKILL) }
            process.waitUntilExit()
        }
        let read = { (path: String) in
            String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
        }
        return Result(status: process.terminationStatus, stdout: read(stdoutPath), stderr: read(stderrPath))
    }

    static func temporaryFile(_ name: String, _ data: Data) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ats-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent(name)
        try data.write(to: url)
        return url.path
    }

    @Test func binaryIsBuilt() {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary.path), "looked at \(Self.binary.path)")
    }

    @Test func explainBlocksCleartextUnderFullATS() throws {
        let result = try Self.run(["explain", "http://example.com/"])
        #expect(result.status == 1, "explain exits 1 when a URL is blocked")
        #expect(result.stdout.contains("BLOCKED  NSURLErrorDomain -1022"))
        #expect(result.stdout.contains("App Transport Security has blocked a cleartext HTTP connection to example.com"))
    }

    @Test func explainReadsEveryConfigFormat() throws {
        for config in ["Config/MixAndMatch.plist", "Config/MixAndMatch.binary.plist"] {
            let result = try Self.run(["explain", "--config", config, "http://legacy-feeds.example.com/"])
            #expect(result.status == 0, "\(config): \(result.stderr)")
            #expect(result.stdout.contains("ALLOWED"), "\(config)")
        }
    }

    @Test func explainJSONIsValid() throws {
        let result = try Self.run(["explain", "--format", "json", "https://example.com/", "http://localhost/"])
        #expect(result.status == 0)
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        #expect((json?["decisions"] as? [Any])?.count == 2)
    }

    /// Bad input: one line on stderr naming the file and the problem, exit 2, no stack trace.
    @Test(arguments: [
        ("missing", nil as Data?, "no such file or directory"),
        (
            "garbage.plist", Data([0x00, 0x01, 0xFF, 0x42, 0x13]),
            "not a property list (expected an XML or binary plist, a .app bundle or an .ipa)"
        ),
        ("empty.plist", Data(), "the file is empty, not a property list"),
        ("truncated.plist", Data("bplist00\u{d1}\u{01}\u{02}".utf8), "truncated or corrupt binary property list"),
        (
            "array.plist",
            Data(
                "<?xml version=\"1.0\"?><plist version=\"1.0\"><array><string>x</string></array></plist>".utf8),
            "the root of the property list is an array, not a dictionary"
        ),
        (
            "broken.plist", Data("<?xml version=\"1.0\"?><plist version=\"1.0\"><dict><key>a</key>".utf8),
            "malformed XML property list"
        ),
        (
            "noapp.ipa", Data([0x50, 0x4B, 0x05, 0x06] + Array(repeating: 0, count: 18)),
            "no Payload/*.app/Info.plist inside this .ipa"
        ),
    ])
    func badConfigurationIsOneLine(name: String, data: Data?, reason: String) throws {
        let path = try data.map { try Self.temporaryFile(name, $0) } ?? "/nonexistent/\(name).plist"
        for command in [["explain", "--config", path, "https://example.com/"], ["lint", "--config", path]] {
            let result = try Self.run(command)
            #expect(result.status == 2, "\(command)")
            #expect(result.stderr == "ats-proxy: error: \(path): \(reason)\n", "\(command)")
        }
    }

    @Test(arguments: ["example.com", "ftp://example.com/", "http://", "https://[::1/"])
    func badURLIsAClearUsageError(url: String) throws {
        let result = try Self.run(["explain", url])
        #expect(result.status == 2)
        #expect(result.stderr.contains("Error:"))
        #expect(!result.stderr.contains("Fatal error"))
    }

    @Test func lintExitStatuses() throws {
        #expect(try Self.run(["lint", "--config", "Config/MixAndMatch.plist"]).status == 0)
        #expect(try Self.run(["lint", "--config", "Config/EveryKey.plist"]).status == 0)
        #expect(try Self.run(["lint", "--strict", "--config", "Config/EveryKey.plist"]).status == 1)
        let bad = try Self.temporaryFile(
            "bad.plist",
            Data(
                "<?xml version=\"1.0\"?><plist version=\"1.0\"><dict><key>NSAllowsArbitraryLoads</key><string>YES</string></dict></plist>"
                    .utf8))
        let result = try Self.run(["lint", "--config", bad])
        #expect(result.status == 2)
        #expect(
            result.stdout.contains(
                "Apple logs: App Transport Security value for key NSAllowsArbitraryLoads must be a boolean"))
    }

    @Test func caExportsAProfileAndPrintsTheSimulatorCommand() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ats-ca-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try Self.run(["ca", "init", "--ca-dir", directory.path]).status == 0)
        let profile = try Self.run(["ca", "export", "--format", "mobileconfig", "--ca-dir", directory.path])
        #expect(profile.status == 0)
        let plist = try PropertyListSerialization.propertyList(from: Data(profile.stdout.utf8), format: nil)
        let payloads = (plist as? [String: Any])?["PayloadContent"] as? [[String: Any]]
        #expect(payloads?.first?["PayloadType"] as? String == "com.apple.security.root")
        let derPath = directory.appendingPathComponent("ca.cer").path
        #expect(
            try Self.run(["ca", "export", "--format", "der", "-o", derPath, "--ca-dir", directory.path]).status == 0)
        let der = try #require(FileManager.default.contents(atPath: derPath))
        #expect(payloads?.first?["PayloadContent"] as? Data == der)
        let command = try Self.run(["ca", "simulator-command", "--ca-dir", directory.path])
        #expect(
            command.stdout.hasPrefix(
                "xcrun simctl keychain booted add-root-cert \"\(directory.path)/ats-proxy-ca.pem\""))
    }

    @Test func badPlatformIsAUsageError() throws {
        let result = try Self.run(["explain", "--platform", "android:14", "https://example.com/"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("--platform must look like ios:18.0 or macos:15"))
    }
}
