import ATSAppTrust
import ATSPolicy
import ATSProxyCore
import ATSTLS
import ArgumentParser
import Foundation

/// `ats-proxy explain URL…`: the ATS decision for each URL, with its rule chain, requirements
/// and, for blocked cleartext loads, the console lines a device prints. Exit status: 0 all allowed,
/// 1 any blocked, 2 usage or configuration errors.
struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Explain what ATS decides for each URL under the app's Info.plist.",
        discussion: """
            Exit status: 0 when every URL is allowed, 1 when any is blocked, 2 on usage or configuration \
            errors.

            Example: ats-proxy explain --config Info.plist http://api.example.com/ https://cdn.example.com/

            With --af-policy HOST_PATTERN=MODE[,pins=DIR][,allow-invalid][,no-domain-check] (repeatable), \
            the text output also names, for each https:// URL, the app's AFSecurityPolicy scenario and what \
            it checks; 'ats-proxy diagnose --af-policy' judges it on the server's real chain.
            """)

    @OptionGroup var policy: PolicyOptions

    @Option(name: .long, help: "Who makes the request: urlsession, webkit or media.")
    var source: RequestSource = .urlsession

    @Option(name: .long, help: "Output format: text or json.")
    var format: OutputFormat = .text

    @Option(
        name: .customLong("af-policy"),
        help: "The app's AFSecurityPolicy: HOST_PATTERN=MODE[,pins=DIR][,allow-invalid][,no-domain-check] (repeatable)."
    )
    var afPolicy: [String] = []

    @Option(
        name: .long,
        help:
            "app (the app's ATS, default) or system-services (what iOS/macOS 27 system processes require of each URL)."
    )
    var profile: DiagnosticsProfile = .app

    @Argument(help: "Absolute http:// or https:// URLs.")
    var urls: [String]

    /// Output formats of explain.
    enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    func validate() throws {
        try UnknownOptionCheck.check(against: Self.self)
        guard !urls.isEmpty else { throw ValidationError("give at least one URL, e.g. https://api.example.com/") }
        for url in urls {
            do {
                _ = try RequestTarget(parsing: url)
            } catch {
                throw ValidationError(error.description)
            }
        }
        for spec in afPolicy {
            do {
                _ = try AFPolicySpec(parsing: spec)
            } catch {
                throw ValidationError("\(error)")
            }
        }
    }

    /// Exit status 1 when any URL is blocked (so CI can gate on it), 2 on errors.
    func run() throws {
        if profile == .systemServices { return try runSystemServices() }
        let blocked: Bool
        do {
            let loaded = try policy.loadSource()
            let options = try policy.evaluationOptions()
            let evaluator = PolicyStore.Snapshot(loaded: loaded, parseOptions: policy.parseOptions, options: options)
                .evaluator
            let configuration = evaluator.configuration
            let uuid = UUID()
            let specs = try afPolicy.map { try AFPolicySpec(parsing: $0) }
            var explained: [ExplainedDecision] = []
            for (index, url) in urls.enumerated() {
                let target = try RequestTarget(parsing: url)
                let decision = evaluator.evaluate(target, source: source)
                let context = ConsoleContext(
                    processName: loaded.processName ?? "App", pid: Int(getpid()), threadID: Int(getpid()) + 1,
                    taskUUID: uuid, taskNumber: index + 1)
                explained.append(DecisionRenderer.explain(decision, context: context))
            }
            switch format {
            case .json:
                let report = ExplainReport(
                    source: loaded.summary, platform: options.platform, configurationMessages: configuration.messages,
                    decisions: explained)
                print(DecisionRenderer.json(report))
            case .text:
                print("Configuration: \(loaded.summary)")
                for message in configuration.messages where message.severity == .error {
                    print("  \(message.appleLog ?? message.message)  [\(message.keyPath)]")
                }
                for (item, url) in zip(explained, urls) {
                    print("")
                    print(DecisionRenderer.text(item))
                    let target = try RequestTarget(parsing: url)
                    if !specs.isEmpty, target.scheme == .https {
                        print(
                            AFPolicyReport.policyLines(
                                AFPolicySpec.first(specs, matching: target.host), host: target.host
                            ).joined(separator: "\n"))
                    }
                }
            }
            blocked = explained.contains { $0.decision.isBlocked }
        } catch {
            exitWithError(error)
        }
        if blocked { throw ExitCode(1) }
    }

    /// `--profile system-services`: what iOS/macOS 27 system processes require of each URL (no Info.plist
    /// involved); exit status 1 when any URL is cleartext.
    private func runSystemServices() throws {
        let results: [(text: String, blocked: Bool)]
        do {
            let systemServices = try policy.systemServicesProfile()
            results = try urls.map { systemServices.explain(try RequestTarget(parsing: $0)) }
        } catch {
            exitWithError(error)
        }
        print(results.map(\.text).joined(separator: "\n\n"))
        if results.contains(where: \.blocked) { throw ExitCode(1) }
    }
}

extension RequestSource: ExpressibleByArgument {}
