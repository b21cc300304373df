import ArgumentParser
import ATSPolicy

/// The `ats-proxy` command: an explicit HTTP proxy that enforces an app's App Transport Security
/// policy, plus the offline tools around it.
@main
struct ATSProxyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ats-proxy",
        abstract: "Enforce an app's App Transport Security policy on HTTP traffic, the way iOS and macOS do.",
        discussion: """
            Give it the app's Info.plist (or .app bundle, or .ipa) with --config. Without --config the
            empty ATS dictionary applies: full ATS, what a new app gets.
            """,
        version: ATSProxyVersion.text,
        subcommands: [ExplainCommand.self, LintCommand.self, CACommand.self, DiagnoseCommand.self]
    )
}

/// The version string printed by `--version`.
enum ATSProxyVersion {
    static let text = "0.1.0"
}
