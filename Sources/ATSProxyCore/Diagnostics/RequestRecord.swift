import ATSPolicy
import ATSTLS
import Foundation

/// Everything the proxy knows about one request once it has finished: the values the
/// CFNetwork-style formatter and the JSON-lines formatter turn into text. Built by the core,
/// never formatted by it.
///
/// A value type whose fields live in one shared, immutable storage object: a record passes from the
/// session through the driver to the log sink and its observers, and each copy costs one reference
/// count instead of one per string and array in it. Setting a field makes new storage.
@dynamicMemberLookup
public struct RequestRecord: Sendable, Codable {
    /// The outcome class of the request.
    public enum Result: String, Sendable, Codable {
        /// Forwarded and answered by the origin.
        case completed
        /// Blocked by policy before contacting the origin (-1022).
        case blockedCleartext = "blocked-cleartext"
        /// Failed upstream: TLS verdict or connection fault.
        case failed
        /// Refused by the proxy before any origin was contacted, for a reason that is not ATS's: a target on the
        /// proxy's own machine for a client elsewhere (-1004), a request inside a tunnel for another origin
        /// (-1004), a scheme that is not proxied (-1002).
        case refused
        /// Violated ATS but let through (`--mode report`).
        case reported
        /// The client refused the proxy's certificate in the TLS handshake: the proxy CA is not trusted where the
        /// client looks for trust anchors. A set-up failure of the test environment, not an ATS verdict.
        case clientUntrustedCA = "client-untrusted-ca"
        /// `--challenge`: the client refused the deliberately unacceptable TLS the proxy presented (the handshake
        /// failed, or it closed without a request): the expected result, a pass for that kind.
        case challengeRefused = "challenge-refused"
        /// `--challenge`: the client completed a handshake it should have refused and sent a request through it
        /// (answered 502, never forwarded): its trust evaluation is disabled or overridden. A finding.
        case challengeAccepted = "challenge-accepted"
    }

    /// The fields, stored once and shared by every copy. Read and set them on the record itself
    /// (`record.host`, through `subscript(dynamicMember:)`); setting one makes new storage.
    public struct Fields: Sendable, Codable {
        public var time: Date
        public var clientAddress: String
        /// `UUID.N` (e.g. `78773CCC-….1`): one UUID per client connection, N counting its requests. The
        /// console lines write it as CFNetwork does, `<UUID>.<N>`.
        public var taskID: String
        public var method: String
        public var url: String
        /// The host of `url`, as the policy saw it (lower-cased, no brackets).
        public var host: String
        public var httpProtocol: String
        public var source: RequestSource
        public var result: Result
        public var atsRequired: Bool
        public var ruleChain: [String]
        public var rule: String
        public var fix: String?
        public var errorCode: Int?
        /// The stream error CFNetwork would attach (`3:-9836`); nil when the load has none.
        public var streamError: StreamError?
        public var status: Int?
        /// Negotiated TLS facts, when there was an upstream handshake (version, cipher, leaf, …).
        public var tls: [String: String]?
        public var requestHeaders: [HeaderField]
        public var responseHeaders: [HeaderField]
        public var bytesFromClient: Int
        public var bytesToClient: Int
        public var durationMilliseconds: Double
        /// The CFNetwork console lines of the outcome (already formatted for the emulated OS).
        public var consoleLines: [String]
        /// True when the request was sent a second time, on another connection, because the reused one closed
        /// before any of the response arrived, or because the origin reset its HTTP/2 stream with HTTP_1_1_REQUIRED
        /// and it went again over HTTP/1.1 (absent otherwise).
        public var retriedOnNewConnection: Bool?
        /// When the phases of the exchange ended, for the live view and the HAR (nil unless asked for:
        /// `ProxySettings.detailedRecords`).
        public var timings: Timings?
        /// The first bytes of the request and response bodies (nil unless `--capture-bodies`).
        public var bodies: Bodies?
        /// The IP address (no port, IPv6 without brackets) of the peer of the upstream TCP connection that
        /// carried the request: the origin, or the `--upstream-proxy` when there is one (as browsers report it).
        /// Nil when the request reached no upstream (answered locally, blocked, the connection failed).
        public var serverAddress: String?
        /// The app's own trust decisions for this connection (`--challenge`, `--af-policy`); nil otherwise.
        public var appTrust: AppTrustRecord?
        /// `--system-services-hosts`: the iOS/macOS 27 system-services verdict for this host's server, apart
        /// from (never changing) the app's ATS result; nil for other hosts.
        public var systemServices: SystemServicesVerdict?
        /// How the load reached the proxy (`absolute-form`, `CONNECT+TLS`, `CONNECT+HTTP`, …); nil only in records
        /// read from logs written before routes were recorded.
        public var route: ProxyRoute?
        /// The origin's response offered HTTP/3 (`Alt-Svc: h3…`); nil otherwise (no offer, `clear`, malformed).
        public var http3: HTTP3Advertisement?
    }

