/// One HTTP/2 header field as it travels on the wire: a lower-case name (pseudo-headers start with `:`) and a value.
///
/// Values are immutable, `Sendable`, and carry no validation of their own: `HTTP2Session` and nghttp2 validate what
/// is received; `HTTP2Message` produces valid lists for what is sent.
public struct HTTP2Header: Hashable, Sendable, CustomStringConvertible {
    /// The field name, lower-case on HTTP/2 (`:method`, `content-type`).
    public var name: String
    /// The field value.
    public var value: String

    /// A field from its name and value, taken as they are.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    /// Whether this is a pseudo-header (`:method`, `:status`, ...).
    public var isPseudo: Bool { name.hasPrefix(":") }

    /// `name: value`, for diagnostics and test failure messages.
    public var description: String { "\(name): \(value)" }
}

/// An HTTP/2 error code (RFC 9113 §7) as carried by RST_STREAM and GOAWAY.
///
/// A struct rather than an enum so that codes a peer invents are representable; the named constants cover RFC 9113.
/// Immutable value, `Sendable`.
public struct HTTP2ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The 32-bit code on the wire.
    public var rawValue: UInt32

    /// A code from its wire value.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// NO_ERROR (0x0): graceful shutdown or stream completion.
    public static let noError = HTTP2ErrorCode(rawValue: 0x0)
    /// PROTOCOL_ERROR (0x1).
    public static let protocolError = HTTP2ErrorCode(rawValue: 0x1)
    /// INTERNAL_ERROR (0x2).
    public static let internalError = HTTP2ErrorCode(rawValue: 0x2)
    /// FLOW_CONTROL_ERROR (0x3).
    public static let flowControlError = HTTP2ErrorCode(rawValue: 0x3)
    /// SETTINGS_TIMEOUT (0x4).
    public static let settingsTimeout = HTTP2ErrorCode(rawValue: 0x4)
    /// STREAM_CLOSED (0x5).
    public static let streamClosed = HTTP2ErrorCode(rawValue: 0x5)
    /// FRAME_SIZE_ERROR (0x6).
    public static let frameSizeError = HTTP2ErrorCode(rawValue: 0x6)
    /// REFUSED_STREAM (0x7): the stream was not processed and may be retried.
    public static let refusedStream = HTTP2ErrorCode(rawValue: 0x7)
    /// CANCEL (0x8).
    public static let cancel = HTTP2ErrorCode(rawValue: 0x8)
    /// COMPRESSION_ERROR (0x9).
    public static let compressionError = HTTP2ErrorCode(rawValue: 0x9)
    /// CONNECT_ERROR (0xa).
    public static let connectError = HTTP2ErrorCode(rawValue: 0xa)
    /// ENHANCE_YOUR_CALM (0xb): the peer is generating excessive load.
    public static let enhanceYourCalm = HTTP2ErrorCode(rawValue: 0xb)
    /// INADEQUATE_SECURITY (0xc).
    public static let inadequateSecurity = HTTP2ErrorCode(rawValue: 0xc)
    /// HTTP_1_1_REQUIRED (0xd).
    public static let http11Required = HTTP2ErrorCode(rawValue: 0xd)

    /// The RFC name (`PROTOCOL_ERROR`), or the hex value for an unknown code.
    public var description: String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return rawValue < UInt32(names.count) ? names[Int(rawValue)] : "0x\(String(rawValue, radix: 16))"
    }
}

/// A SETTINGS parameter identifier (RFC 9113 §6.5.2). Struct so unknown identifiers survive. Immutable, `Sendable`.
public struct HTTP2SettingID: RawRepresentable, Hashable, Sendable {
    /// The 16-bit identifier on the wire (stored widened, as nghttp2 reports it).
    public var rawValue: Int32

