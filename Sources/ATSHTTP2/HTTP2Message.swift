/// An HTTP/1.1-style request head: the request-line parts plus the remaining fields. Immutable value, `Sendable`.
public struct HTTP2RequestHead: Hashable, Sendable {
    /// `GET`, `POST`, `CONNECT`, ...
    public var method: String
    /// `https` or `http`; empty for CONNECT.
    public var scheme: String
    /// `host[:port]`.
    public var authority: String
    /// Path and query (`/a?b=1`); empty for CONNECT.
    public var path: String
    /// Regular fields in order (no pseudo-headers).
    public var headers: [HTTP2Header]

    /// A head from its parts.
    public init(method: String, scheme: String, authority: String, path: String, headers: [HTTP2Header]) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.headers = headers
    }
}

/// An HTTP/1.1-style response head: status plus fields. Immutable value, `Sendable`.
public struct HTTP2ResponseHead: Hashable, Sendable {
    /// The status code, 100–599.
    public var status: Int
    /// Regular fields in order (no pseudo-headers).
    public var headers: [HTTP2Header]

    /// A head from its parts.
    public init(status: Int, headers: [HTTP2Header]) {
        self.status = status
        self.headers = headers
    }
}

/// Why an HTTP/2 header list cannot be read as an HTTP/1.1 head.
public enum HTTP2MessageError: Error, Hashable, Sendable {
    /// A required pseudo-header is absent (`:method`, `:path`, `:status`, ...).
    case missingPseudoHeader(String)
    /// A pseudo-header appears twice.
    case duplicatePseudoHeader(String)
    /// A pseudo-header that this message kind does not define.
    case unknownPseudoHeader(String)
    /// A pseudo-header after a regular field.
    case pseudoHeaderAfterRegularField(String)
    /// `:status` is not a three-digit code from 100 to 599.
    case invalidStatus(String)
}

/// Conversions between HTTP/2 header lists and HTTP/1.1-style heads, for the proxy's h1↔h2 translation.
///
/// Towards HTTP/2 names are lower-cased and connection-specific fields are removed (RFC 9113 §8.2.2): `Connection`
/// and every field it nominates, `Keep-Alive`, `Proxy-Connection`, `Transfer-Encoding`, `Upgrade`, and `TE` unless
/// it is exactly `trailers`; `Host` becomes `:authority`. Towards HTTP/1.1 `cookie` crumbs are joined with `; `
/// (RFC 9113 §8.2.3) and `host` is added from `:authority` when missing. Pure functions, thread-safe.
public enum HTTP2Message {
    /// Whether `name` (lower-case) is one of the fields that never appear on HTTP/2 (`connection`, `keep-alive`,
    /// `proxy-connection`, `transfer-encoding`, `upgrade`) or `host`: compared by length first, without hashing
    /// (this runs for every field of every message crossing between the protocols).
    static func isDroppedTowardsH2(_ name: String) -> Bool {
        switch name.utf8.count {
        case 4: name == "host"
        case 7: name == "upgrade"
        case 10: name == "connection" || name == "keep-alive"
        case 16: name == "proxy-connection"
        case 17: name == "transfer-encoding"
        default: false
        }
    }

    /// `name` in lower case, allocating only when it has an upper-case letter (HTTP/2 names, and most sent by
    /// HTTP/1.1 software in practice for the common fields, do not).
    static func lowercasedName(_ name: String) -> String {
        name.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") } ? name.lowercased() : name
    }

    /// HTTP/1.1 fields made valid for HTTP/2: lower-case names, connection-specific fields (and `host`) removed,
    /// `te` kept only as `trailers`. Order is preserved.
    public static func h2Fields(fromHTTP1 headers: [HTTP2Header]) -> [HTTP2Header] {
        var nominated: Set<String> = []
        for header in headers where header.name.utf8.count == 10 && lowercasedName(header.name) == "connection" {
            for token in header.value.split(separator: ",") {
                nominated.insert(token.trimmingSpaces().lowercased())
            }
        }
        var result: [HTTP2Header] = []
        result.reserveCapacity(headers.count)
        for header in headers {
            let name = lowercasedName(header.name)
            if name.hasPrefix(":") || isDroppedTowardsH2(name) || (!nominated.isEmpty && nominated.contains(name)) {
                continue
            }
            if name == "te" {
                let wantsTrailers = header.value.split(separator: ",").contains {
                    $0.trimmingSpaces().lowercased() == "trailers"
                }
                if wantsTrailers { result.append(HTTP2Header("te", "trailers")) }
                continue
            }
            result.append(HTTP2Header(name, header.value))
        }
        return result
    }

    /// The HTTP/2 header list for `head`: `:method`, `:scheme`, `:authority`, `:path` first (only `:method` and
    /// `:authority` for CONNECT), then `h2Fields(fromHTTP1:)`. An empty `authority` is taken from the `Host` field.
    public static func h2RequestHeaders(_ head: HTTP2RequestHead) -> [HTTP2Header] {
        var authority = head.authority
        if authority.isEmpty, let host = head.headers.first(where: { $0.name.lowercased() == "host" }) {
            authority = host.value
        }
        var result = [HTTP2Header(":method", head.method)]
        if head.method == "CONNECT" {
            result.append(HTTP2Header(":authority", authority))
        } else {
            result.append(HTTP2Header(":scheme", head.scheme))
            if !authority.isEmpty { result.append(HTTP2Header(":authority", authority)) }
            result.append(HTTP2Header(":path", head.path.isEmpty ? "/" : head.path))
        }
        return result + h2Fields(fromHTTP1: head.headers)
    }

