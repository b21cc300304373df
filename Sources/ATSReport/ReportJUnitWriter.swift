import ATSProxyCore
import Foundation

/// Writes `junit.xml`: one test suite for the session, one test case per host. An ATS violation
/// is a `<failure>` carrying the codes, the rule and the fix; a failure ATS did not cause (default
/// trust, a client that does not trust the proxy CA, DNS, refused connections) is an `<error>`; a host whose loads all passed has neither.
///
/// When the session has app-trust results (`--challenge`, `--af-policy`) a second suite, "App trust", follows
/// (see `ReportJUnitWriter.appTrustSuite`); the root's counts add both suites.
enum ReportJUnitWriter {
    static func render(_ document: SessionReportDocument) -> String {
        let e = PlistFragmentWriter.escape
        let failures = document.hosts.filter { $0.status == .violation }.count
        let errors = document.hosts.filter { $0.status != .violation && $0.status != .ok }.count
        let tests = document.hosts.count
        let total = String(format: "%.3f", document.hosts.reduce(0) { $0 + $1.durationMilliseconds } / 1000)
        let appTrust = appTrustCases(document.appTrust)
        let appTrustFailures = appTrust.filter { $0.failure != nil }.count
        var lines: [String] = [#"<?xml version="1.0" encoding="UTF-8"?>"#]
        lines.append(
            #"<testsuites name="ats-proxy" tests="\#(tests + appTrust.count)" failures="\#(failures + appTrustFailures)" errors="\#(errors)" time="\#(total)">"#
        )
        lines.append(
            #"  <testsuite name="ATS: \#(e(document.source))" tests="\#(tests)" failures="\#(failures)" errors="\#(errors)" skipped="0" time="\#(total)" timestamp="\#(e(String(document.generatedAt.prefix(19))))">"#
        )
        lines.append("    <properties>")
        for (name, value) in [
            ("platform", document.platform), ("source", document.source),
            ("requests", "\(document.totals.requests)"), ("violations", "\(document.totals.violations)"),
            ("challengeFindings", "\(document.totals.challengeFindings)"),
            ("challengePasses", "\(document.totals.challengePasses)"),
        ] {
            lines.append(#"      <property name="\#(e(name))" value="\#(e(value))"/>"#)
        }
        lines.append("    </properties>")
        for host in document.hosts {
            let seconds = String(format: "%.3f", host.durationMilliseconds / 1000)
            lines.append(#"    <testcase classname="ats-proxy.hosts" name="\#(e(host.host))" time="\#(seconds)">"#)
            let bad = host.verdicts.filter { $0.kind != .ok }
            let summary = bad.map { verdict in
                var text =
                    "\(verdict.outcome.rawValue)\(verdict.code.map { " \($0)" } ?? "") × \(verdict.count): \(verdict.rule)"
                if let fix = verdict.fix { text += "\n  fix: \(fix)" }
                text += "\n  e.g. \(verdict.exampleURL)" + (verdict.exampleRoute.map { " (\($0))" } ?? "")
                return text
            }.joined(separator: "\n")
            let codes = Array(Set(bad.compactMap(\.code))).sorted().joined(separator: ", ")
            switch host.status {
            case .violation:
                let message =
                    "ATS violation (\(codes.isEmpty ? "blocked" : codes)): \(host.failedRule ?? "")"
                    + (host.fix.map { "; fix: \($0)" } ?? "")
                lines.append(#"      <failure message="\#(e(message))" type="ATSViolation">\#(e(summary))</failure>"#)
            case .clientUntrustedCA:
                let message = "\(SessionStats.clientUntrustedCALine): \(host.failedRule ?? "")"
                lines.append(#"      <error message="\#(e(message))" type="ClientUntrustedCA">\#(e(summary))</error>"#)
            case .trustFailure, .transportFailure:
                let type = host.status == .trustFailure ? "TrustFailure" : "ConnectionFailure"
                let message = "\(codes.isEmpty ? "failed" : codes): \(host.failedRule ?? "")"
                lines.append(#"      <error message="\#(e(message))" type="\#(type)">\#(e(summary))</error>"#)
            case .ok:
                break
            }
            var out =
                "\(host.requests) request(s): \(ReportHTMLWriter.outcomeCounts(host.outcomes).replacingOccurrences(of: " · ", with: ", ")); schemes \(host.schemes.joined(separator: ", "))"
            for tls in host.tls {
                out +=
                    "\nTLS: \(tls.version ?? "?") \(tls.cipher ?? "?")\(tls.group.map { " group \($0)" } ?? "") leaf \(tls.leafKey ?? "?") \(tls.leafSignature ?? "?") chain \(tls.chainLength ?? "?") × \(tls.count)"
            }
            lines.append("      <system-out>\(e(out))</system-out>")
            lines.append("    </testcase>")
        }
        lines.append("  </testsuite>")
        if !appTrust.isEmpty { lines += appTrustSuite(appTrust, timestamp: String(document.generatedAt.prefix(19))) }
        lines.append("</testsuites>")
        return lines.joined(separator: "\n") + "\n"
    }
}
