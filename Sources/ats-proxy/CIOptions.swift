import ATSReport
import ArgumentParser

/// The options for CI jobs that gate on ATS violations: `--baseline`. A group of its own, mounted in
/// `ProxyOptions` with one `@OptionGroup` line.
struct CIOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Compare with the report.json of an earlier run: only violations it does not list count toward the exit status.",
            discussion:
                "A violation is its host, error code and rule. The summary lists the new ones and those of the baseline that are gone.",
            valueName: "report.json"))
    var baseline: String?

    func validate() throws {
        if let baseline, baseline.isEmpty { throw ValidationError("--baseline needs a report.json path") }
    }

    /// The baseline's violations (nil without `--baseline`).
    /// - Throws: `CLIError.usage` naming the file when it cannot be read as a report.json.
    func loadBaseline() throws -> ViolationBaseline? {
        guard let baseline else { return nil }
        do {
            return try ViolationBaseline.load(path: baseline)
        } catch {
            throw CLIError.usage("\(error)")
        }
    }
}
