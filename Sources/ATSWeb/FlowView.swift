import ATSProxyCore
import Foundation

/// What the live page shows of one flow: the row (time, source, method, URL, protocol, status,
/// outcome, code, duration, sizes) and the detail pane (headers redacted unless `--log-secrets`,
/// rule chain, rule, fix, TLS facts, console lines). Encoded as the `data` of one SSE event.
struct FlowView: Encodable {
    var id: Int
    var time: String
    var client: String
    var task: String
    var source: String
    var method: String
    var url: String
    var host: String
    var proto: String
    /// How the load reached the proxy (`ProxyRoute` raw value), when its record names one.
    var route: String?
    var status: Int?
    /// The `LoadOutcome` word.
    var outcome: String
    var code: String?
    /// Whether the load broke ATS (`LoadOutcome.breaksATS`): what "violations only" shows and counts.
    var violation: Bool
    var ms: Double
    var up: Int
    var down: Int
    var atsRequired: Bool
    var ruleChain: [String]
    var rule: String
    var fix: String?
    var tls: [String: String]?
    var requestHeaders: [[String]]
    var responseHeaders: [[String]]
    var console: [String]
    var retried: Bool
    var timings: RequestRecord.Timings?
    /// The origin's HTTP/3 offer (`Alt-Svc: h3…`) and what it means; nil without one.
    var http3: HTTP3?

    /// The detail pane's HTTP/3 section.
    struct HTTP3: Encodable {
        /// The offer as the origin wrote it, trimmed to the HTTP/3 alternatives (`h3=":443"; ma=86400`).
        var offer: String
        var note: String
    }

    init(_ flow: Flow, allowSecrets: Bool) {
        let record = flow.record
        id = flow.id
        time = record.time.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        client = record.clientAddress
        task = "<\(record.taskID)>"
        source = record.source.rawValue
        method = record.method
        url = record.url
        host = record.host
        proto = record.httpProtocol
        route = record.route?.rawValue
        status = record.status
        outcome = LoadOutcome(record).rawValue
        code = LoadOutcome.code(of: record)
        violation = LoadOutcome.breaksATS(record)
        ms = (record.durationMilliseconds * 10).rounded() / 10
        up = record.bytesFromClient
        down = record.bytesToClient
        atsRequired = record.atsRequired
        ruleChain = record.ruleChain
        rule = record.rule
        fix = record.fix
        tls = record.tls
        requestHeaders = SecretRedactor.redact(record.requestHeaders, allowSecrets: allowSecrets).map {
            [$0.name, $0.value]
        }
        responseHeaders = SecretRedactor.redact(record.responseHeaders, allowSecrets: allowSecrets).map {
            [$0.name, $0.value]
        }
        console = record.consoleLines
        retried = record.retriedOnNewConnection ?? false
        timings = record.timings
        http3 = record.http3.map { HTTP3(offer: $0.summary, note: HTTP3Advertisement.note) }
    }

    /// The SSE event for `flow`: `id`, then one `data` line of JSON (JSON never contains a raw newline).
    static func event(_ flow: Flow, allowSecrets: Bool, encoder: JSONEncoder) -> [UInt8] {
        let json = (try? encoder.encode(FlowView(flow, allowSecrets: allowSecrets))) ?? Data("{}".utf8)
        return Array("id: \(flow.id)\ndata: ".utf8) + Array(json) + Array("\n\n".utf8)
    }
}
