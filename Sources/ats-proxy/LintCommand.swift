import ATSPolicy
import ATSReport
import ArgumentParser
import Foundation

/// `ats-proxy lint`: configuration errors and traps, each with its key path and a one-line fix.
/// Exit status: 0 clean, 1 warnings only (with --strict), 2 errors.
struct LintCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lint",
        abstract: "Find errors and traps in the app's ATS configuration.",
        discussion: "Exit status: 0 clean (notes allowed), 1 warnings with --strict, 2 errors.")

    @OptionGroup var policy: PolicyOptions

    @Flag(name: .long, help: "Exit 1 when there are warnings.")
    var strict = false

    @Option(
        name: .long,
        help: "Output format: text, json or sarif (SARIF 2.1.0 for code scanning, with each key's line and column).")
    var format: OutputFormat = .text

    /// What `lint` prints.
    enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
        case text, json, sarif
    }

    func run() throws {
        let report: LintReport
        let loaded: LoadedInfoPlist
        do {
            loaded = try policy.loadSource()
            report = ATSLinter(
                source: loaded, parseOptions: policy.parseOptions, platform: try policy.resolvedPlatform()
            )
            .lint()
        } catch {
            exitWithError(error)
        }
        switch format {
        case .json:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            if let data = try? encoder.encode(report) { print(String(decoding: data, as: UTF8.self)) }
        case .text:
            print(LintTextRenderer.render(report, source: loaded.summary))
        case .sarif:
            let writer = SARIFLintWriter(
                report: report, source: loaded, toolVersion: ATSProxyVersion.text,
                workingDirectory: FileManager.default.currentDirectoryPath)
            do {
                print(String(decoding: try writer.json(), as: UTF8.self))
            } catch {
                exitWithError(error)
            }
        }
        throw ExitCode(report.exitStatus(strict: strict))
    }
}
