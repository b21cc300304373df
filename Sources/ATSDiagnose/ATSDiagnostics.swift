import ATSPolicy
import ATSTLS
import Foundation

/// A value of the ATS dictionary as nscurl prints it (NSDictionary's description format).
public indirect enum DiagnosticsPlistValue: Sendable, Hashable {
    case bool(Bool)
    case string(String)
    case dictionary([(String, DiagnosticsPlistValue)])

    public static func == (lhs: DiagnosticsPlistValue, rhs: DiagnosticsPlistValue) -> Bool {
        lhs.render(level: 0) == rhs.render(level: 0)
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(render(level: 0)) }

    /// NSDictionary-style text: keys sorted, quoted when not plain identifiers, nested
    /// dictionaries opened after extra indentation, Booleans as true/false.
    func render(level: Int) -> String {
        switch self {
        case .bool(let flag): return flag ? "true" : "false"
        case .string(let text): return Self.quote(text)
        case .dictionary(let entries):
            let indent = String(repeating: " ", count: 4 * (level + 1))
            var lines = ["{"]
            for (key, value) in entries.sorted(by: { $0.0 < $1.0 }) {
                let rendered: String
                if case .dictionary = value {
                    rendered = indent + value.render(level: level + 1)
                } else {
                    rendered = value.render(level: level + 1)
                }
                lines.append("\(indent)\(Self.quote(key)) = \(rendered);")
            }
            lines.append(String(repeating: " ", count: 4 * level) + "}")
            return lines.joined(separator: "\n")
        }
    }

    static func quote(_ text: String) -> String {
        let plain = !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        return plain ? text : "\"\(text)\""
    }
}

/// One nscurl configuration: section header, test name, ATS dictionary.
public struct DiagnosticsRow: Sendable {
    public let section: String
    public let name: String
    public let dictionary: [(String, DiagnosticsPlistValue)]
    public let configuration: ATSConfiguration

    /// The rows of `nscurl --ats-diagnostics`, in its order (reference §5): 16 on a platform with
    /// TLS 1.3, 13 before it (the nscurl of those systems had no TLSv1.3 rows).
    public static func nscurlRows(host: String, platform: Platform = .default) -> [DiagnosticsRow] {
        var rows: [DiagnosticsRow] = []
        rows.append(
            DiagnosticsRow(section: "Default ATS Secure Connection", name: "ATS Default Connection", entry: nil))
        var arbitrary = ATSConfiguration()
        arbitrary.allowsArbitraryLoads = .value(true)
        rows.append(
            DiagnosticsRow(
                section: "Allowing Arbitrary Loads", name: "Allow All Loads",
                dictionary: [(ATSKey.allowsArbitraryLoads, .bool(true))], configuration: arbitrary))
        let versions: [TLSProtocolVersion] =
            platform.has(.tls13) ? [.tls13, .tls12, .tls11, .tls10] : [.tls12, .tls11, .tls10]
        for version in versions {
            rows.append(
                DiagnosticsRow(
                    section: "Configuring TLS exceptions for \(host)", name: version.rawValue,
                    entry: Entry(host: host, version: version)))
        }
        rows.append(
            DiagnosticsRow(
                section: "Configuring PFS exceptions for \(host)", name: "Disabling Perfect Forward Secrecy",
                entry: Entry(host: host, noPFS: true)))
        rows.append(
            DiagnosticsRow(
                section: "Configuring PFS exceptions and allowing insecure HTTP for \(host)",
                name: "Disabling Perfect Forward Secrecy and Allowing Insecure HTTP",
                entry: Entry(host: host, noPFS: true, insecureHTTP: true)))
        for version in versions {
            rows.append(
                DiagnosticsRow(
                    section: "Configuring TLS exceptions with PFS disabled for \(host)",
                    name: "\(version.rawValue) with PFS disabled",
                    entry: Entry(host: host, version: version, noPFS: true)))
        }
        for version in versions {
            rows.append(
                DiagnosticsRow(
                    section: "Configuring TLS exceptions with PFS disabled and insecure HTTP allowed for \(host)",
                    name: "\(version.rawValue) with PFS disabled and insecure HTTP allowed",
                    entry: Entry(host: host, version: version, noPFS: true, insecureHTTP: true)))
        }
        return rows
    }

    /// An exception entry for the host.
    struct Entry {
        var host: String
        var version: TLSProtocolVersion?
        var noPFS = false
        var insecureHTTP = false
    }

    init(section: String, name: String, dictionary: [(String, DiagnosticsPlistValue)], configuration: ATSConfiguration)
    {
        self.section = section
        self.name = name
        self.dictionary = dictionary
        self.configuration = configuration
    }

    init(section: String, name: String, entry: Entry?) {
        var configuration = ATSConfiguration()
        var dictionary: [(String, DiagnosticsPlistValue)] = []
        if let entry {
            var domain = ExceptionDomain(key: entry.host)
            var keys: [(String, DiagnosticsPlistValue)] = []
            if let version = entry.version {
                domain.minimumTLSVersion = version
                domain.minimumTLSVersionSpecified = true
                keys.append((ATSKey.exceptionMinimumTLSVersion, .string(version.rawValue)))
            }
            if entry.noPFS {
                domain.requiresForwardSecrecy = false
                keys.append((ATSKey.exceptionRequiresForwardSecrecy, .bool(false)))
            }
            if entry.insecureHTTP {
                domain.allowsInsecureHTTPLoads = true
                keys.append((ATSKey.exceptionAllowsInsecureHTTPLoads, .bool(true)))
            }
            configuration.exceptionDomains[entry.host] = domain
            dictionary = [(ATSKey.exceptionDomains, .dictionary([(entry.host, .dictionary(keys))]))]
        }
        self.init(section: section, name: name, dictionary: dictionary, configuration: configuration)
    }

