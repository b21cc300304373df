import Foundation

/// Puts settings-file and environment values into a command line before it is parsed: after the
/// subcommand name, as `--name=value` arguments, for every key the user did not give as a flag.
enum SettingsInjection {
    /// The outcome for one command line.
    struct Applied {
        /// The arguments to parse.
        let arguments: [String]
        /// The settings file used, if any.
        let file: String?
        /// Every key of the command's scopes with its origin.
        let settings: [ResolvedSetting]
    }

    /// Resolves the settings for `arguments` (without the program name). Help and version
    /// requests, and commands that take no settings, are returned unchanged.
    static func resolve(
        _ arguments: [String], environment: [String: String], workingDirectory: String
    ) throws -> Applied {
        let end = arguments.firstIndex(of: "--") ?? arguments.endIndex
        let own = Array(arguments[..<end])
        let wantsHelp = own.contains {
            ["--help", "-h", "--version", "--experimental-dump-help", "--generate-completion-script"].contains($0)
        }
        guard !wantsHelp, let (start, scopes) = position(in: own) else {
            return Applied(arguments: arguments, file: nil, settings: [])
        }
        let resolver = SettingsResolver(
            arguments: Array(own[start...]), environment: environment, workingDirectory: workingDirectory)
        let (file, settings) = try resolver.resolve(scopes: scopes)
        let added = settings.flatMap(\.arguments)
        return Applied(
            arguments: Array(arguments[..<start]) + added + Array(arguments[start...]), file: file, settings: settings)
    }

    /// Where the command's own options start and which keys it takes; nil for commands without
    /// settings (help, unknown words: the parser reports those).
    static func position(in arguments: [String]) -> (Int, Set<SettingsKey.Scope>)? {
        let every: Set<SettingsKey.Scope> = [.policy, .proxy, .ca]
        guard let first = arguments.first else { return (0, every) }
        switch first {
        case "run", "exec": return (1, every)
        case "explain", "lint", "diagnose": return (1, [.policy])
        case "ca":
            let subcommands = ["init", "show", "export", "simulator-command", "install", "uninstall"]
            guard arguments.count > 1, subcommands.contains(arguments[1]) else { return nil }
            return (2, [.ca])
        case "settings":
            return arguments.count > 1 && arguments[1] == "show" ? (2, every) : (1, every)
        default:
            return first.hasPrefix("-") ? (0, every) : nil
        }
    }
}
