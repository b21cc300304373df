/// An HTTP Archive 1.2 document (the `log` object and what it holds), as Chrome DevTools, Charles
/// and Proxyman read it. Field names are the specification's; fields starting with `_` are this
/// proxy's custom fields (HAR allows them), carrying the ATS verdict. Plain values; encoded with
/// `JSONEncoder`.
public struct HARArchive: Sendable, Codable, Equatable {
    public var log: Log

    /// The root object.
    public struct Log: Sendable, Codable, Equatable {
        public var version = "1.2"
        public var creator: Creator
        public var entries: [Entry]
        public var comment: String?
    }

    /// The application that wrote the file.
    public struct Creator: Sendable, Codable, Equatable {
        public var name: String
        public var version: String
    }

    /// One request and its response.
    public struct Entry: Sendable, Codable, Equatable {
        /// ISO 8601 with milliseconds and time zone.
        public var startedDateTime: String
        /// Total milliseconds (the sum of the non-negative timings).
        public var time: Double
        public var request: Request
        public var response: Response
        public var cache: Cache
        public var timings: Timings
        public var serverIPAddress: String?
        /// The client connection's task id prefix (`<UUID>`), shared by requests on one connection.
        public var connection: String?
        public var comment: String?
        /// The outcome word (`LoadOutcome`): allowed, allowed by exception, blocked, failed, network error,
        /// reported, passthrough, challenge passed or challenge finding.
        public var _atsOutcome: String
        /// `-1022`, `-1200 [3:-9824]`; absent when the load succeeded.
        public var _atsCode: String?
        /// The sentence that says which rule decided.
        public var _atsRule: String
        /// The Info.plist keys, most specific first, that led to the decision.
        public var _atsRuleChain: [String]
        /// The smallest Info.plist change that would let the load through.
        public var _atsFix: String?
        /// Negotiated TLS facts of the upstream handshake (version, cipher, ALPN, leaf, …).
        public var _tls: [String: String]?
        /// URLSession, WebKit or media.
        public var _atsSource: String
        /// The console lines a device would log for this load.
        public var _atsConsole: [String]?
        /// How the load reached the proxy: `absolute-form`, `CONNECT+TLS`, `CONNECT+HTTP`, … (`ProxyRoute`).
        public var _atsRoute: String? = nil
    }

    /// The request half.
    public struct Request: Sendable, Codable, Equatable {
        public var method: String
        public var url: String
        public var httpVersion: String
        public var cookies: [Cookie]
        public var headers: [NameValue]
        public var queryString: [NameValue]
        public var postData: PostData?
        public var headersSize: Int
        public var bodySize: Int
    }

    /// The response half (status 0 and empty fields when none arrived).
    public struct Response: Sendable, Codable, Equatable {
        public var status: Int
        public var statusText: String
        public var httpVersion: String
        public var cookies: [Cookie]
        public var headers: [NameValue]
        public var content: Content
        public var redirectURL: String
        public var headersSize: Int
        public var bodySize: Int
    }

    /// A cookie (only its name and value are known here).
    public struct Cookie: Sendable, Codable, Equatable {
        public var name: String
        public var value: String
    }

    /// A header field or query parameter.
    public struct NameValue: Sendable, Codable, Equatable {
        public var name: String
        public var value: String
    }

    /// The response body's description, with its first bytes when `--capture-bodies` kept them.
    public struct Content: Sendable, Codable, Equatable {
        public var size: Int
        public var mimeType: String
        public var text: String?
        /// `base64` when `text` holds base64 (the body is not text).
        public var encoding: String?
        public var comment: String?

        public init(size: Int, mimeType: String, text: String?, encoding: String?, comment: String? = nil) {
            self.size = size
            self.mimeType = mimeType
            self.text = text
            self.encoding = encoding
            self.comment = comment
        }
    }

    /// A request body (`--capture-bodies`).
    public struct PostData: Sendable, Codable, Equatable {
        public var mimeType: String
        public var text: String
        /// `base64` when `text` holds base64 (HAR 1.2 has no encoding for postData; a custom field).
        public var _encoding: String?
        /// Set when only the first bytes were kept.
        public var comment: String?
    }

    /// Cache use (not observed by a proxy: empty).
    public struct Cache: Sendable, Codable, Equatable {}

    /// Milliseconds per phase; -1 where the phase does not apply or was not measured.
    public struct Timings: Sendable, Codable, Equatable {
        public var blocked: Double
        public var dns: Double
        public var connect: Double
        public var send: Double
        public var wait: Double
        public var receive: Double
        public var ssl: Double
    }
}
