import ArgumentParser

/// `ats-proxy lint`: configuration errors and traps.
struct LintCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lint", abstract: "Check an ATS configuration.")
}
