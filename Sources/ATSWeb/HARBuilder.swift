import ATSProxyCore
import Foundation

/// Turns flows into a HAR 1.2 archive. Header values that carry secrets (Authorization,
/// Proxy-Authorization, Cookie, Set-Cookie) are redacted as in the log unless `allowSecrets`
/// (`--log-secrets`); cookies are listed only when secrets are allowed. Pure.
public struct HARBuilder: Sendable {
    public var allowSecrets: Bool
    public var creatorVersion: String

    public init(allowSecrets: Bool, creatorVersion: String) {
        self.allowSecrets = allowSecrets
        self.creatorVersion = creatorVersion
    }

    /// The archive of `flows`, in their order.
    public func archive(_ flows: [Flow]) -> HARArchive {
        HARArchive(
            log: HARArchive.Log(
                creator: HARArchive.Creator(name: "ats-proxy", version: creatorVersion),
                entries: flows.map { entry($0.record) },
                comment: "Recorded by ats-proxy; _ats* fields give the App Transport Security verdict."))
    }

    /// The archive as JSON bytes (sorted keys, so equal sessions give equal files).
    public func data(_ flows: [Flow]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(archive(flows))
    }

    /// Writes the archive of `flows` to `path` atomically (a temporary file renamed over it).
    public func write(_ flows: [Flow], to path: String) throws {
        try data(flows).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// One entry. The record keeps the status code but not the reason phrase, so `statusText` is
    /// empty (as DevTools writes it for HTTP/2).
    func entry(_ record: RequestRecord) -> HARArchive.Entry {
        let version = Self.httpVersion(record.httpProtocol)
        let requestHeaders = SecretRedactor.redact(record.requestHeaders, allowSecrets: allowSecrets)
        let responseHeaders = SecretRedactor.redact(record.responseHeaders, allowSecrets: allowSecrets)
        let timings = Self.timings(record)
        let status = record.status ?? 0
        let contentType = record.responseHeaders.first { $0.name.lowercased() == "content-type" }?.value
        let location = record.responseHeaders.first { $0.name.lowercased() == "location" }?.value
        let request = HARArchive.Request(
            method: record.method, url: record.url, httpVersion: version,
            cookies: allowSecrets ? Self.requestCookies(record.requestHeaders) : [],
            headers: requestHeaders.map { HARArchive.NameValue(name: $0.name, value: $0.value) },
            queryString: Self.query(record.url),
            postData: Self.postData(record.bodies, type: Self.field("content-type", record.requestHeaders)),
            headersSize: -1, bodySize: record.bytesFromClient)
        let response = HARArchive.Response(
            status: status, statusText: "", httpVersion: status == 0 ? "" : version,
            cookies: [],
            headers: responseHeaders.map { HARArchive.NameValue(name: $0.name, value: $0.value) },
            content: Self.content(record, mimeType: contentType ?? "x-unknown"),
            redirectURL: location ?? "", headersSize: -1, bodySize: status == 0 ? -1 : record.bytesToClient)
        let taskID = record.taskID
        return HARArchive.Entry(
            startedDateTime: Self.timestamp(record.time),
            time: Self.milliseconds(
                [timings.blocked, timings.dns, timings.connect, timings.send, timings.wait, timings.receive]
                    .filter { $0 > 0 }.reduce(0, +)),
            request: request, response: response, cache: HARArchive.Cache(), timings: timings,
            serverIPAddress: record.serverAddress,
            connection: taskID.components(separatedBy: ">.<").first,
            comment: nil,
            _atsOutcome: LoadOutcome(record).rawValue, _atsCode: LoadOutcome.code(of: record), _atsRule: record.rule,
            _atsRuleChain: record.ruleChain, _atsFix: record.fix, _tls: record.tls,
            _atsSource: record.source.rawValue, _atsConsole: record.consoleLines.isEmpty ? nil : record.consoleLines,
            _atsRoute: record.route?.rawValue)
    }

    /// The value of the first header field `name` (lower-case).
    static func field(_ name: String, _ fields: [RequestRecord.HeaderField]) -> String? {
        fields.first { $0.name.lowercased() == name }?.value
    }

    /// Text when `bytes` are UTF-8 and the type looks textual; base64 otherwise.
    static func encode(_ bytes: [UInt8], type: String?) -> (text: String, base64: Bool) {
        let textual =
            type.map { type in
                let lower = type.lowercased()
                return lower.hasPrefix("text/") || lower.contains("json") || lower.contains("xml")
                    || lower.contains("javascript") || lower.contains("x-www-form-urlencoded")
            } ?? false
        if textual, let text = String(validating: bytes, as: UTF8.self) { return (text, false) }
        return (Data(bytes).base64EncodedString(), true)
    }

    /// The request body as HAR `postData` (nil without captured bytes).
    static func postData(_ bodies: RequestRecord.Bodies?, type: String?) -> HARArchive.PostData? {
        guard let bodies, !bodies.request.isEmpty else { return nil }
        let (text, base64) = encode(bodies.request, type: type)
        return HARArchive.PostData(
            mimeType: type ?? "application/octet-stream", text: text, _encoding: base64 ? "base64" : nil,
            comment: bodies.requestTruncated ? "first \(bodies.request.count) bytes (--capture-bodies)" : nil)
    }

    /// The response content, with the captured body as `text` (base64 when not text).
    static func content(_ record: RequestRecord, mimeType: String) -> HARArchive.Content {
        guard let bodies = record.bodies, !bodies.response.isEmpty else {
            return HARArchive.Content(size: record.bytesToClient, mimeType: mimeType, text: nil, encoding: nil)
        }
        let (text, base64) = encode(bodies.response, type: mimeType)
        return HARArchive.Content(
            size: record.bytesToClient, mimeType: mimeType, text: text, encoding: base64 ? "base64" : nil,
            comment: bodies.responseTruncated ? "first \(bodies.response.count) bytes (--capture-bodies)" : nil)
    }

    /// HAR timings from the record's phase ends: `blocked` until the upstream was asked for, `connect`
    /// (TCP and TLS, as HAR counts it) and `ssl` for a new upstream connection, `wait` until the first
    /// response byte, `receive` for the rest. DNS is inside `connect` (the resolver is not timed on its
    /// own), so it is -1, as are the phases of a reused connection. Without timings (or a response),
    /// the time after the last known phase is `wait`. The non-negative phases add up to the total.
    static func timings(_ record: RequestRecord) -> HARArchive.Timings {
        let total = max(0, record.durationMilliseconds)
        let phases = record.timings ?? RequestRecord.Timings()
        func span(_ from: Double?, _ to: Double?) -> Double {
            guard let from, let to else { return -1 }
            return max(0, min(to, total) - min(from, total))
        }
        let connectEnd = phases.secured ?? phases.connected
        let waitStart = connectEnd ?? phases.connectStart ?? 0
        let blocked = phases.connectStart.map { min($0, total) } ?? -1
        let connect = span(phases.connectStart, connectEnd)
        let ssl = span(phases.connected, phases.secured)
        let wait = phases.firstByte.map { max(0, min($0, total) - min(waitStart, total)) } ?? max(0, total - waitStart)
        let receive = phases.firstByte.map { max(0, total - min($0, total)) } ?? 0
        return HARArchive.Timings(
            blocked: milliseconds(blocked), dns: -1, connect: milliseconds(connect), send: 0, wait: milliseconds(wait),
            receive: milliseconds(receive), ssl: milliseconds(ssl))
    }

    /// `value` rounded to the microsecond, so that sums and differences of phase ends are written as `1.1`, not
    /// `1.0999999999999999` (the nearest double to a three-decimal number prints as that number).
    static func milliseconds(_ value: Double) -> Double {
        (value * 1000).rounded() / 1000
    }

    /// `HTTP/1.1` or `HTTP/2.0` (what DevTools writes) from the record's `http/1.1` or `h2`.
    static func httpVersion(_ name: String) -> String {
        switch name.lowercased() {
        case "h2", "http/2", "http/2.0": return "HTTP/2.0"
        case "http/1.0": return "HTTP/1.0"
        default: return "HTTP/1.1"
        }
    }

    /// The query parameters of `url`, percent-decoded, in order.
    static func query(_ url: String) -> [HARArchive.NameValue] {
        guard let items = URLComponents(string: url)?.queryItems else { return [] }
        return items.map { HARArchive.NameValue(name: $0.name, value: $0.value ?? "") }
    }

    /// The cookies of the request's Cookie fields.
    static func requestCookies(_ fields: [RequestRecord.HeaderField]) -> [HARArchive.Cookie] {
        fields.filter { $0.name.lowercased() == "cookie" }.flatMap { field in
            field.value.split(separator: ";").compactMap { pair -> HARArchive.Cookie? in
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard let name = parts.first?.trimmingCharacters(in: .whitespaces), !name.isEmpty else { return nil }
                return HARArchive.Cookie(name: name, value: parts.count > 1 ? String(parts[1]) : "")
            }
        }
    }

    /// ISO 8601 with milliseconds, UTC.
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
