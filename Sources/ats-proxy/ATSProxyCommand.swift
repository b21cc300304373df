import ATSPolicy
import ArgumentParser
import Foundation

/// The `ats-proxy` command: an explicit HTTP proxy that enforces an app's App Transport Security
/// policy, plus the offline tools around it.
@main
struct ATSProxyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ats-proxy",
        abstract: "Enforce an app's App Transport Security policy on HTTP traffic, the way iOS and macOS do.",
        discussion: """
            Give it the app's Info.plist (or .app bundle, or .ipa) with --config. Without --config the \
            empty ATS dictionary applies: full ATS, what a new app gets.

            Options may also come from a settings file (ats-proxy.json or .yaml) and ATS_PROXY_* \
            environment variables; 'ats-proxy settings show' prints what a run would use.
            """,
        version: ATSProxyVersion.text,
        subcommands: [
            RunCommand.self, ExecCommand.self, ExplainCommand.self, LintCommand.self, CACommand.self,
            DiagnoseCommand.self, VerifyCommand.self, FixCommand.self, CTCommand.self, SettingsCommand.self,
            SystemProxyCommand.self, TrustOverlayExecCommand.self, DoctorCommand.self, MCPCommand.self,
        ],
        defaultSubcommand: RunCommand.self
    )

    /// Runs the command line. Usage and validation errors exit with status 2 (not
    /// ArgumentParser's 64), so every command has one convention: 2 means bad input.
    /// Settings-file and `ATS_PROXY_*` values enter as arguments before parsing (see
    /// ``SettingsInjection``); a bad settings file or variable is one line and exit status 2.
    static func main() {
        // `--version` alone prints the full report (libraries asked at run time); ArgumentParser's own
        // handling would print only the static `version` string.
        if Array(CommandLine.arguments.dropFirst()) == ["--version"] {
            print(VersionReport.current().text)
            return
        }
        let arguments: [String]
        do {
            arguments = try SettingsInjection.resolve(
                Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment,
                workingDirectory: FileManager.default.currentDirectoryPath
            ).arguments
        } catch {
            exitWithError(error)
        }
        do {
            var command = try parseCommandLine(arguments)
            try command.run()
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

extension ATSProxyCommand {
    /// Parses a command line whose settings and `ATS_PROXY_*` values are already arguments: the command (or the
    /// clean exit for help and version, or the usage error) that `arguments` name, with the checks made inside
    /// `validate()` reading these arguments rather than the process's. The one parser `main` and the tests use.
    static func parseCommandLine(_ arguments: [String]) throws -> any ParsableCommand {
        try UnknownOptionCheck.$arguments.withValue(arguments) { try parseAsRoot(arguments) }
    }
}

/// The version of this build.
enum ATSProxyVersion {
    /// The last released version. The release script updates it; `scripts/version` starts from it when no
    /// `v*` tag is reachable.
    static let released = "0.1.0"
    /// The version ArgumentParser knows (it lists `--version` in the help); `--version` itself prints
    /// ``VersionReport``.
    static let text = VersionReport.buildVersion
}
