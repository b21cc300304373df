import ATSConfigFiles
import ATSDiagnose
import ATSPolicy
import ATSProxyIO
import ATSReport
import ATSTLS
import ArgumentParser
import Foundation

/// `ats-proxy verify --report report.json [INFO_PLIST]`: re-decides every load a session recorded under a
/// candidate Info.plist (default: the session's minimal dictionary) and says which now pass and which still
/// fail. Exit status 0 when none still fails, 1 when one does, 2 on bad input.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify", abstract: "Check a candidate Info.plist against the loads a session recorded.",
        discussion: """
            Cleartext loads and loads that went through are decided offline with the policy engine (the \
            latter against the TLS facts the session recorded); loads whose TLS failed are checked again \
            against the server, as 'ats-proxy diagnose' does. Network errors, the proxy's own refusals and \
            a client that did not trust the proxy CA are skipped: no Info.plist decides them.

            Exit status: 0 when every decided load passes, 1 when one still fails, 2 on bad input.

            Examples:
              ats-proxy verify --report out/report.json
              ats-proxy verify --report out/report.json App/Info.plist
            """)

    @Option(name: .long, help: "The session's report.json (written by --report DIR).")
    var report: String

    @Option(name: .long, help: "Output format: text or json.")
    var format: ExplainCommand.OutputFormat = .text

    @Option(name: .long, help: "HOST:PORT:ADDR, as curl's --resolve, for the TLS re-checks (repeatable).")
    var resolve: [String] = []

    @Option(
        name: .long,
        help: "Extra trusted root for upstream servers, PEM or DER (repeatable); acts like a user-installed root.")
    var upstreamCa: [String] = []

    @Option(name: .long, help: "Seconds allowed for each connection and handshake of a re-check.")
    var timeout: Double = 10

    @Argument(help: "The candidate Info.plist (XML or binary, an .app or .ipa); default: the minimal dictionary.")
    var infoPlist: String?

    func validate() throws {
        try UnknownOptionCheck.check(against: Self.self)
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        var overrides = ResolverOverrides()
        for entry in resolve {
            do {
                try overrides.addResolve(entry)
            } catch {
                throw ValidationError("--resolve: \(error)")
            }
        }
    }

    func run() throws {
        let verification: SessionVerifier.Verification
        do {
            let document = try Self.loadReport(report)
            guard let options = SessionVerifier.options(of: document) else {
                throw CLIError.usage("\(report): unknown platform '\(document.platform)'")
            }
            let (configuration, candidate) = try candidateConfiguration(document)
            var overrides = ResolverOverrides()
            for entry in resolve { try overrides.addResolve(entry) }
            let checker = UpstreamChecker(
                client: UpstreamTLSClient(trust: try TrustStore(extraAnchorFiles: upstreamCa)))
            let limit = timeout
            let verifier = SessionVerifier(
                document: document, configuration: configuration, options: options,
                recheck: { [overrides] target, policy in
                    let transport = UpstreamProbeTransport(
                        host: target.host, port: UInt16(target.port), overrides: overrides, timeout: limit)
                    return checker.check(target, policy: policy, transport: transport)
                })
            verification = verifier.verify(candidate: candidate)
        } catch {
            exitWithError(error)
        }
        switch format {
        case .text: FileHandle.standardOutput.write(Data(SessionVerifier.text(verification).utf8))
        case .json:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            FileHandle.standardOutput.write(try encoder.encode(verification) + Data("\n".utf8))
        }
        if verification.failed > 0 { throw ExitCode(1) }
    }

    /// The candidate's configuration and how to name it: the Info.plist given, or the report's minimal dictionary.
    func candidateConfiguration(_ document: SessionReportDocument) throws -> (ATSConfiguration, String) {
        guard let infoPlist else {
            guard let configuration = SessionVerifier.minimalConfiguration(of: document) else {
                throw CLIError.usage("\(report): its minimal dictionary does not parse")
            }
            return (configuration, "the session's minimal dictionary (\(report))")
        }
        let loaded = try ConfigSourceReader.load(path: infoPlist)
        return (ATSConfigurationParser().parse(loaded.atsValue), infoPlist)
    }

    /// The session report at `path`.
    static func loadReport(_ path: String) throws -> SessionReportDocument {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError.usage("\(path): cannot read the report")
        }
        do {
            return try JSONDecoder().decode(SessionReportDocument.self, from: data)
        } catch {
            throw CLIError.usage("\(path): not a report.json of this version of ats-proxy (\(error))")
        }
    }
}
