import ATSPolicy
import Foundation

/// Everything the proxy knows about one request once it has finished: the values the
/// CFNetwork-style formatter and the JSON-lines formatter turn into text. Built by the core,
/// never formatted by it.
///
/// A value type whose fields live in one shared, immutable storage object: a record passes from the
/// session through the driver to the log sink and its observers, and each copy costs one reference
/// count instead of one per string and array in it. Setting a field makes new storage.
public struct RequestRecord: Sendable, Codable {
    /// The outcome class of the request.
    public enum Result: String, Sendable, Codable {
        /// Forwarded and answered by the origin.
        case completed
        /// Blocked by policy before contacting the origin (-1022).
        case blockedCleartext = "blocked-cleartext"
        /// Failed upstream: TLS verdict or connection fault.
        case failed
        /// Violated ATS but let through (`--mode report`).
        case reported
    }

    /// The fields, stored once.
    struct Fields: Sendable, Codable {
        var time: Date
        var clientAddress: String
        /// `<UUID>.<N>`: one UUID per client connection, N counting its requests.
        var taskID: String
        var method: String
        var url: String
        /// The host of `url`, as the policy saw it (lower-cased, no brackets).
        var host: String
        var httpProtocol: String
        var source: RequestSource
        var result: Result
        var atsRequired: Bool
        var ruleChain: [String]
        var rule: String
        var fix: String?
        var errorCode: Int?
        var streamError: String?
        var status: Int?
        /// Negotiated TLS facts, when there was an upstream handshake (version, cipher, leaf, …).
        var tls: [String: String]?
        var requestHeaders: [HeaderField]
        var responseHeaders: [HeaderField]
        var bytesFromClient: Int
        var bytesToClient: Int
        var durationMilliseconds: Double
        /// The CFNetwork console lines of the outcome (already formatted for the emulated OS).
        var consoleLines: [String]
        /// True when the request was sent a second time, on another connection, because the reused one closed
        /// before any of the response arrived, or because the origin reset its HTTP/2 stream with HTTP_1_1_REQUIRED
        /// and it went again over HTTP/1.1 (absent otherwise).
        var retriedOnNewConnection: Bool?
    }

    /// Immutable: shared by every copy of one record.
    final class Storage: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var storage: Storage

    public var time: Date {
        get { storage.fields.time }
        set { update { $0.time = newValue } }
    }
    public var clientAddress: String {
        get { storage.fields.clientAddress }
        set { update { $0.clientAddress = newValue } }
    }
    /// `<UUID>.<N>`: one UUID per client connection, N counting its requests.
    public var taskID: String {
        get { storage.fields.taskID }
        set { update { $0.taskID = newValue } }
    }
    public var method: String {
        get { storage.fields.method }
        set { update { $0.method = newValue } }
    }
    public var url: String {
        get { storage.fields.url }
        set { update { $0.url = newValue } }
    }
    /// The host of `url`, as the policy saw it (lower-cased, no brackets).
    public var host: String {
        get { storage.fields.host }
        set { update { $0.host = newValue } }
    }
    public var httpProtocol: String {
        get { storage.fields.httpProtocol }
        set { update { $0.httpProtocol = newValue } }
    }
    public var source: RequestSource {
        get { storage.fields.source }
        set { update { $0.source = newValue } }
    }
    public var result: Result {
        get { storage.fields.result }
        set { update { $0.result = newValue } }
    }
    public var atsRequired: Bool {
        get { storage.fields.atsRequired }
        set { update { $0.atsRequired = newValue } }
    }
    public var ruleChain: [String] {
        get { storage.fields.ruleChain }
        set { update { $0.ruleChain = newValue } }
    }
    public var rule: String {
        get { storage.fields.rule }
        set { update { $0.rule = newValue } }
    }
    public var fix: String? {
        get { storage.fields.fix }
        set { update { $0.fix = newValue } }
    }
    public var errorCode: Int? {
        get { storage.fields.errorCode }
        set { update { $0.errorCode = newValue } }
    }
    public var streamError: String? {
        get { storage.fields.streamError }
        set { update { $0.streamError = newValue } }
    }
    public var status: Int? {
        get { storage.fields.status }
        set { update { $0.status = newValue } }
    }
    /// Negotiated TLS facts, when there was an upstream handshake (version, cipher, leaf, …).
    public var tls: [String: String]? {
        get { storage.fields.tls }
        set { update { $0.tls = newValue } }
    }
    public var requestHeaders: [HeaderField] {
        get { storage.fields.requestHeaders }
        set { update { $0.requestHeaders = newValue } }
    }
    public var responseHeaders: [HeaderField] {
        get { storage.fields.responseHeaders }
        set { update { $0.responseHeaders = newValue } }
    }
    public var bytesFromClient: Int {
        get { storage.fields.bytesFromClient }
        set { update { $0.bytesFromClient = newValue } }
    }
    public var bytesToClient: Int {
        get { storage.fields.bytesToClient }
        set { update { $0.bytesToClient = newValue } }
    }
    public var durationMilliseconds: Double {
        get { storage.fields.durationMilliseconds }
        set { update { $0.durationMilliseconds = newValue } }
    }
    /// The CFNetwork console lines of the outcome (already formatted for the emulated OS).
    public var consoleLines: [String] {
        get { storage.fields.consoleLines }
        set { update { $0.consoleLines = newValue } }
    }
    /// True when the request was sent a second time, on another connection, because the reused one closed
    /// before any of the response arrived, or because the origin reset its HTTP/2 stream with HTTP_1_1_REQUIRED
    /// and it went again over HTTP/1.1 (absent otherwise).
    public var retriedOnNewConnection: Bool? {
        get { storage.fields.retriedOnNewConnection }
        set { update { $0.retriedOnNewConnection = newValue } }
    }