    /// `ATS Dictionary:` body.
    public var dictionaryText: String { DiagnosticsPlistValue.dictionary(dictionary).render(level: 0) }
}

/// The outcome of a diagnostics run.
public struct DiagnosticsReport: Sendable {
    /// nscurl's text plus ats-proxy's reasons and app-policy verdict.
    public let text: String
    /// Whether the default ATS configuration passed (exit status 0).
    public let defaultPassed: Bool
    /// Each row's verdict, in order.
    public let results: [(row: DiagnosticsRow, verdict: UpstreamVerdict)]
}

/// `ats-proxy diagnose`: the Linux equivalent of `nscurl --ats-diagnostics [--verbose] URL`. Runs
/// the same load under nscurl's 16 ATS dictionaries over a blocking transport and prints nscurl's
/// format; then one line per FAIL with the reason and, with an app policy, its verdict and the
/// smallest change. Deterministic for tests through `contextFor` (UUIDs, dates).
public struct ATSDiagnostics: Sendable {
    public let checker: UpstreamChecker
    public let options: EvaluationOptions
    /// The console context (task UUID, time) of the N-th load (1-based).
    public let contextFor: @Sendable (Int) -> ConsoleContext

    public init(
        checker: UpstreamChecker, options: EvaluationOptions,
        contextFor: @escaping @Sendable (Int) -> ConsoleContext = {
            ConsoleContext(processName: "nscurl", taskNumber: $0)
        }
    ) {
        self.checker = checker
        self.options = options
        self.contextFor = contextFor
    }

    static let rule = String(repeating: "=", count: 80)

    public func run(
        _ target: RequestTarget, verbose: Bool, appPolicy: PolicyContext?, transport: any HandshakeTransport
    ) -> DiagnosticsReport {
        let platform = options.platform
        var lines: [String] = [
            "Starting ATS Diagnostics", "",
            "Configuring ATS Info.plist keys and displaying the result of HTTPS loads to \(target.url).",
            "A test will \"PASS\" if URLSession:task:didCompleteWithError: returns a nil error.",
        ]
        if !verbose {
            lines.append(
                "Use '--verbose' to view the ATS dictionaries used and to display the error received in URLSession:task:didCompleteWithError:."
            )
        }
        lines.append(Self.rule)
        var results: [(row: DiagnosticsRow, verdict: UpstreamVerdict)] = []
        var currentSection: String?
        for (index, row) in DiagnosticsRow.nscurlRows(host: target.host, platform: platform).enumerated() {
            if row.section != currentSection {
                if currentSection != nil {
                    lines.append(Self.rule)
                }
                lines.append("")
                lines.append(row.section)
                if index > 0 { lines.append("") }
                currentSection = row.section
            }
            let requirements = PolicyContext(configuration: row.configuration, options: options).decide(target)
                .requirements
            let verdict = checker.attempt(
                requirements: requirements, host: target.host, url: target.url, transport: transport)
            results.append((row, verdict))
            lines.append("---")
            lines.append(row.name)
            if verbose {
                lines.append("ATS Dictionary:")
                lines.append(row.dictionaryText)
            }
            lines.append("Result : \(verdict.isBlocked ? "FAIL" : "PASS")")
            if verbose, let error = verdict.errorText(platform: platform, context: contextFor(index + 1)) {
                lines.append("Error : \(error)")
            }
            lines.append("---")
            lines.append("")
        }
        lines.append(Self.rule)
        let failures = results.filter { $0.verdict.isBlocked }
        if !failures.isEmpty {
            lines.append("")
            lines.append("Why each FAIL failed (ats-proxy):")
            var offer: ServerOffer?
            for (row, verdict) in failures {
                var explained = verdict
                if checker.needsProbe(verdict) {
                    if offer == nil {
                        let requirements = PolicyContext(configuration: ATSConfiguration(), options: options).decide(
                            target
                        )
                        .requirements
                        offer = checker.explain(requirements: requirements, host: target.host, transport: transport)
                    }
                    explained.serverOffer = offer.map { Self.offerOnly($0) }
                }
                let pair = explained.streamPair.map { " \($0)" } ?? ""
                lines.append("\(row.name): \(explained.error?.rawValue ?? 0)\(pair): \(explained.rule)")
            }
        }
        if let appPolicy {
            let verdict = checker.check(target, policy: appPolicy, transport: transport)
            lines.append("")
            lines.append("App policy (\(platform)) for \(target.url):")
            switch verdict.outcome {
            case .allowed:
                lines.append("Result : PASS")
            case .allowedByTrustOverride:
                lines.append("Result : PASS (the app's delegate overrides trust: \(verdict.rule))")
            case .blocked:
                let pair = verdict.streamPair.map { " \($0)" } ?? ""
                lines.append("Result : FAIL \(verdict.error?.rawValue ?? 0)\(pair): \(verdict.rule)")
                lines.append("Smallest change: \(verdict.fix ?? "no Info.plist change can allow this")")
            }
        }
        let passed = !(results.first?.verdict.isBlocked ?? true)
        return DiagnosticsReport(text: lines.joined(separator: "\n") + "\n", defaultPassed: passed, results: results)
    }

    /// The probe's findings as a plain list of accepted versions (the row's own limits differ).
    static func offerOnly(_ offer: ServerOffer) -> ServerOffer {
        var listed = offer
        let versions = offer.acceptedVersions.keys.sorted().map(\.displayName)
        listed.sentence =
            versions.isEmpty
            ? offer.sentence
            : "the server accepts \(englishList(versions))"
                + (offer.ecdheProbed && offer.ecdheChoice == nil
                    ? " and refuses every ECDHE suite at TLS 1.2 and below" : "")
        return listed
    }
}