    /// An identifier from its wire value.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// SETTINGS_HEADER_TABLE_SIZE (0x1).
    public static let headerTableSize = HTTP2SettingID(rawValue: 0x1)
    /// SETTINGS_ENABLE_PUSH (0x2).
    public static let enablePush = HTTP2SettingID(rawValue: 0x2)
    /// SETTINGS_MAX_CONCURRENT_STREAMS (0x3).
    public static let maxConcurrentStreams = HTTP2SettingID(rawValue: 0x3)
    /// SETTINGS_INITIAL_WINDOW_SIZE (0x4).
    public static let initialWindowSize = HTTP2SettingID(rawValue: 0x4)
    /// SETTINGS_MAX_FRAME_SIZE (0x5).
    public static let maxFrameSize = HTTP2SettingID(rawValue: 0x5)
    /// SETTINGS_MAX_HEADER_LIST_SIZE (0x6).
    public static let maxHeaderListSize = HTTP2SettingID(rawValue: 0x6)
}

/// One SETTINGS entry received from the peer. Immutable, `Sendable`.
public struct HTTP2Setting: Hashable, Sendable {
    /// Which parameter.
    public var id: HTTP2SettingID
    /// Its value.
    public var value: UInt32

    /// An entry from its parts.
    public init(_ id: HTTP2SettingID, _ value: UInt32) {
        self.id = id
        self.value = value
    }
}

/// What a received HEADERS block means for its stream, decided from the session role and `:status`.
public enum HTTP2HeadersKind: Hashable, Sendable {
    /// The request head (server role): `:method`, `:scheme`, `:authority`, `:path` and fields.
    case request
    /// An interim 1xx response (client role); a final response follows.
    case informational
    /// The final response head (client role): `:status` 2xx–5xx and fields.
    case response
    /// Trailers after the body (either role); the stream ends with them.
    case trailers
}

/// Something the peer did, reported by `HTTP2Session.receive(_:now:)` or `HTTP2Session.takeEvents()` in the order
/// nghttp2 processed it. Immutable, `Sendable`.
public enum HTTP2Event: Hashable, Sendable {
    /// The peer's SETTINGS (not an ACK) were received and applied.
    case settings([HTTP2Setting])
    /// The peer acknowledged our SETTINGS.
    case settingsAcknowledged
    /// A complete header block (HEADERS + CONTINUATION) arrived on `stream`, fields in wire order.
    case headers(stream: Int32, kind: HTTP2HeadersKind, fields: [HTTP2Header])
    /// A chunk of a DATA frame's payload. The bytes count against flow control until the owner calls
    /// `HTTP2Session.consume(stream:bytes:)`.
    case data(stream: Int32, bytes: [UInt8])
    /// The peer half-closed `stream` (END_STREAM on HEADERS or DATA): nothing more arrives on it.
    case streamEnded(stream: Int32)
    /// The peer sent RST_STREAM on `stream`.
    case streamReset(stream: Int32, error: HTTP2ErrorCode)
    /// We sent RST_STREAM on `stream`: on the owner's request, or because nghttp2 or the hardening refused the stream.
    case streamResetSent(stream: Int32, error: HTTP2ErrorCode)
    /// `stream` is closed in both directions and forgotten; `error` is `noError` for a clean finish.
    case streamClosed(stream: Int32, error: HTTP2ErrorCode)
    /// The peer sent GOAWAY: streams above `lastStreamID` were not processed and may be retried elsewhere.
    case goAway(lastStreamID: Int32, error: HTTP2ErrorCode, debugData: [UInt8])
    /// We sent GOAWAY: on the owner's request, or because nghttp2 or the hardening detected a connection error.
    case goAwaySent(lastStreamID: Int32, error: HTTP2ErrorCode)
    /// The peer answered a PING we sent with `HTTP2Session.ping(_:)`. (Pings from the peer are answered by nghttp2.)
    case pingAcknowledged(payload: UInt64)
    /// The session hit an unrecoverable error: no further input is processed. A GOAWAY, if one could be queued,
    /// is still in `takeOutbound()`.
    case sessionFailed(HTTP2SessionError)
}

/// Why a session or a command failed: nghttp2's library error code and its text. Immutable, `Sendable`.
public struct HTTP2SessionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// nghttp2's negative `nghttp2_error` value (e.g. -903 bad client magic, -905 too many CONTINUATIONs), or
    /// one of the `ats*` codes below for limits enforced by this module.
    public var libraryCode: Int32
    /// A human-readable explanation.
    public var message: String

    /// An error from its parts.
    public init(libraryCode: Int32, message: String) {
        self.libraryCode = libraryCode
        self.message = message
    }

    /// Library code used when the per-session RST_STREAM rate limit tripped (CVE-2023-44487).
    public static let atsResetFloodCode: Int32 = -10_001
    /// Library code used when the per-session lifetime RST_STREAM budget ran out.
    public static let atsResetBudgetCode: Int32 = -10_002

    /// `message (code)`.
    public var description: String { "\(message) (\(libraryCode))" }
}

