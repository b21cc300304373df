import ATSProxyCore
import Foundation

/// Writes `report.html`: one self-contained page (inline CSS, no scripts, images or fonts from
/// elsewhere), readable on a phone (single column under 700 px), and in print (`@media print`:
/// no colours needed, cards never split). Hosts are sorted worst first; the minimal dictionary
/// sits in a `<pre>` that selects as a whole with one tap.
enum ReportHTMLWriter {
    static func render(_ document: SessionReportDocument) -> String {
        let e = PlistFragmentWriter.escape
        let totals = document.totals
        var html = """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>ATS session report</title>
            <style>\(css)</style>
            </head>
            <body>
            <header>
            <h1>ATS session report</h1>
            <p class="meta">\(e(document.source)) · \(e(document.platform)) · \(e(document.generatedAt))</p>
            <div class="totals">
            \(stat("requests", totals.requests, "")) \(stat("hosts", totals.hosts, "")) \(stat("violations", totals.violations, totals.violations > 0 ? "bad" : "good")) \(stat("allowed", totals.allowed, "good")) \(stat("blocked", totals.blocked, totals.blocked > 0 ? "bad" : "")) \(stat("failed", totals.failed, totals.failed > 0 ? "warn" : "")) \(stat("reported", totals.reported, totals.reported > 0 ? "bad" : ""))\(totals.ignoredConnections > 0 ? " " + stat("ignored (not judged)", totals.ignoredConnections, "") : "")\(appTrustStats(totals))
            </div>
            \(appTrustAlert(document))</header>
            <main>

            """
        html += appTrustSection(document.appTrust)
        let minimal = document.minimalDictionary
        html += "<section id=\"minimal\">\n<h2>Minimal NSAppTransportSecurity dictionary</h2>\n"
        html +=
            "<p>The smallest Info.plist fragment that lets exactly the observed traffic through, starting from the empty dictionary. Tap the box to select it all. \(minimal.roundTripVerified ? "<span class=\"badge good\">round trip verified</span>" : "<span class=\"badge bad\">round trip failed</span>")</p>\n"
        html += "<pre class=\"plist\">\(e(minimal.plist))</pre>\n"
        if !minimal.entries.isEmpty {
            html += "<ul class=\"notes\">\n"
            for entry in minimal.entries {
                for note in entry.justifications {
                    html += "<li><b>\(e(entry.key))</b>: \(e(note))</li>\n"
                }
            }
            html += "</ul>\n"
        }
        html += "<p class=\"small\">Merging rule: \(e(minimal.mergeRule))</p>\n"
        for note in minimal.notes { html += "<p class=\"small\">Note: \(e(note))</p>\n" }
        html += "</section>\n"

