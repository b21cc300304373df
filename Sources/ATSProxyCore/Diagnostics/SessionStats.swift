import ATSPolicy
import Synchronization

/// Running totals of a proxy session: requests, blocked loads, hosts, ATS violations. Fed with
/// every finished `RequestRecord`; read by the live status line and by `exec` for its exit status.
/// Thread-safe (a mutex).
public final class SessionStats: Sendable {
    /// A consistent copy of the counters.
    public struct Snapshot: Sendable, Equatable {
        public var requests = 0
        /// Answered by the proxy instead of the origin (403 cleartext, 502/504 TLS or connection).
        public var blocked = 0
        /// Loads that violate ATS (blocked, failed, or let through in report mode).
        public var violations = 0
        public var hosts = 0
        /// Violations counted per deciding rule (the record's `rule`).
        public var violationsByRule: [String: Int] = [:]
        /// TLS handshakes the client refused because it does not trust the proxy's CA: a set-up failure of the
        /// test environment, counted apart from ATS violations and from blocked loads.
        public var clientUntrustedCA = 0
        /// `--challenge`: forged servers the client refused (passes) and accepted (findings); neither is an ATS
        /// violation.
        public var challengePasses = 0
        public var challengeFindings = 0

        /// `requests 12  blocked 3  hosts 4  violations 3`.
        public var line: String {
            "ats-proxy: requests \(requests)  blocked \(blocked)  hosts \(hosts)  violations \(violations)"
                + (clientUntrustedCA > 0 ? "  untrusted-CA \(clientUntrustedCA)" : "")
                + (challengeFindings > 0 ? "  challenge-findings \(challengeFindings)" : "")
        }
    }

    /// The counters, the distinct hosts, and the host counted last (most records repeat it: no hashing then).
    private let state = Mutex<(snapshot: Snapshot, hosts: Set<String>, lastHost: String?)>((Snapshot(), [], nil))

    public init() {}

    /// Counts one finished request.
    public func record(_ record: RequestRecord) {
        let host = record.host
        state.withLock { state in
            // A challenged connection is the client's trust on trial, not one of the app's loads: counted apart, as
            // the report does (neither a request nor a host of the ATS figures).
            switch record.result {
            case .challengeRefused:
                state.snapshot.challengePasses += 1
                return
            case .challengeAccepted:
                state.snapshot.challengeFindings += 1
                return
            case .completed, .blockedCleartext, .failed, .refused, .reported, .clientUntrustedCA:
                break
            }
            state.snapshot.requests += 1
            let violation: Bool
            switch record.result {
            case .completed:
                violation = false
            case .blockedCleartext:
                state.snapshot.blocked += 1
                violation = true
            case .failed:
                state.snapshot.blocked += 1
                violation = Self.isTLSOrPolicyFailure(record.errorCode)
            case .refused:
                state.snapshot.blocked += 1
                violation = false
            case .reported:
                violation = true
            case .clientUntrustedCA:
                state.snapshot.clientUntrustedCA += 1
                violation = false
            case .challengeRefused, .challengeAccepted:
                preconditionFailure("SessionStats.record: challenge records are counted above")
            }
            if violation {
                state.snapshot.violations += 1
                state.snapshot.violationsByRule[record.rule, default: 0] += 1
            }
            guard host != state.lastHost else { return }
            state.lastHost = host
            if state.hosts.insert(host).inserted { state.snapshot.hosts = state.hosts.count }
        }
    }

    public var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// The lines printed when a run ends: totals, then violations by rule (most frequent first),
    /// then where the report is (or how to get one).
    public static func summaryLines(
        _ snapshot: Snapshot, reportDirectory: String?, ignored: HostFilter.Ignored = HostFilter.Ignored()
    ) -> [String] {
        var lines = [
            "ats-proxy: \(count(snapshot.requests, "request")), \(count(snapshot.hosts, "host")), \(snapshot.blocked) blocked or failed, "
                + count(snapshot.violations, "ATS violation")
        ]
        let rules = snapshot.violationsByRule.sorted { ($0.value, $1.key) > ($1.value, $0.key) }
        for (rule, count) in rules { lines.append("  \(count) × \(rule)") }
        if snapshot.clientUntrustedCA > 0 {
            lines.append(
                "  \(snapshot.clientUntrustedCA) TLS handshakes refused by the client: \(clientUntrustedCALine) (not counted as violations)"
            )
        }
        if snapshot.challengePasses + snapshot.challengeFindings > 0 {
            lines.append(
                "  challenges (--challenge): \(snapshot.challengeFindings) forged server(s) accepted by the client (findings), "
                    + "\(snapshot.challengePasses) refused (passes)")
        }
        if ignored.connections > 0 {
            lines.append(
                "  \(ignored.connections) connections to \(ignored.hosts) ignored hosts (left alone, not judged or counted above)"
            )
        }
        if let reportDirectory {
            lines.append("  report: \(reportDirectory) (report.html, report.json, junit.xml)")
        } else if snapshot.violations > 0 {
            lines.append("  no report written (add --report DIR for the per-host report and the minimal Info.plist)")
        }
        return lines
    }

    /// `1 host`, `2 hosts`: a count with its noun in the right number (the noun's plural adds `s`).
    public static func count(_ number: Int, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }

    /// The words that start every report of a client refusing the proxy's certificate (log, exec, report).
    public static let clientUntrustedCALine = "the client does not trust the proxy CA"

    /// -1022 and the -12xx TLS/trust codes count as violations; connection faults (-1001, -1003,
    /// -1004, -1005) and a failure without a code (nothing the app's policy decided) do not.
    static func isTLSOrPolicyFailure(_ code: Int?) -> Bool {
        guard let code else { return false }
        return code == -1022 || (-1206 ... -1200).contains(code)
    }
}
