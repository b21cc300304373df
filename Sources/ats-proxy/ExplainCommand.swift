import ArgumentParser

/// `ats-proxy explain URL…`: what ATS decides for each URL.
struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "explain", abstract: "Explain the ATS decision for URLs.")
}
