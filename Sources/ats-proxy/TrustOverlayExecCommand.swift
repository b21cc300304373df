import ATSSystemTools
import ArgumentParser
import Foundation

/// `ats-proxy trust-overlay-exec --bundle B --target T… -- COMMAND…` (internal, used by `exec` on Linux):
/// in this fresh, single-threaded process, enters a private mount namespace in which each target path shows
/// the bundle, then replaces itself with the command. With `--probe` it only tries the namespace and exits
/// 0, or 1 with the failed step on stderr.
struct TrustOverlayExecCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust-overlay-exec",
        abstract: "Internal: run a command with a CA bundle mounted over the system bundle (used by exec).",
        shouldDisplay: false)

    @Option(name: .long, help: "The PEM bundle to show.")
    var bundle: String

    @Option(name: .long, help: "A system bundle path to mount it over (repeatable).")
    var target: [String] = []

    @Flag(name: .long, help: "Only check that the namespace can be set up.")
    var probe = false

    @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).")
    var command: [String] = []

    func run() throws {
        var command = self.command
        if command.first == "--" { command.removeFirst() }
        guard probe || !command.isEmpty else { exitWithError(CLIError.usage("trust-overlay-exec needs a command")) }
        do {
            try TrustOverlay.enter(bundle: bundle, targets: target)
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            throw ExitCode(1)
        }
        if probe { return }
        do {
            try TrustOverlay.exec(command)
        } catch {
            FileHandle.standardError.write(Data("ats-proxy: error: \(error)\n".utf8))
            throw ExitCode(127)
        }
    }
}