        if !minimal.unfixable.isEmpty {
            html +=
                "<section id=\"unfixable\">\n<h2>No Info.plist change can allow these</h2>\n<ul class=\"findings\">\n"
            for item in minimal.unfixable {
                html +=
                    "<li class=\"bad\"><b>\(e(item.host))</b> \(item.code.map { "<code>\(e($0))</code> " } ?? "")\(e(item.reason))\(item.fix.map { "<br><span class=\"fix\">Fix: \(e($0))</span>" } ?? "")</li>\n"
            }
            html += "</ul>\n</section>\n"
        }

        let comparison = document.comparison
        html += "<section id=\"comparison\">\n<h2>Compared with the loaded configuration</h2>\n"
        let groups: [(String, [ComparisonFinding])] = [
            ("Keys ignored by ATS", comparison.ignoredKeys),
            ("Over-broad keys", comparison.overBroad),
            ("Exceptions never exercised", comparison.unexercisedExceptions),
        ]
        if groups.allSatisfy({ $0.1.isEmpty }) {
            html += "<p>Nothing to report: every loaded key was used and none relaxes more than needed.</p>\n"
        }
        for (title, findings) in groups where !findings.isEmpty {
            html += "<h3>\(e(title))</h3>\n<ul class=\"findings\">\n"
            for finding in findings {
                html +=
                    "<li><code>\(e(finding.keyPath))</code><br>\(e(finding.message))\(finding.fix.map { "<br><span class=\"fix\">Fix: \(e($0))</span>" } ?? "")</li>\n"
            }
            html += "</ul>\n"
        }
        html += "</section>\n"

        html += "<section id=\"hosts\">\n<h2>Hosts, worst first</h2>\n"
        if document.hosts.isEmpty { html += "<p>No requests were recorded.</p>\n" }
        for host in document.hosts {
            html += hostCard(host)
        }
        html +=
            "</section>\n</main>\n<footer>ats-proxy session report · schema v\(document.schemaVersion)</footer>\n</body>\n</html>\n"
        return html
    }

    static func stat(_ label: String, _ value: Int, _ tone: String) -> String {
        "<div class=\"stat \(tone)\"><span class=\"n\">\(value)</span><span class=\"l\">\(label)</span></div>"
    }

    static func statusLabel(_ status: HostStatus) -> (String, String) {
        switch status {
        case .violation: ("ATS violation", "bad")
        case .clientUntrustedCA: ("client does not trust the proxy CA", "warn")
        case .trustFailure: ("trust failure", "warn")
        case .transportFailure: ("connection failure", "warn")
        case .ok: ("allowed", "good")
        }
    }

    static func hostCard(_ host: HostReport) -> String {
        let e = PlistFragmentWriter.escape
        let (label, tone) = statusLabel(host.status)
        var html = "<article class=\"host \(tone)\">\n"
        html += "<h3><span class=\"badge \(tone)\">\(label)</span> \(e(host.host))</h3>\n"
        html +=
            "<p class=\"counts\">\(host.requests) request\(host.requests == 1 ? "" : "s") · \(e(outcomeCounts(host.outcomes))) · \(e(host.schemes.joined(separator: ", "))) · \(e(host.sources.joined(separator: ", ")))\(host.routes.isEmpty ? "" : " · via " + e(host.routes.joined(separator: ", ")))</p>\n"
        if let rule = host.failedRule, !rule.isEmpty {
            html += "<p><b>Rule:</b> \(e(rule))</p>\n"
        }
        if let fix = host.fix {
            html += "<p class=\"fix\"><b>Fix:</b> \(e(fix))</p>\n"
        }
        html += "<table>\n<thead><tr><th>Outcome</th><th>Code</th><th>Count</th><th>Rule</th></tr></thead>\n<tbody>\n"
        for verdict in host.verdicts {
            let (_, verdictTone) = statusLabel(verdict.kind)
            html +=
                "<tr class=\"\(verdictTone)\"><td data-h=\"Outcome\">\(e(verdict.outcome.rawValue))</td><td data-h=\"Code\"><code>\(e(verdict.code ?? "—"))</code></td><td data-h=\"Count\">\(verdict.count)</td><td data-h=\"Rule\">\(e(verdict.rule.isEmpty ? "—" : verdict.rule))<br><span class=\"small\">\(e(verdict.exampleURL))\(verdict.exampleRoute.map { " (" + e($0) + ")" } ?? "")</span></td></tr>\n"
        }
        html += "</tbody>\n</table>\n"
        if !host.tls.isEmpty {
            html += "<dl class=\"tls\">\n"
            for tls in host.tls {
                let parts = [
                    tls.version, tls.cipher, tls.keyExchange.map { "kx \($0)" }, tls.group.map { "group \($0)" },
                    tls.leafKey.map { "leaf \($0)" },
                    tls.leafSignature, tls.chainLength.map { "chain \($0)" }, tls.alpn.map { "ALPN \($0)" },
                ].compactMap { $0 }
                html +=
                    "<dt>TLS × \(tls.count)</dt><dd>\(e(parts.joined(separator: " · ")))\(tls.leaf.map { "<br><span class=\"small\">\(e($0))</span>" } ?? "")</dd>\n"
            }
            html += "</dl>\n"
        }
        var needs: [String] = []
        if host.needs.cleartext { needs.append("cleartext HTTP") }
        if let version = host.needs.minimumTLSVersion { needs.append("minimum \(version)") }
        if host.needs.forwardSecrecyWaiver { needs.append("no forward secrecy") }
        if !needs.isEmpty { html += "<p class=\"small\">Needs: \(e(needs.joined(separator: ", ")))</p>\n" }
        if let systemServices = host.systemServices {
            html += "<p class=\"small\">System services (apart from the app's verdict): \(e(systemServices.line))</p>\n"
        }
        for assumption in host.needs.assumptions { html += "<p class=\"small\">Assumed: \(e(assumption))</p>\n" }
        if let http3 = host.http3 {
            let offer = HTTP3Advertisement(alternatives: http3.alternatives).summary
            html +=
                "<p class=\"small http3\"><b>HTTP/3 offered</b> (Alt-Svc <code>\(e(offer))</code>, \(http3.responses) response\(http3.responses == 1 ? "" : "s")): \(e(http3.note))</p>\n"
        }
        html += "</article>\n"
        return html
    }

    static let css = """

        :root { --bad: #b3261e; --warn: #8a5a00; --good: #1b6e35; --line: #d0d0d7; --soft: #f4f4f7; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.45 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: #1c1c1e; background: #fff; }
        header, main, footer { max-width: 1100px; margin: 0 auto; padding: 12px 16px; }
        h1 { font-size: 1.5em; margin: 0.3em 0; }
        h2 { font-size: 1.2em; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 1.4em; }
        h3 { font-size: 1.05em; margin: 0.2em 0 0.4em; overflow-wrap: anywhere; }
        .meta, .small, footer { color: #5f5f66; font-size: 0.85em; overflow-wrap: anywhere; }
        .totals { display: flex; flex-wrap: wrap; gap: 8px; }
        .stat { border: 1px solid var(--line); border-radius: 8px; padding: 6px 10px; min-width: 88px; background: var(--soft); }
        .stat .n { display: block; font-size: 1.4em; font-weight: 600; }
        .stat .l { font-size: 0.8em; color: #5f5f66; }
        .stat.bad .n, .bad > h3, tr.bad td:first-child { color: var(--bad); }
        .stat.warn .n { color: var(--warn); }
        .stat.good .n { color: var(--good); }
        .badge { display: inline-block; font-size: 0.75em; font-weight: 600; padding: 1px 7px; border-radius: 10px; color: #fff; background: #666; vertical-align: middle; }
        .badge.bad { background: var(--bad); } .badge.warn { background: var(--warn); } .badge.good { background: var(--good); }
        .badge.bad, .badge.warn, .badge.good { color: #fff; }
        pre.plist { background: #1e1e24; color: #e8e8ee; padding: 12px; border-radius: 8px; overflow-x: auto; font: 12.5px/1.4 ui-monospace, Menlo, Consolas, monospace; tab-size: 4; -webkit-user-select: all; user-select: all; }
        code { font: 0.9em ui-monospace, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
        ul.findings, ul.notes { padding-left: 1.1em; } ul.findings li { margin-bottom: 8px; } li.bad b { color: var(--bad); }
        .fix { color: var(--good); }
        p.alert { border: 1px solid var(--bad); border-left: 5px solid var(--bad); border-radius: 8px; padding: 8px 12px; color: var(--bad); font-weight: 600; }
        b.bad, td.bad { color: var(--bad); } b.warn, td.warn { color: var(--warn); } span.good, td.good { color: var(--good); }
        table.apptrust { margin-bottom: 8px; } table.checks td.r { white-space: nowrap; font-weight: 600; } table.checks th { white-space: nowrap; }
        article.host { border: 1px solid var(--line); border-left: 5px solid #999; border-radius: 8px; padding: 10px 12px; margin: 12px 0; break-inside: avoid; page-break-inside: avoid; }
        article.host.bad { border-left-color: var(--bad); } article.host.warn { border-left-color: var(--warn); } article.host.good { border-left-color: var(--good); }
        .counts { color: #5f5f66; font-size: 0.9em; margin: 0 0 6px; }
        table { width: 100%; border-collapse: collapse; font-size: 0.9em; }
        th, td { text-align: left; vertical-align: top; padding: 4px 6px; border-top: 1px solid var(--line); overflow-wrap: anywhere; }
        th { background: var(--soft); }
        dl.tls { margin: 8px 0 0; font-size: 0.9em; } dl.tls dt { font-weight: 600; } dl.tls dd { margin: 0 0 4px 12px; overflow-wrap: anywhere; }
        @media (max-width: 700px) {
          body { font-size: 14px; }
          header, main, footer { padding: 8px 10px; }
          .stat { min-width: 0; flex: 1 1 28%; }
          table, thead, tbody, tr, td { display: block; width: 100%; }
          thead { display: none; }
          tr { border-top: 1px solid var(--line); padding: 4px 0; }
          td { border: 0; padding: 2px 0; }
          td::before { content: attr(data-h) ": "; font-weight: 600; color: #5f5f66; }
          pre.plist { font-size: 11px; }
        }
        @media print {
          body { font-size: 10.5pt; color: #000; }
          header, main, footer { max-width: none; padding: 0; }
          pre.plist { background: #fff; color: #000; border: 1px solid #999; white-space: pre-wrap; overflow-wrap: anywhere; }
          .badge, .badge.bad, .badge.warn, .badge.good { color: #000; background: #fff !important; border: 1px solid #000; }
          .stat { background: #fff; }
          article.host, section#unfixable li { break-inside: avoid; page-break-inside: avoid; }
          h2, h3 { break-after: avoid; page-break-after: avoid; }
          a { color: #000; text-decoration: none; }
        }

        """

    /// `2 allowed · 1 network error`: the counts by outcome word, in `LoadOutcome`'s order (the same words as the
    /// log, the HAR and the live page).
    static func outcomeCounts(_ counts: [String: Int]) -> String {
        let parts = LoadOutcome.allCases.compactMap { outcome in
            counts[outcome.rawValue].map { "\($0) \(outcome.rawValue)" }
        }
        return parts.isEmpty ? "no outcome" : parts.joined(separator: " · ")
    }

}