    /// Reads a request header list (as received by a server session) as an HTTP/1.1-style head.
    /// - Throws: `HTTP2MessageError` for missing, duplicate, unknown or misplaced pseudo-headers.
    public static func requestHead(fromH2 fields: [HTTP2Header]) throws -> HTTP2RequestHead {
        var pseudo = RequestPseudoHeaders()
        let regular = try split(fields) { (field) throws(HTTP2MessageError) in try pseudo.take(field) }
        guard let method = pseudo.method else { throw HTTP2MessageError.missingPseudoHeader(":method") }
        let authority = pseudo.authority ?? ""
        if method == "CONNECT" && pseudo.protocolName == nil {
            guard !authority.isEmpty else { throw HTTP2MessageError.missingPseudoHeader(":authority") }
            return HTTP2RequestHead(
                method: method, scheme: "", authority: authority, path: "",
                headers: http1Fields(fromH2: regular, authority: authority))
        }
        guard let scheme = pseudo.scheme else { throw HTTP2MessageError.missingPseudoHeader(":scheme") }
        guard let path = pseudo.path else { throw HTTP2MessageError.missingPseudoHeader(":path") }
        return HTTP2RequestHead(
            method: method, scheme: scheme, authority: authority, path: path,
            headers: http1Fields(fromH2: regular, authority: authority))
    }

    /// The HTTP/2 header list for a response head: `:status`, then `h2Fields(fromHTTP1:)`.
    public static func h2ResponseHeaders(_ head: HTTP2ResponseHead) -> [HTTP2Header] {
        [HTTP2Header(":status", String(head.status))] + h2Fields(fromHTTP1: head.headers)
    }

    /// Reads a response header list (as received by a client session) as an HTTP/1.1-style head.
    /// - Throws: `HTTP2MessageError` for a missing or invalid `:status` or bad pseudo-headers.
    public static func responseHead(fromH2 fields: [HTTP2Header]) throws -> HTTP2ResponseHead {
        var statusField: String?
        let regular = try split(fields) { (field) throws(HTTP2MessageError) in
            guard field.name == ":status" else { throw HTTP2MessageError.unknownPseudoHeader(field.name) }
            guard statusField == nil else { throw HTTP2MessageError.duplicatePseudoHeader(field.name) }
            statusField = field.value
        }
        guard let statusText = statusField else { throw HTTP2MessageError.missingPseudoHeader(":status") }
        guard statusText.utf8.count == 3, let status = Int(statusText), (100...599).contains(status) else {
            throw HTTP2MessageError.invalidStatus(statusText)
        }
        return HTTP2ResponseHead(status: status, headers: http1Fields(fromH2: regular, authority: nil))
    }

    /// Regular HTTP/2 fields as HTTP/1.1 fields: `cookie` crumbs joined into one field at the first crumb's place,
    /// and `host` prepended from `authority` when there is none.
    public static func http1Fields(fromH2 fields: [HTTP2Header], authority: String?) -> [HTTP2Header] {
        var result: [HTTP2Header] = []
        var cookieIndex: Int?
        for field in fields where !field.isPseudo {
            if field.name == "cookie" {
                if let cookieIndex {
                    result[cookieIndex].value += "; " + field.value
                } else {
                    cookieIndex = result.count
                    result.append(field)
                }
                continue
            }
            result.append(field)
        }
        if let authority, !authority.isEmpty, !result.contains(where: { $0.name == "host" }) {
            result.insert(HTTP2Header("host", authority), at: 0)
        }
        return result
    }

    /// Splits `fields` into leading pseudo-headers, each handed to `takePseudo` (which throws for an unknown or
    /// duplicate one), and the regular fields after them, which it returns.
    private static func split(
        _ fields: [HTTP2Header], takePseudo: (HTTP2Header) throws(HTTP2MessageError) -> Void
    ) throws(HTTP2MessageError) -> [HTTP2Header] {
        var regular: [HTTP2Header] = []
        regular.reserveCapacity(fields.count)
        for field in fields {
            if field.isPseudo {
                guard regular.isEmpty else { throw HTTP2MessageError.pseudoHeaderAfterRegularField(field.name) }
                try takePseudo(field)
            } else {
                regular.append(field)
            }
        }
        return regular
    }
}

/// The pseudo-headers of a request, each at most once (RFC 9113 §8.3.1; `:protocol` from RFC 8441).
private struct RequestPseudoHeaders {
    var method: String?
    var scheme: String?
    var authority: String?
    var path: String?
    var protocolName: String?

    /// Takes one pseudo-header field. Throws for one this message kind does not define, or a second of one.
    mutating func take(_ field: HTTP2Header) throws(HTTP2MessageError) {
        switch field.name {
        case ":method": try Self.set(&method, field)
        case ":scheme": try Self.set(&scheme, field)
        case ":authority": try Self.set(&authority, field)
        case ":path": try Self.set(&path, field)
        case ":protocol": try Self.set(&protocolName, field)
        default: throw HTTP2MessageError.unknownPseudoHeader(field.name)
        }
    }

    private static func set(_ slot: inout String?, _ field: HTTP2Header) throws(HTTP2MessageError) {
        guard slot == nil else { throw HTTP2MessageError.duplicatePseudoHeader(field.name) }
        slot = field.value
    }
}

extension Substring {
    /// The substring without leading and trailing spaces and tabs (no Foundation).
    fileprivate func trimmingSpaces() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
