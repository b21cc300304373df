import ArgumentParser

/// Finds a `--option` on the command line that a command does not have. ArgumentParser runs a
/// command's `validate()` before it reports unknown options, so without this check a misspelt
/// option's value (`--tls-flor off`) was reported as a bad URL instead of the option itself.
enum UnknownOptionCheck {
    /// The arguments being parsed (after settings injection), for checks made inside `validate()`, where
    /// ArgumentParser hands a command only its parsed values. ``ATSProxyCommand/parseCommandLine(_:)`` binds it, so a command
    /// line parsed in process (a test, a launcher) is checked against its own words, not the process's.
    @TaskLocal static var arguments: [String] = Array(CommandLine.arguments.dropFirst())

    /// Throws a validation error naming the first `--name` in `arguments` (up to `--`) that
    /// `command`'s help does not list.
    static func check(_ arguments: [String] = arguments, against command: any ParsableCommand.Type) throws {
        let help = command.helpMessage(includeHidden: true, columns: 10_000)
        for argument in arguments.prefix(while: { $0 != "--" }) where argument.hasPrefix("--") && argument.count > 2 {
            let name = String(argument.split(separator: "=", maxSplits: 1)[0])
            guard !["--help", "--version"].contains(name), !help.contains(name + " "), !help.contains(name + ",")
            else { continue }
            throw ValidationError(unknownOptionMessage(name, command: command))
        }
    }

    /// `unknown option '--allow-violation' (did you mean '--allow-violations'?); see …` for an option `command`'s
    /// help does not list; the suggestion is the closest option it does list.
    static func unknownOptionMessage(_ argument: String, command: any ParsableCommand.Type) -> String {
        let name = String(argument.split(separator: "=", maxSplits: 1).first ?? Substring(argument))
        let help = command.helpMessage(includeHidden: true, columns: 10_000)
        let options = Set(
            help.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\n" || $0 == "=" }).filter {
                $0.hasPrefix("--") && $0.count > 2
            }.map { String($0.prefix { $0 == "-" || $0.isLetter || $0.isNumber }) })
        let hint = Suggestion.closest(to: name, in: options.sorted()).map { " (did you mean '\($0)'?)" } ?? ""
        return "unknown option '\(name)'\(hint); see 'ats-proxy \(command._commandName) --help' for the options"
    }
}