    /// Milliseconds from the request's start to the end of each phase; nil for a phase that did not
    /// happen for this request (no upstream, a reused connection, no TLS, no response).
    public struct Timings: Sendable, Codable, Equatable {
        /// The upstream connection was asked for.
        public var connectStart: Double?
        /// The upstream TCP connection was open.
        public var connected: Double?
        /// The upstream TLS handshake was complete.
        public var secured: Double?
        /// The first byte of the response arrived.
        public var firstByte: Double?

        public init(
            connectStart: Double? = nil, connected: Double? = nil, secured: Double? = nil, firstByte: Double? = nil
        ) {
            self.connectStart = connectStart
            self.connected = connected
            self.secured = secured
            self.firstByte = firstByte
        }
    }

    /// The first bytes of a request's and its response's bodies, as relayed (de-chunked, still in
    /// their content coding), and whether more followed.
    public struct Bodies: Sendable, Codable, Equatable {
        public var request: [UInt8]
        public var requestTruncated: Bool
        public var response: [UInt8]
        public var responseTruncated: Bool

        public init(request: [UInt8], requestTruncated: Bool, response: [UInt8], responseTruncated: Bool) {
            self.request = request
            self.requestTruncated = requestTruncated
            self.response = response
            self.responseTruncated = responseTruncated
        }
    }

    /// Immutable: shared by every copy of one record.
    @usableFromInline final class Storage: Sendable {
        @usableFromInline let fields: Fields
        @usableFromInline init(_ fields: Fields) { self.fields = fields }
    }

    @usableFromInline var storage: Storage

    /// Every field, read from the shared storage; setting one gives this value storage of its own (to
    /// change several, use `updating`).
    @inlinable public subscript<Value>(dynamicMember field: WritableKeyPath<Fields, Value>) -> Value {
        get { storage.fields[keyPath: field] }
        set { self = updating { $0[keyPath: field] = newValue } }
    }

    /// A copy with the fields `change` sets, in one new storage.
    @inlinable public func updating(_ change: (inout Fields) -> Void) -> RequestRecord {
        var fields = storage.fields
        change(&fields)
        var copy = self
        copy.storage = Storage(fields)
        return copy
    }

    public init(from decoder: any Decoder) throws { storage = Storage(try Fields(from: decoder)) }

    public func encode(to encoder: any Encoder) throws { try storage.fields.encode(to: encoder) }

    /// One header field, as parsed (so that a record shares the request's field array instead of
    /// copying it); formatters redact the values of secret-bearing fields unless asked.
    public typealias HeaderField = HTTPField

    public init(
        time: Date, clientAddress: String, taskID: String, method: String, url: String, host: String? = nil,
        httpProtocol: String,
        source: RequestSource, result: Result, atsRequired: Bool, ruleChain: [String], rule: String, fix: String? = nil,
        errorCode: Int? = nil, streamError: StreamError? = nil, status: Int? = nil, tls: [String: String]? = nil,
        requestHeaders: [HeaderField] = [], responseHeaders: [HeaderField] = [], bytesFromClient: Int = 0,
        bytesToClient: Int = 0, durationMilliseconds: Double = 0, consoleLines: [String] = [],
        retriedOnNewConnection: Bool? = nil, timings: Timings? = nil, bodies: Bodies? = nil,
        serverAddress: String? = nil, appTrust: AppTrustRecord? = nil, systemServices: SystemServicesVerdict? = nil,
        route: ProxyRoute? = nil, http3: HTTP3Advertisement? = nil
    ) {
        storage = Storage(
            Fields(
                time: time, clientAddress: clientAddress, taskID: taskID, method: method, url: url,
                host: host ?? RequestTarget.hostOf(url), httpProtocol: httpProtocol, source: source, result: result,
                atsRequired: atsRequired, ruleChain: ruleChain, rule: rule, fix: fix, errorCode: errorCode,
                streamError: streamError, status: status, tls: tls, requestHeaders: requestHeaders,
                responseHeaders: responseHeaders, bytesFromClient: bytesFromClient, bytesToClient: bytesToClient,
                durationMilliseconds: durationMilliseconds, consoleLines: consoleLines,
                retriedOnNewConnection: retriedOnNewConnection, timings: timings, bodies: bodies,
                serverAddress: serverAddress, appTrust: appTrust, systemServices: systemServices, route: route,
                http3: http3))
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