/// The lifecycle of an `HTTP2Session` as the owner sees it.
public enum HTTP2SessionState: Hashable, Sendable {
    /// Streams can be opened and data exchanged.
    case active
    /// GOAWAY was sent or received: streams already open may finish, no new ones start.
    case goingAway
    /// nghttp2 wants neither to read nor to write: the connection can be closed.
    case finished
    /// An unrecoverable error: close the connection after flushing `takeOutbound()`.
    case failed(HTTP2SessionError)
}

/// The state of one stream, as nghttp2 tracks it (RFC 9113 §5.1), seen from this endpoint.
public enum HTTP2StreamState: Hashable, Sendable {
    /// Not yet opened, or not known to the session (never opened or already forgotten).
    case idle
    /// Both sides may send.
    case open
    /// Reserved by a PUSH_PROMISE we sent (never happens: push is disabled).
    case reservedLocal
    /// Reserved by a PUSH_PROMISE the peer sent (never happens: push is disabled).
    case reservedRemote
    /// We sent END_STREAM; the peer may still send.
    case halfClosedLocal
    /// The peer sent END_STREAM; we may still send.
    case halfClosedRemote
    /// Closed, but still known to the session.
    case closed
}

/// The role of an `HTTP2Session`.
public enum HTTP2Role: Hashable, Sendable {
    /// Accepts requests (the side facing an intercepted app).
    case server
    /// Sends requests (the side facing an origin).
    case client
}

/// Local settings and hardening limits of an `HTTP2Session`. Immutable value, `Sendable`.
public struct HTTP2Configuration: Hashable, Sendable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS we advertise: how many streams the peer may open at once.
    public var maxConcurrentStreams: UInt32 = 100
    /// SETTINGS_INITIAL_WINDOW_SIZE we advertise: per-stream receive window.
    public var initialWindowSize: UInt32 = 65_535
    /// Connection-level receive window (set with a WINDOW_UPDATE on stream 0 at start; 65,535 by default).
    public var connectionWindowSize: UInt32 = 65_535
    /// SETTINGS_MAX_FRAME_SIZE we advertise (16,384 – 16,777,215).
    public var maxFrameSize: UInt32 = 16_384
    /// SETTINGS_MAX_HEADER_LIST_SIZE we advertise, and enforce: a larger received header block resets its stream
    /// with ENHANCE_YOUR_CALM. Counted as RFC 9113 does: name + value + 32 per field.
    public var maxHeaderListSize: UInt32 = 65_536
    /// Most SETTINGS entries accepted in one frame (nghttp2 option; more is a connection error).
    public var maxSettingsEntries: Int = 32
    /// Most CONTINUATION frames accepted after one HEADERS (nghttp2 option; more is a connection error).
    public var maxContinuations: Int = 8
    /// Most RST_STREAM frames accepted from the peer within any one second; more sends GOAWAY(ENHANCE_YOUR_CALM)
    /// and fails the session (rapid reset, CVE-2023-44487).
    public var maxResetsPerSecond: Int = 100
    /// Most stream resets over the whole life of the session (nil: no lifetime limit); one more sends
    /// GOAWAY(ENHANCE_YOUR_CALM) and fails the session. Counts what `maxResetsPerSecond` counts.
    public var maxResetsPerSession: Int?
    /// Whether RST_STREAM frames this endpoint sends (on the owner's request, or nghttp2's own for a stream error
    /// such as a WINDOW_UPDATE that overflows a stream's window) count against `maxResetsPerSecond` and
    /// `maxResetsPerSession` as the peer's do. A server facing clients sets it: a client that makes the server reset
    /// its streams (MadeYouReset, CVE-2025-8671) costs as much as one that resets them itself.
    public var countsSentResets = false

    /// The defaults above.
    public init() {}
}
