import ATSPolicy
import ATSTLS
import Foundation

/// Verbosity levels that follow `CFNETWORK_DIAGNOSTICS`: 0 off, 1 failures and one summary per
/// request, 2 adds `CFNetwork Diagnostics [L:N] … {` blocks for request and response, 3 adds
/// header dumps.
public enum DiagnosticsLevel: Int, Sendable, Codable, Comparable, CaseIterable {
    case off = 0
    case summary = 1
    case blocks = 2
    case headers = 3

    public static func < (lhs: DiagnosticsLevel, rhs: DiagnosticsLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Turns `RequestRecord`s into text: CFNetwork-style console output, or JSON lines.
///
/// Not thread-safe for sequence numbering (levels 2 and 3 number their blocks): the log sink keeps one
/// formatter for those levels and formats under its lock; level 1 and JSON need no numbering and are
/// formatted on copies, outside the lock.
public struct DiagnosticsFormatter: Sendable {
    public let level: DiagnosticsLevel
    public let allowSecrets: Bool
    public let timeZone: TimeZone
    /// N of `CFNetwork Diagnostics [L:N]`, a per-process sequence number.
    public private(set) var sequence = 0

    public init(level: DiagnosticsLevel, allowSecrets: Bool = false, timeZone: TimeZone = .current) {
        self.level = level
        self.allowSecrets = allowSecrets
        self.timeZone = timeZone
    }

    /// The console text for one finished request (empty at level 0).
    public mutating func text(_ record: RequestRecord) -> [String] {
        guard level > .off else { return [] }
        var lines: [String] = []
        let failed = record.result != .completed
        if failed { lines += record.consoleLines }
        if level >= .blocks {
            lines += block(
                ["Protocol Enqueue": "request \(record.method) \(record.url)"]
                    .merging(level >= .headers ? headerDump("Request", record.requestHeaders) : [:]) { $1 },
                order: ["Protocol Enqueue", "Request Headers"])
            if failed {
                lines += block(
                    [
                        "Did Fail": "(null)", "Loader": record.url,
                        "Error": record.errorCode.map { "Error Domain=kCFErrorDomainCFNetwork Code=\($0) \"(null)\"" }
                            ?? "(null)",
                        "total bytes": "\(record.bytesToClient)",
                        "total time": String(format: "%.6fs", record.durationMilliseconds / 1000),
                    ], order: ["Did Fail", "Loader", "Error", "total time", "total bytes"])
            } else {
                var fields = [
                    "Protocol Received": "request \(record.method) \(record.url)",
                    "Response": "\(record.httpProtocol.uppercased()) \(record.status.map(String.init) ?? "-")",
                    "Did Finish": "(null)", "total bytes": "\(record.bytesToClient)",
                    "total time": String(format: "%.6fs", record.durationMilliseconds / 1000),
                ]
                if level >= .headers { fields.merge(headerDump("Response", record.responseHeaders)) { $1 } }
                lines += block(
                    fields,
                    order: [
                        "Protocol Received", "Response", "Response Headers", "Did Finish", "total time", "total bytes",
                    ])
            }
        }
        let outcome = failed ? "failure" : "success"
        let status = record.status ?? -1
        lines.append(
            "[Summary] Task \(Self.consoleTaskName(record.taskID)) summary for task \(outcome) {transaction_duration_ms=\(Int(record.durationMilliseconds.rounded())), response_status=\(status), protocol=\"\(record.httpProtocol)\", request_bytes=\(record.bytesFromClient), response_bytes=\(record.bytesToClient), client=\(record.clientAddress)}"
        )
        let retry =
            record.retriedOnNewConnection == true ? " (sent again on another connection)" : ""
        let route = record.route?.textLogSuffix ?? ""
        lines.append(
            "ats-proxy: \(record.method) \(record.url)\(route) → \(explanationLine(record))\(retry)\(Self.tlsSuffix(record))"
        )
        if let pinning = record.appTrust?.pinning { lines.append(Self.pinningLine(pinning, host: record.host)) }
        if let systemServices = record.systemServices {
            lines.append("ats-proxy: system services for \(record.host): \(systemServices.line)")
        }
        if record.tls?["ct"] == CTStatus.notEvaluatedText {
            lines.append(
                "ats-proxy: \(record.host): \(CTStatus.notEvaluatedText) (the chain ends in a system root; a device checks its SCTs)"
            )
        }
        return lines
    }

    /// ` [TLSv1.3 TLS_AES_128_GCM_SHA256, group x25519]` for a record with an upstream handshake (version,
    /// suite and key-exchange group, as the JSON log, report and HAR carry them), else empty.
    static func tlsSuffix(_ record: RequestRecord) -> String {
        guard let tls = record.tls, let version = tls["version"] else { return "" }
        let suite = tls["cipher"].map { " \($0)" } ?? ""
        let group = tls["group"].map { ", group \($0)" } ?? ""
        return " [\(version)\(suite)\(group)]"
    }

    /// `--af-policy`'s verdicts for a connection's chains, in one line.
    static func pinningLine(_ pinning: AppTrustRecord.Pinning, host: String) -> String {
        func word(_ verdict: AppTrustRecord.Verdict) -> String { verdict.accepted ? "ACCEPT" : "REFUSE" }
        var line =
            "ats-proxy: app pinning for \(host) (scenario \(pinning.scenario)): real chain \(word(pinning.realChain)), "
            + "interception chain \(word(pinning.interceptionChain))"
        if !pinning.realChain.accepted { line += "; real chain: \(pinning.realChain.meaning)" }
        if !pinning.interceptionChain.accepted { line += "; interception chain: \(pinning.interceptionChain.meaning)" }
        return line
    }

    /// One JSON object (a single line) for one finished request: the record's fields and its `outcome` word.
    public func jsonLine(_ record: RequestRecord) -> String {
        let copy = record.updating { fields in
            fields.requestHeaders = SecretRedactor.redact(record.requestHeaders, allowSecrets: allowSecrets)
            fields.responseHeaders = SecretRedactor.redact(record.responseHeaders, allowSecrets: allowSecrets)
            fields.bodies = nil  // Captured bodies go to the HAR only, never to the log.
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            try container.encode(formatter.string(from: date))
        }
        guard let data = try? encoder.encode(LoggedRecord(record: copy)) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// A record as the JSON log writes it: its fields and, beside them, `outcome` (`LoadOutcome`).
    struct LoggedRecord: Encodable {
        let record: RequestRecord

        enum Keys: String, CodingKey { case outcome }

        func encode(to encoder: any Encoder) throws {
            try record.encode(to: encoder)
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(LoadOutcome(record), forKey: .outcome)
        }
    }

    /// A record's task ID (`UUID.N`) as CFNetwork's console writes it: `<UUID>.<N>`.
    static func consoleTaskName(_ taskID: String) -> String {
        guard let dot = taskID.lastIndex(of: ".") else { return "<\(taskID)>" }
        return "<\(taskID[..<dot])>.<\(taskID[taskID.index(after: dot)...])>"
    }

    /// What follows `→`: the outcome word (`LoadOutcome`), the device's code or the status, then the rule and
    /// the fix. `allowed 200 (ATS default)`, `blocked -1022: …; fix: …`, `failed -1200 [3:-9836]: …`.
    private func explanationLine(_ record: RequestRecord) -> String {
        let outcome = LoadOutcome(record)
        let fix = record.fix.map { "; fix: \($0)" } ?? ""
        // "…ATS is required (the default); fix: …", not "(the default).; fix:".
        let rule = fix.isEmpty || !record.rule.hasSuffix(".") ? record.rule : String(record.rule.dropLast())
        let code = LoadOutcome.code(of: record).map { " \($0)" } ?? ""
        let challenge = record.appTrust?.challenge.map { "\($0) " } ?? ""
        switch outcome {
        case .allowed, .allowedByException, .passthrough, .ignored:
            return "\(outcome.rawValue) \(record.status.map(String.init) ?? "-") (\(record.rule))"
        case .challengePassed:
            return "\(outcome.rawValue) (\(challenge)refused): \(record.rule)"
        case .challengeFinding:
            return "\(outcome.rawValue) (\(challenge)ACCEPTED; answered 502): \(record.rule)"
        case .reported:
            return "\(outcome.rawValue)\(code) (ATS violation, let through): \(rule)\(fix)"
        case .blocked, .failed, .networkError:
            let note = record.result == .clientUntrustedCA ? " (\(SessionStats.clientUntrustedCALine))" : ""
            return "\(outcome.rawValue)\(code)\(note): \(rule)\(fix)"
        }
    }

    private func headerDump(_ label: String, _ fields: [RequestRecord.HeaderField]) -> [String: String] {
        let redacted = SecretRedactor.redact(fields, allowSecrets: allowSecrets)
        let body = redacted.map { "\($0.name): \($0.value)" }.joined(separator: "\n\t\t")
        return ["\(label) Headers": "dict [\(redacted.count)] {\n\t\t\(body)\n\t}"]
    }

    /// `CFNetwork Diagnostics [L:N] HH:MM:SS.mmm {` … `} [L:N]`.
    private mutating func block(_ fields: [String: String], order: [String]) -> [String] {
        sequence += 1
        let tag = "[\(level.rawValue):\(sequence)]"
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let now = calendar.dateComponents([.hour, .minute, .second, .nanosecond], from: Date())
        let clock = String(
            format: "%02d:%02d:%02d.%03d", now.hour ?? 0, now.minute ?? 0, now.second ?? 0,
            (now.nanosecond ?? 0) / 1_000_000)
        let width = order.filter { fields[$0] != nil }.map(\.count).max() ?? 0
        var lines = ["CFNetwork Diagnostics \(tag) \(clock) {"]
        for key in order {
            guard let value = fields[key] else { continue }
            lines.append("\t" + String(repeating: " ", count: width - key.count) + "\(key): \(value)")
        }
        lines.append("} \(tag)")
        return lines
    }
}
