import Foundation

/// How one doctor finding came out. Only a problem makes `doctor` exit 1.
enum DoctorStatus: String, Codable, Sendable, Equatable {
    /// Nothing to do.
    case ok
    /// Worth knowing, but a session works: nothing to fix before starting.
    case warning
    /// A first session will fail or be unsafe until it is fixed.
    case problem
}

/// One fact a check established: what it looked at, how it came out, why, and the command that fixes it.
struct DoctorFinding: Codable, Sendable, Equatable {
    /// The check's name, e.g. "CA key".
    var check: String
    var status: DoctorStatus
    /// What was found, in a sentence.
    var explanation: String
    /// What to run or change; nil when the status is ok.
    var fix: String?

    static func ok(_ check: String, _ explanation: String) -> DoctorFinding {
        DoctorFinding(check: check, status: .ok, explanation: explanation, fix: nil)
    }

    static func warning(_ check: String, _ explanation: String, fix: String?) -> DoctorFinding {
        DoctorFinding(check: check, status: .warning, explanation: explanation, fix: fix)
    }

    static func problem(_ check: String, _ explanation: String, fix: String) -> DoctorFinding {
        DoctorFinding(check: check, status: .problem, explanation: explanation, fix: fix)
    }
}

/// What every check may read: the environment (its PATH is where the macOS and Linux tools are looked for,
/// so tests put stand-ins first), the working directory and the options `doctor` was given. Checks read the
/// machine; none changes it.
struct DoctorContext: Sendable {
    var environment: [String: String]
    var workingDirectory: String
    /// The CA directory the proxy would use (absolute; not created by the doctor).
    var caDirectory: String
    /// The addresses the proxy would listen on.
    var listen: [String]
    /// The user's own arguments for the settings loader (`--settings PATH` when given).
    var settingsArguments: [String]
    /// The Linux anchor directory, when not the distribution's.
    var anchorDirectory: String?
    var now: Date

    /// The home directory of the environment.
    var home: String { environment["HOME"] ?? NSHomeDirectory() }
}

/// One thing `doctor` checks. A check is a small value that reads the machine through `context` and returns
/// its findings (one, or one per item it looked at, such as each booted Simulator; none when it does not apply
/// here, such as the keychain on a machine without `security`).
protocol DoctorCheck: Sendable {
    func run(_ context: DoctorContext) -> [DoctorFinding]
}

/// Every finding of one `doctor` run, and how it is printed.
struct DoctorReport: Encodable, Sendable {
    var findings: [DoctorFinding]

    /// True when no finding is a problem (warnings allowed).
    var healthy: Bool { !findings.contains { $0.status == .problem } }

    /// The exit status: 0 when healthy, 1 when any problem was found.
    var exitStatus: Int32 { healthy ? 0 : 1 }

    private enum CodingKeys: String, CodingKey { case healthy, findings }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(healthy, forKey: .healthy)
        try container.encode(findings, forKey: .findings)
    }

    /// One block per finding (status, check, explanation, then the fix indented), and a count at the end.
    var text: String {
        var lines: [String] = []
        for finding in findings {
            let label: String
            switch finding.status {
            case .ok: label = "ok      "
            case .warning: label = "warning "
            case .problem: label = "PROBLEM "
            }
            lines.append("\(label) \(finding.check): \(finding.explanation)")
            if let fix = finding.fix { lines.append("         fix: \(fix)") }
        }
        let problems = findings.filter { $0.status == .problem }.count
        let warnings = findings.filter { $0.status == .warning }.count
        lines.append("")
        lines.append(
            problems == 0 && warnings == 0
                ? "All is well."
                : "\(problems) problem\(problems == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s").")
        return lines.joined(separator: "\n")
    }

    /// The report as JSON: `{"healthy": Bool, "findings": [{check, status, explanation, fix}]}`.
    func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }
}
