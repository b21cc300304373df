import Foundation

/// The web view's read-only JSON API over the flow ring, for programs (the MCP server) rather than the page:
///
/// - `GET /api/flows?host=&outcome=&code=&source=&text=&violations=1&limit=N`: the newest `limit` (default 100,
///   at most 1,000) flows that pass the page's filters (`FlowFilter`), oldest first, with how many the ring
///   holds and how many matched;
/// - `GET /api/flows/ID`: one flow.
///
/// Each flow is the page's `FlowView`: verdict, rule, rule chain, fix, TLS facts, console lines, and headers
/// redacted as the log redacts them (unless `--log-secrets`). Runs on the web loop when asked; nothing on the
/// request path.
struct FlowAPI {
    let store: FlowStore
    let allowSecrets: Bool

    /// The answer to one API request.
    struct Listing: Encodable {
        var held: Int
        var matched: Int
        var flows: [FlowView]
    }

    static let defaultLimit = 100
    static let maximumLimit = 1_000

    func respond(path: String, query: String) -> WebResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        if path == "/api/flows" {
            let filter = FlowFilter(query: query)
            let limit = Self.limit(in: query)
            let flows = store.flows()
            let views = flows.map { FlowView($0, allowSecrets: allowSecrets) }.filter(filter.matches)
            return json(encoder, Listing(held: flows.count, matched: views.count, flows: Array(views.suffix(limit))))
        }
        let idText = path.dropFirst("/api/flows/".count)
        guard let id = Int(idText), id > 0 else {
            return .text(404, "Not Found", "ats-proxy web view: no such flow\n")
        }
        guard let flow = store.flows(after: id - 1, limit: 1).first, flow.id == id else {
            return .text(404, "Not Found", "ats-proxy web view: flow \(id) is not (or no longer) in the ring\n")
        }
        return json(encoder, FlowView(flow, allowSecrets: allowSecrets))
    }

    /// `limit=N` of the query, clamped to 1...maximumLimit.
    static func limit(in query: String) -> Int {
        var components = URLComponents()
        components.percentEncodedQuery = query
        let value = components.queryItems?.first { $0.name == "limit" }?.value.flatMap { Int($0) }
        return min(max(value ?? defaultLimit, 1), maximumLimit)
    }

    private func json(_ encoder: JSONEncoder, _ value: some Encodable) -> WebResponse {
        guard let data = try? encoder.encode(value) else {
            return .text(500, "Internal Server Error", "ats-proxy web view: cannot encode the answer\n")
        }
        return WebResponse(status: 200, reason: "OK", contentType: "application/json", body: Array(data))
    }
}
