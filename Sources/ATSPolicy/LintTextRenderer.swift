/// The text output of `ats-proxy lint`: one block per finding, worst first, then a summary.
public enum LintTextRenderer {
    public static func render(_ report: LintReport, source: String) -> String {
        var lines = ["Configuration: \(source)"]
        for finding in report.findings {
            lines.append("\(finding.severity.rawValue): \(finding.keyPath): \(finding.message)")
            if let log = finding.appleLog { lines.append("    Apple logs: \(log)") }
            if let fix = finding.fix { lines.append("    fix: \(fix)") }
        }
        let errors = report.count(.error)
        let warnings = report.count(.warning)
        let notes = report.count(.note)
        lines.append(
            "\(errors) error\(errors == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s"), \(notes) note\(notes == 1 ? "" : "s")"
        )
        return lines.joined(separator: "\n")
    }
}
