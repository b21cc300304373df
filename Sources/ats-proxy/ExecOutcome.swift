import ATSProxyCore
import ATSReport
import Foundation

/// How an `exec` run ends: its closing lines and exit status, from the session's counts and the command's
/// status. A client that refused the proxy's certificate is a set-up failure (status 4, its own line),
/// checked first; then a client that accepted a forged server of `--challenge` (status 5: its own trust evaluation is
/// off, whatever ATS says); then ATS violations (status 3), which only turn a successful command into a failure.
struct ExecOutcome {
    let stats: SessionStats.Snapshot
    let commandStatus: Int32
    let allowViolations: Bool
    let firstUntrusted: RequestRecord?
    /// The value of ATS_PROXY_TRUST_OVERLAY the command had.
    let overlayState: String
    /// `--baseline`: only the violations it does not list turn a successful command into 3.
    var baseline: BaselineComparison? = nil

    /// The violations that count toward status 3: all of them, or with a baseline the new ones.
    var countedViolations: Int { baseline?.new.count ?? stats.violations }

    /// The exit status of `ats-proxy exec`.
    var status: Int32 {
        if stats.clientUntrustedCA > 0 { return ExecCommand.clientUntrustedStatus }
        if stats.challengeFindings > 0 { return ExecCommand.challengeFindingStatus }
        if commandStatus == 0 && countedViolations > 0 && !allowViolations { return 3 }
        return commandStatus
    }

    /// The summary line, preceded by the trust line when the client refused the proxy's certificate.
    var lines: [String] {
        var lines: [String] = []
        var summary =
            "ats-proxy: \(SessionStats.count(stats.requests, "request")), \(SessionStats.count(stats.violations, "ATS violation")), \(SessionStats.count(stats.hosts, "host"))"
        if stats.clientUntrustedCA > 0 {
            summary += ", \(stats.clientUntrustedCA) refused the proxy CA"
            let host = firstUntrusted.map { " (first: \($0.host))" } ?? ""
            lines.append(
                "ats-proxy: \(SessionStats.clientUntrustedCALine): \(stats.clientUntrustedCA) TLS handshake(s) refused\(host); \(advice)"
            )
            lines.append(
                "\(summary); exiting \(ExecCommand.clientUntrustedStatus) (a set-up failure, not an ATS verdict)")
        } else if status == ExecCommand.challengeFindingStatus {
            lines.append(
                "\(summary), \(stats.challengeFindings) forged server(s) accepted (--challenge); exiting \(ExecCommand.challengeFindingStatus): the app's trust evaluation accepts servers it must refuse"
            )
        } else if status == 3 {
            let which = baseline == nil ? "" : " (\(countedViolations) not in the baseline)"
            lines.append("\(summary)\(which); exiting 3 (use --allow-violations to keep the command's status)")
        } else {
            lines.append(summary)
        }
        return lines + (baseline?.lines ?? [])
    }

    /// What to change so that the client trusts the proxy CA.
    var advice: String {
        switch overlayState {
        case "active":
            return
                "the client reads trust from somewhere exec does not cover: give it $ATS_PROXY_CA_BUNDLE or $ATS_PROXY_CA_CERT (for Swift tests, the ATSProxyTesting library)"
        case "unavailable":
            return
                "the system bundle could not be overlaid (see the note above): run 'sudo ats-proxy ca install --system', or run exec as root"
        default:
            return
                "trust the proxy CA in the client ($ATS_PROXY_CA_CERT; for Swift tests, the ATSProxyTesting library), or install it: ats-proxy ca install --simulator booted|--keychain|--system"
        }
    }
}
