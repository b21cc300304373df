import ATSPolicy
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

    @Option(name: .long, help: "Output format: text or json.")
    var format: ExplainCommand.OutputFormat = .text

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
        }
        throw ExitCode(report.exitStatus(strict: strict))
    }
}
