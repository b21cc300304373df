/// The "App trust" part of `report.html`: the header's figures and alert, and a section with one summary table
/// (a row per host: ATS, pinning on the real chain, on the interception chain, challenges) followed by one
/// detail table per host (a row per pinning chain and per challenge kind, with the meaning of each result).
/// Findings and refusals are styled as failures (`bad`); an interception-only refusal as a warning.
extension ReportHTMLWriter {
    /// The header figures for challenges and pinning; empty when neither option produced anything.
    static func appTrustStats(_ totals: Totals) -> String {
        var stats: [String] = []
        if totals.challengePasses + totals.challengeFindings > 0 {
            stats.append(
                stat("challenge findings", totals.challengeFindings, totals.challengeFindings > 0 ? "bad" : "good"))
            stats.append(stat("challenges refused", totals.challengePasses, "good"))
        }
        if totals.pinningRealChainRefused > 0 {
            stats.append(stat("pinning refuses real chain", totals.pinningRealChainRefused, "bad"))
        }
        if totals.pinningInterceptionRefused > 0 {
            stats.append(stat("pinning refuses interception", totals.pinningInterceptionRefused, "warn"))
        }
        return stats.map { " " + $0 }.joined()
    }

    /// The alert under the header figures when the app accepted a forged server or its pinning refuses the real
    /// server; empty otherwise.
    static func appTrustAlert(_ document: SessionReportDocument) -> String {
        let e = PlistFragmentWriter.escape
        var lines: [String] = []
        let accepting = document.appTrust.hosts.filter { $0.challengeFindings > 0 }
        if !accepting.isEmpty {
            let kinds = accepting.flatMap { host in host.challenges.filter { $0.verdict == .finding }.map(\.kind) }
            let distinct = kinds.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            lines.append(
                "The app accepted \(document.totals.challengeFindings) forged server\(document.totals.challengeFindings == 1 ? "" : "s") (\(e(distinct.joined(separator: ", ")))) on \(accepting.count) host\(accepting.count == 1 ? "" : "s") (\(e(accepting.map(\.host).joined(separator: ", ")))): its trust evaluation is disabled or overridden there. See App trust below."
            )
        }
        let refusing = document.appTrust.hosts.filter { $0.pinning?.realChain.accepted == false }
        if !refusing.isEmpty {
            lines.append(
                "The app's pinning policy refuses the real server's chain on \(e(refusing.map(\.host).joined(separator: ", "))): the app would fail in production. See App trust below."
            )
        }
        return lines.map { "<p class=\"alert\">\($0)</p>\n" }.joined()
    }

    /// The section; empty when the session has no app-trust results.
    static func appTrustSection(_ section: AppTrustSection) -> String {
        guard !section.hosts.isEmpty else { return "" }
        let e = PlistFragmentWriter.escape
        var html = "<section id=\"app-trust\">\n<h2>App trust</h2>\n<p>\(e(section.summary))</p>\n"
        html +=
            "<table class=\"apptrust\">\n<thead><tr><th>Host</th><th>ATS</th><th>App pinning: real chain</th><th>App pinning: interception chain</th><th>Challenges</th></tr></thead>\n<tbody>\n"
        for host in section.hosts {
            let tone = appTrustTone(host.status)
            let ats = host.atsStatus.map { statusLabel($0) } ?? ("not judged (every connection was challenged)", "")
            let challenges =
                host.challenges.isEmpty
                ? "—"
                : "\(host.challengePasses) refused, \(host.challengeFindings) accepted"
                    + (host.challengeFindings > 0
                        ? "<br><b>accepted: \(e(host.challenges.filter { $0.verdict == .finding }.map(\.kind).joined(separator: ", ")))</b>"
                        : "")
            html +=
                "<tr class=\"\(tone)\"><td data-h=\"Host\"><span class=\"badge \(tone)\">\(appTrustLabel(host.status))</span> \(e(host.host))</td><td data-h=\"ATS\" class=\"\(ats.1)\">\(e(ats.0))</td><td data-h=\"Real chain\">\(chainCell(host.pinning?.realChain, badTone: "bad"))</td><td data-h=\"Interception chain\">\(chainCell(host.pinning?.interceptionChain, badTone: "warn"))</td><td data-h=\"Challenges\">\(challenges)</td></tr>\n"
        }
        html += "</tbody>\n</table>\n"
        for host in section.hosts { html += appTrustCard(host) }
        html += "</section>\n"
        return html
    }

