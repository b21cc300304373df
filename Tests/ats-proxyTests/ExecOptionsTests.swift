import ATSTestSupport
import Foundation
import Testing

/// `ats-proxy exec`: a word before `--` that is not an exec option is an error with a suggestion (never the command
/// to run), and the help fits an 80-column terminal.
@Suite struct ExecOptionsTests {
    @Test(arguments: [
        (["--allow-violation", "--", "true"], "--allow-violation", "--allow-violations"),
        (["--quiet", "--trust-overlay-paths", "/x", "--", "true"], "--trust-overlay-paths", "--trust-overlay-path"),
        (["--allow-violation=yes", "--", "true"], "--allow-violation", "--allow-violations"),
    ])
    func aMisspeltOptionIsAnErrorWithTheClosestOption(arguments: [String], wrong: String, right: String) throws {
        let directory = try TemporaryDirectory("exec-options")
        let result = try Invocation.run(
            ["exec"] + arguments, in: directory.path, environment: Invocation.environment(home: directory.path))
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("unknown option '\(wrong)' (did you mean '\(right)'?)"), "\(result.stderr)")
        #expect(!result.stderr.contains("command not found"), "\(result.stderr)")
    }

    /// The command after `--` may start with anything, and options after it are the command's own.
    @Test func optionsAfterTheSeparatorBelongToTheCommand() throws {
        let directory = try TemporaryDirectory("exec-separator")
        let result = try Invocation.run(
            ["exec", "--allow-violations", "--", "/bin/sh", "-c", "echo ran --allow-violation"], in: directory.path,
            environment: Invocation.environment(home: directory.path), timeout: 60)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("ran --allow-violation"))
    }

    @Test func helpFitsEightyColumns() throws {
        let directory = try TemporaryDirectory("exec-help")
        let result = try Invocation.run(
            ["exec", "--help"], in: directory.path,
            environment: Invocation.environment(home: directory.path, ["COLUMNS": "80"]))
        #expect(result.status == 0)
        #expect(result.stdout.contains("ATS_PROXY_TRUST_OVERLAY"))
        for line in result.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            #expect(line.count <= 80, "\(line.count) columns: \(line)")
        }
    }
}
