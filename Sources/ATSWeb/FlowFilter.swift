import ATSProxyCore
import Foundation

/// The live page's filters (host, outcome, code, source, free text, violations only) as a value, for the
/// JSON API (`/api/flows`) that the MCP server reads. It matches exactly what the page's `matches()` matches:
/// host and code by substring, outcome and source by equality, the free text by substring (case-insensitive)
/// of URL, method, rule, fix, code, outcome, status and rule chain. Empty fields match everything.
public struct FlowFilter: Sendable, Equatable {
    public var host = ""
    public var outcome = ""
    public var code = ""
    public var source = ""
    public var text = ""
    public var violationsOnly = false

    public init() {}

    /// The filter of a query string (`host=api&outcome=blocked&violations=1`); unknown names are ignored.
    public init(query: String) {
        var components = URLComponents()
        components.percentEncodedQuery = query
        for item in components.queryItems ?? [] {
            let value = (item.value ?? "").trimmingCharacters(in: .whitespaces)
            switch item.name {
            case "host": host = value
            case "outcome": outcome = value
            case "code": code = value
            case "source": source = value
            case "text": text = value
            case "violations": violationsOnly = value == "1" || value == "true"
            default: continue
            }
        }
    }

    /// The query string that `init(query:)` reads back as this filter (empty fields left out).
    public var query: String {
        var components = URLComponents()
        var items: [URLQueryItem] = []
        for (name, value) in [("host", host), ("outcome", outcome), ("code", code), ("source", source), ("text", text)]
        where !value.isEmpty {
            items.append(URLQueryItem(name: name, value: value))
        }
        if violationsOnly { items.append(URLQueryItem(name: "violations", value: "1")) }
        components.queryItems = items
        return components.percentEncodedQuery ?? ""
    }

    /// Whether `view` passes every filter.
    func matches(_ view: FlowView) -> Bool {
        if !host.isEmpty && !view.host.lowercased().contains(host.lowercased()) { return false }
        if !outcome.isEmpty && view.outcome != outcome { return false }
        if !code.isEmpty && !(view.code ?? "").contains(code) { return false }
        if !source.isEmpty && view.source != source { return false }
        if violationsOnly && !view.violation { return false }
        if !text.isEmpty {
            let haystack = [
                view.url, view.method, view.rule, view.fix ?? "", view.code ?? "", view.outcome,
                view.status.map(String.init) ?? "", view.ruleChain.joined(separator: " "),
            ].joined(separator: " ").lowercased()
            if !haystack.contains(text.lowercased()) { return false }
        }
        return true
    }
}