    static func appTrustLabel(_ status: AppTrustStatus) -> String {
        switch status {
        case .challengeFinding: "forged server accepted"
        case .pinningRefusesRealChain: "pinning refuses the real server"
        case .pinningRefusesInterception: "pinning refuses interception"
        case .pass: "pass"
        }
    }

    static func appTrustTone(_ status: AppTrustStatus) -> String {
        switch status {
        case .challengeFinding, .pinningRefusesRealChain: "bad"
        case .pinningRefusesInterception: "warn"
        case .pass: "good"
        }
    }

    /// `accepts`/`REFUSES` and, for a refusal, its meaning; `—` without a policy.
    static func chainCell(_ verdict: ChainVerdictSummary?, badTone: String) -> String {
        guard let verdict else { return "—" }
        let e = PlistFragmentWriter.escape
        if verdict.accepted { return "<span class=\"good\">accepts</span>" }
        return "<b class=\"\(badTone)\">REFUSES</b> (\(verdict.refusals)×): \(e(verdict.meaning))"
    }

    /// One host's detail table: the policy, each chain's verdict and each challenge kind's result.
    static func appTrustCard(_ host: AppTrustHostReport) -> String {
        let e = PlistFragmentWriter.escape
        let tone = appTrustTone(host.status)
        var html = "<article class=\"host \(tone)\">\n"
        html +=
            "<h3 class=\"apptrust\"><span class=\"badge \(tone)\">\(appTrustLabel(host.status))</span> \(e(host.host)) (app trust)</h3>\n"
        if let pinning = host.pinning {
            html +=
                "<p class=\"small\">AFSecurityPolicy <code>\(e(pinning.policy))</code>: scenario \(pinning.scenario), \(e(pinning.scenarioMeaning)); \(pinning.evaluations) connection\(pinning.evaluations == 1 ? "" : "s") evaluated.</p>\n"
        }
        html +=
            "<table class=\"checks\">\n<thead><tr><th>Check</th><th>Result</th><th>Refused</th><th>Accepted</th><th>Meaning</th></tr></thead>\n<tbody>\n"
        if let pinning = host.pinning {
            for (label, verdict, badTone) in [
                ("pinning: real chain", pinning.realChain, "bad"),
                ("pinning: interception chain", pinning.interceptionChain, "warn"),
            ] {
                let rowTone = verdict.accepted ? "good" : badTone
                html +=
                    "<tr class=\"\(rowTone)\"><td data-h=\"Check\">\(label)</td><td data-h=\"Result\" class=\"r \(rowTone)\">\(verdict.accepted ? "accepts" : "REFUSES")</td><td data-h=\"Refused\">\(verdict.refusals)</td><td data-h=\"Accepted\">\(verdict.acceptances)</td><td data-h=\"Meaning\">\(e(verdict.meaning))</td></tr>\n"
            }
        }
        for challenge in host.challenges {
            let finding = challenge.verdict == .finding
            html +=
                "<tr class=\"\(finding ? "bad" : "good")\"><td data-h=\"Check\">challenge <code>\(e(challenge.kind))</code>\(challenge.presents.map { "<br><span class=\"small\">\(e($0))</span>" } ?? "")</td><td data-h=\"Result\" class=\"r \(finding ? "bad" : "good")\">\(finding ? "FINDING: accepted" : "pass: refused")</td><td data-h=\"Refused\">\(challenge.passes)</td><td data-h=\"Accepted\">\(challenge.findings)</td><td data-h=\"Meaning\">\(e(challenge.meaning))</td></tr>\n"
        }
        html += "</tbody>\n</table>\n</article>\n"
        return html
    }
}
