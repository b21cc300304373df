import ATSSystemTools
import ArgumentParser
import Foundation

/// `ats-proxy system-proxy …`: the saved state of `--system-proxy`, and putting it back after a crash.
struct SystemProxyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "system-proxy", abstract: "Show or restore the macOS system proxy saved by --system-proxy.",
        subcommands: [SystemProxyRestoreCommand.self, SystemProxyStatusCommand.self])
}

/// `ats-proxy system-proxy restore`: puts back the settings a `--system-proxy` run saved, when that run
/// could not (it crashed or was killed with SIGKILL). Exit status 0 when restored or nothing was saved;
/// 1 when a setting could not be put back (the state file is kept); 2 when another instance is running.
struct SystemProxyRestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put back the HTTP/HTTPS proxy settings saved by a --system-proxy run that did not restore them.")

    @Flag(name: .long, help: "Restore even though the ats-proxy that saved the settings is still running.")
    var force = false

    func run() throws {
        let stateFile = SystemProxyStateFile.standard()
        let saved: SavedSystemProxy?
        do {
            saved = try stateFile.load()
        } catch {
            exitWithError(error)
        }
        guard let saved else {
            print("ats-proxy: no saved system proxy settings (\(stateFile.path)): nothing to restore")
            return
        }
        if saved.ownerIsAlive && saved.ownerPID != getpid() && !force {
            exitWithError(
                CLIError.usage(
                    "the ats-proxy that set the system proxy (pid \(saved.ownerPID)) is still running and restores it when it stops; stop it, or use --force"
                ))
        }
        let outcome = SystemProxySwitch.restore(saved, networkSetup: NetworkSetup(), stateFile: stateFile)
        for line in outcome.lines { print("ats-proxy: \(line)") }
        if !outcome.complete { throw ExitCode(1) }
    }
}

/// `ats-proxy system-proxy status`: what a `--system-proxy` run saved, if anything.
struct SystemProxyStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show the system proxy settings saved by a --system-proxy run, if any.")

    func run() throws {
        let stateFile = SystemProxyStateFile.standard()
        do {
            guard let saved = try stateFile.load() else {
                print("no saved system proxy settings (\(stateFile.path))")
                return
            }
            let running = saved.ownerIsAlive ? "running" : "no longer running: run 'ats-proxy system-proxy restore'"
            print("set to \(saved.proxyHost):\(saved.proxyPort) by pid \(saved.ownerPID) (\(running))")
            for service in saved.services {
                print("  \(service.name): HTTP was \(service.web), HTTPS was \(service.secureWeb)")
            }
            print("saved in \(stateFile.path)")
        } catch {
            exitWithError(error)
        }
    }
}
