import Foundation

/// The Markdown `exec` appends to `$GITHUB_STEP_SUMMARY` in a GitHub Actions job: a headline with the
/// session's totals and exit status, a table of the ATS violations (host, code, rule, fix, and whether the
/// baseline knew it), and the minimal `NSAppTransportSecurity` dictionary as an XML code block. Pure.
public enum StepSummaryWriter {
    /// The summary of `document`. `exitStatus` is what `exec` exits with; `baseline`, when given, marks each
    /// violation new or known and lists those that are gone.
    public static func markdown(
        _ document: SessionReportDocument, exitStatus: Int32, baseline: BaselineComparison? = nil
    ) -> String {
        let totals = document.totals
        var lines = [
            "## ats-proxy: \(totals.violations) ATS violation\(totals.violations == 1 ? "" : "s") in \(totals.requests) request\(totals.requests == 1 ? "" : "s") (exit \(exitStatus))",
            "",
            "Policy: \(cell(document.source)) · \(cell(document.platform))",
            "",
        ]
        let newKeys = Set(baseline?.new ?? [])
        var rows: [String] = []
        for host in document.hosts {
            for verdict in host.verdicts where verdict.kind == .violation {
                let key = ViolationKey(host: host.host, code: verdict.code, rule: verdict.rule)
                var row =
                    "| \(cell(host.host)) | \(cell(verdict.code ?? "")) | \(verdict.count) | \(cell(verdict.rule)) | "
                row += "\(cell(verdict.fix ?? "no Info.plist change allows it")) |"
                if baseline != nil { row += newKeys.contains(key) ? " **new** |" : " known |" }
                rows.append(row)
            }
        }
        if rows.isEmpty {
            lines.append("No ATS violations.")
        } else {
            lines.append("### Violations")
            lines.append("")
            lines.append("| Host | Code | Requests | Rule | Fix |" + (baseline != nil ? " Baseline |" : ""))
            lines.append("| --- | --- | ---: | --- | --- |" + (baseline != nil ? " --- |" : ""))
            lines += rows
        }
        if let baseline {
            lines.append("")
            lines.append(
                "Baseline `\(baseline.baselinePath)`: \(baseline.new.count) new, \(baseline.gone.count) gone, \(baseline.unchanged.count) unchanged."
            )
            if !baseline.gone.isEmpty {
                lines.append("")
                lines.append("Gone since the baseline:")
                lines += baseline.gone.map { "- \(cell($0.description))" }
            }
        }
        if !document.minimalDictionary.entries.isEmpty || document.minimalDictionary.allowsLocalNetworking
            || totals.violations > 0
        {
            lines.append("")
            lines.append("### Minimal Info.plist for this session")
            lines.append("")
            lines.append("```xml")
            lines.append(document.minimalDictionary.plist.trimmingCharacters(in: .newlines))
            lines.append("```")
        }
        return lines.joined(separator: "\n") + "\n\n"
    }

    /// Appends `markdown` to the file at `path` (created when missing, as GitHub creates it).
    /// - Throws: the file system's error when the file cannot be opened or written.
    public static func append(_ markdown: String, to path: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
            }
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(markdown.utf8))
    }

    /// Text made safe for one table cell: no line breaks, pipes escaped, no HTML.
    static func cell(_ text: String) -> String {
        text.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "|", with: "\\|")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