    private mutating func update(_ change: (inout Fields) -> Void) {
        var fields = storage.fields
        change(&fields)
        storage = Storage(fields)
    }

    public init(from decoder: any Decoder) throws { storage = Storage(try Fields(from: decoder)) }

    public func encode(to encoder: any Encoder) throws { try storage.fields.encode(to: encoder) }

    /// One header field, as parsed (so that a record shares the request's field array instead of
    /// copying it); formatters redact the values of secret-bearing fields unless asked.
    public typealias HeaderField = HTTP1Field

    public init(
        time: Date, clientAddress: String, taskID: String, method: String, url: String, host: String? = nil,
        httpProtocol: String,
        source: RequestSource, result: Result, atsRequired: Bool, ruleChain: [String], rule: String, fix: String? = nil,
        errorCode: Int? = nil, streamError: String? = nil, status: Int? = nil, tls: [String: String]? = nil,
        requestHeaders: [HeaderField] = [], responseHeaders: [HeaderField] = [], bytesFromClient: Int = 0,
        bytesToClient: Int = 0, durationMilliseconds: Double = 0, consoleLines: [String] = [],
        retriedOnNewConnection: Bool? = nil
    ) {
        storage = Storage(
            Fields(
                time: time, clientAddress: clientAddress, taskID: taskID, method: method, url: url,
                host: host ?? RequestTarget.hostOf(url), httpProtocol: httpProtocol, source: source, result: result,
                atsRequired: atsRequired, ruleChain: ruleChain, rule: rule, fix: fix, errorCode: errorCode,
                streamError: streamError, status: status, tls: tls, requestHeaders: requestHeaders,
                responseHeaders: responseHeaders, bytesFromClient: bytesFromClient, bytesToClient: bytesToClient,
                durationMilliseconds: durationMilliseconds, consoleLines: consoleLines,
                retriedOnNewConnection: retriedOnNewConnection))
    }
}

/// Replaces the values of Authorization, Proxy-Authorization, Cookie and Set-Cookie with
/// `<redacted N bytes>` unless secrets are explicitly allowed (`--log-secrets`).
public enum SecretRedactor {
    static let secretNames: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]

    public static func redact(_ fields: [RequestRecord.HeaderField], allowSecrets: Bool) -> [RequestRecord.HeaderField]
    {
        guard !allowSecrets else { return fields }
        return fields.map { field in
            guard secretNames.contains(field.name.lowercased()) else { return field }
            return RequestRecord.HeaderField(name: field.name, value: "<redacted \(field.value.utf8.count) bytes>")
        }
    }
}

extension RequestTarget {
    /// The host of an absolute URL, or the URL itself when it cannot be parsed.
    static func hostOf(_ url: String) -> String {
        (try? RequestTarget(parsing: url))?.host ?? url
    }
}
