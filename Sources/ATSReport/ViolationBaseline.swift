import ATSPolicy
import ATSProxyCore
import Foundation
import Synchronization

/// What makes two ATS violations "the same" for `--baseline`: the host, the error code as report.json writes
/// it (`-1022`, `-1200 [3:-9836]`) and the deciding rule. A violation is what the report counts as one
/// (`ObservedLoad.kind(of:) == .violation`), so a run compared with its own report.json has nothing new.
/// This type is the one place that identity is defined.
public struct ViolationKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let host: String
    public let code: String
    public let rule: String

    public init(host: String, code: String?, rule: String) {
        self.host = host
        self.code = code ?? ""
        self.rule = rule
    }

    /// The key of `record`, nil when the record is not an ATS violation the report would list (the proxy's
    /// own onboarding host never is). The host is the one the report files it under: the URL's.
    public init?(record: RequestRecord) {
        guard ObservedLoad.kind(of: record) == .violation, !SessionReport.proxyOwnHosts.contains(record.host) else {
            return nil
        }
        let host = (try? RequestTarget(parsing: record.url))?.host ?? "(unparsed URL)"
        self.init(host: host, code: ObservedLoad.code(of: record), rule: record.rule)
    }

    /// The key of one of a report's verdicts for `host`, nil when the verdict is not a violation.
    init?(host: String, verdict: BaselineDocument.Verdict) {
        guard verdict.kind == HostStatus.violation.rawValue else { return nil }
        self.init(host: host, code: verdict.code, rule: verdict.rule)
    }

    /// `api.example.com -1022: <rule>`.
    public var description: String { "\(host) \(code.isEmpty ? "(no code)" : code): \(rule)" }

    public static func < (lhs: ViolationKey, rhs: ViolationKey) -> Bool {
        (lhs.host, lhs.code, lhs.rule) < (rhs.host, rhs.code, rhs.rule)
    }
}

/// The part of a report.json a baseline needs: each host's verdicts. Decoded leniently (other fields are
/// ignored), so a baseline written by an older or newer ats-proxy still reads.
struct BaselineDocument: Decodable {
    struct Verdict: Decodable {
        var code: String?
        var kind: String
        var rule: String
    }

    struct Host: Decodable {
        var host: String
        var verdicts: [Verdict]
    }

    var schemaVersion: Int
    var hosts: [Host]
}

/// The violations of an earlier session, read from its report.json (`--baseline`).
public struct ViolationBaseline: Sendable {
    /// Where it was read from, for the summary.
    public let path: String
    public let violations: Set<ViolationKey>

    public init(path: String, violations: Set<ViolationKey>) {
        self.path = path
        self.violations = violations
    }

    /// Reads the report.json at `path`.
    /// - Throws: `ViolationBaseline.LoadError` naming the file and what is wrong with it.
    public static func load(path: String) throws(LoadError) -> ViolationBaseline {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw LoadError(path: path, reason: "cannot be read")
        }
        let document: BaselineDocument
        do {
            document = try JSONDecoder().decode(BaselineDocument.self, from: data)
        } catch {
            throw LoadError(path: path, reason: "is not an ats-proxy report.json (\(error))")
        }
        guard document.schemaVersion == SessionReportDocument.currentSchemaVersion else {
            throw LoadError(
                path: path,
                reason:
                    "has report schema version \(document.schemaVersion); this ats-proxy reads version \(SessionReportDocument.currentSchemaVersion)"
            )
        }
        var violations = Set<ViolationKey>()
        for host in document.hosts {
            for verdict in host.verdicts {
                if let key = ViolationKey(host: host.host, verdict: verdict) { violations.insert(key) }
            }
        }
        return ViolationBaseline(path: path, violations: violations)
    }

    /// Why a baseline could not be read.
    public struct LoadError: Error, CustomStringConvertible, Equatable {
        public let path: String
        public let reason: String
        public var description: String { "--baseline \(path) \(reason)" }
    }
}

/// The distinct violations a running session has seen, fed with every finished record when `--baseline` is
/// given (nothing else creates one). Thread-safe: one lock per violating record, nothing for the others.
public final class ViolationLedger: Sendable {
    private let seen = Mutex<Set<ViolationKey>>([])

    public init() {}

    /// Remembers `record` when it is a violation.
    public func record(_ record: RequestRecord) {
        guard let key = ViolationKey(record: record) else { return }
        _ = seen.withLock { $0.insert(key) }
    }

    /// The violations seen so far.
    public var violations: Set<ViolationKey> { seen.withLock { $0 } }
}

/// A session's violations against a baseline: those not in it (new: they decide the exit status), those of the
/// baseline the session did not see (gone), and those in both.
public struct BaselineComparison: Sendable, Equatable {
    public let baselinePath: String
    public let new: [ViolationKey]
    public let gone: [ViolationKey]
    public let unchanged: [ViolationKey]

    public init(baseline: ViolationBaseline, seen: Set<ViolationKey>) {
        baselinePath = baseline.path
        new = seen.subtracting(baseline.violations).sorted()
        gone = baseline.violations.subtracting(seen).sorted()
        unchanged = seen.intersection(baseline.violations).sorted()
    }

    /// Summary lines: the counts, then each new violation and each one that is gone.
    public var lines: [String] {
        var lines = [
            "ats-proxy: baseline \(baselinePath): \(new.count) new violation\(new.count == 1 ? "" : "s"), "
                + "\(gone.count) gone since the baseline, \(unchanged.count) unchanged"
        ]
        lines += new.map { "  new: \($0)" }
        lines += gone.map { "  gone: \($0)" }
        return lines
    }
}
