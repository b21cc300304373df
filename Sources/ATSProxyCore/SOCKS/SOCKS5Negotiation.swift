import ATSPolicy

/// The proxy side of a SOCKS5 handshake (RFC 1928), sans-io: the client's greeting (the methods it offers), the
/// username/password subnegotiation (RFC 1929) when the proxy requires credentials (`--proxy-auth`; "no
/// authentication" otherwise), then its request. Only CONNECT is granted; BIND and UDP ASSOCIATE get "command not supported",
/// an unknown address type "address type not supported", a client offering no method the proxy accepts the 0xFF
/// selection. Everything the client may send is bounded by the format itself (a greeting is at most 257 bytes, a
/// request at most 262), so the buffer never grows past that.
///
/// Feed it the client's bytes as they come; each call says what to send and whether the handshake continues, ended
/// with a target to connect, or failed. Bytes after a complete request (a client that does not wait for the reply)
/// are handed back with the target. Not thread-safe; one per connection.
public struct SOCKS5Negotiation: Sendable {
    /// Where the handshake is.
    enum Stage: Sendable {
        /// Waiting for the version/methods greeting.
        case greeting
        /// Username/password selected: waiting for the client's credentials.
        case authentication
        /// Method selected (and credentials accepted, if required); waiting for the request.
        case request
        /// A target was returned or the handshake failed: nothing more is read.
        case finished
    }

    /// What a `feed` call produced.
    public enum Progress: Equatable, Sendable {
        /// Send `reply` (possibly empty) and wait for more bytes.
        case needMore(reply: [UInt8])
        /// The client asked to CONNECT to `target`: the caller decides and then sends `SOCKS5Reply` bytes.
        /// `reply` is what must go out before that decision (the method selection, when the greeting and the request
        /// arrived together); `rest` is what the client sent after its request.
        case connect(SOCKS5Target, reply: [UInt8], rest: [UInt8])
        /// The handshake cannot go on: send `reply` (possibly empty) and close. `reason` says why, for the log.
        case failed(reply: [UInt8], reason: String)
    }

    /// SOCKS protocol version 5.
    static let version: UInt8 = 0x05
    /// The "no authentication required" method.
    static let noAuthentication: UInt8 = 0x00
    /// The "username/password" method (RFC 1929).
    static let usernamePassword: UInt8 = 0x02
    /// The "no acceptable methods" selection.
    static let noAcceptableMethod: UInt8 = 0xFF

    var stage = Stage.greeting
    var buffer: [UInt8] = []
    /// The credentials the client must present; nil: no authentication.
    let credentials: ProxyCredentials?

    public init(credentials: ProxyCredentials? = nil) {
        self.credentials = credentials
    }

    /// Appends `bytes` to what the client sent and advances as far as they allow.
    public mutating func feed(_ bytes: [UInt8]) -> Progress {
        switch stage {
        case .finished:
            preconditionFailure("SOCKS5Negotiation.feed: the handshake has ended")
        case .greeting, .authentication, .request:
            break
        }
        buffer.append(contentsOf: bytes)
        var sent: [UInt8] = []
        if case .greeting = stage {
            switch parseGreeting() {
            case .incomplete:
                return .needMore(reply: [])
            case .invalid(let reason, let reply):
                stage = .finished
                return .failed(reply: reply, reason: reason)
            case .complete(let length):
                buffer.removeFirst(length)
                if credentials == nil {
                    sent = [Self.version, Self.noAuthentication]
                    stage = .request
                } else {
                    sent = [Self.version, Self.usernamePassword]
                    stage = .authentication
                }
            }
        }
        if case .authentication = stage {
            switch parseAuthentication() {
            case .incomplete:
                return .needMore(reply: sent)
            case .invalid(let reason, let reply):
                stage = .finished
                return .failed(reply: sent + reply, reason: reason)
            case .complete(let length):
                buffer.removeFirst(length)
                sent += [0x01, 0x00]
                stage = .request
            }
        }
        switch parseRequest() {
        case .incomplete:
            return .needMore(reply: sent)
        case .invalid(let reason, let reply):
            stage = .finished
            return .failed(reply: sent + reply, reason: reason)
        case .complete(let request):
            stage = .finished
            let rest = Array(buffer[request.length...])
            buffer = []
            return .connect(request.target, reply: sent, rest: rest)
        }
    }

    /// What parsing the buffer's front found.
    enum Parse<Value> {
        case incomplete
        case complete(Value)
        case invalid(String, reply: [UInt8])
    }

    /// The greeting: VER, NMETHODS, METHODS. Its value is its length.
    func parseGreeting() -> Parse<Int> {
        guard let first = buffer.first else { return .incomplete }
        guard first == Self.version else {
            return .invalid("not a SOCKS5 greeting (version byte \(first))", reply: [])
        }
        guard buffer.count >= 2 else { return .incomplete }
        let count = Int(buffer[1])
        guard count > 0 else {
            return .invalid(
                "SOCKS5 greeting offers no authentication method", reply: [Self.version, Self.noAcceptableMethod])
        }
        guard buffer.count >= 2 + count else { return .incomplete }
        let methods = buffer[2..<(2 + count)]
        let wanted = credentials == nil ? Self.noAuthentication : Self.usernamePassword
        guard methods.contains(wanted) else {
            let offered = methods.map { SOCKS5Reply.methodName($0) }.joined(separator: ", ")
            let accepted =
                credentials == nil
                ? "ats-proxy accepts no authentication (method 0) only"
                : "ats-proxy requires username/password (method 2, --proxy-auth)"
            return .invalid(
                "the SOCKS5 client offers only \(offered); \(accepted)", reply: [Self.version, Self.noAcceptableMethod])
        }
        return .complete(2 + count)
    }

    /// The username/password request (RFC 1929): VER 1, ULEN, UNAME, PLEN, PASSWD. Its value is its length; wrong
    /// credentials are invalid (status 1, then the connection closes).
    func parseAuthentication() -> Parse<Int> {
        guard let credentials else { preconditionFailure("SOCKS5Negotiation: authentication without credentials") }
        guard let first = buffer.first else { return .incomplete }
        let failure: [UInt8] = [0x01, 0x01]
        guard first == 0x01 else {
            return .invalid("SOCKS5 username/password request with version byte \(first)", reply: failure)
        }
        guard buffer.count >= 2 else { return .incomplete }
        let userLength = Int(buffer[1])
        guard buffer.count >= 3 + userLength else { return .incomplete }
        let passwordLength = Int(buffer[2 + userLength])
        let length = 3 + userLength + passwordLength
        guard buffer.count >= length else { return .incomplete }
        let user = Array(buffer[2..<(2 + userLength)])
        let password = Array(buffer[(3 + userLength)..<length])
        guard credentials.accepts(user: user, password: password) else {
            return .invalid("SOCKS5 username/password rejected (--proxy-auth)", reply: failure)
        }
        return .complete(length)
    }

    /// A whole CONNECT request: where to, and how many bytes it took.
    struct Request {
        let target: SOCKS5Target
        let length: Int
    }

    /// The request: VER, CMD, RSV, ATYP, DST.ADDR, DST.PORT.
    func parseRequest() -> Parse<Request> {
        guard buffer.count >= 4 else {
            if let first = buffer.first, first != Self.version {
                return .invalid("SOCKS5 request with version byte \(first)", reply: SOCKS5Reply.bytes(.generalFailure))
            }
            return .incomplete
        }
        guard buffer[0] == Self.version else {
            return .invalid(
                "SOCKS5 request with version byte \(buffer[0])", reply: SOCKS5Reply.bytes(.generalFailure))
        }
        let command = buffer[1]
        let addressType = buffer[3]
        let addressLength: Int
        switch addressType {
        case 0x01: addressLength = 4
        case 0x04: addressLength = 16
        case 0x03:
            guard buffer.count >= 5 else { return .incomplete }
            addressLength = 1 + Int(buffer[4])
            guard buffer[4] > 0 else {
                return .invalid("SOCKS5 request with an empty domain name", reply: SOCKS5Reply.bytes(.generalFailure))
            }
        default:
            return .invalid(
                "SOCKS5 request with address type \(addressType)", reply: SOCKS5Reply.bytes(.addressTypeNotSupported))
        }
        let length = 4 + addressLength + 2
        guard buffer.count >= length else { return .incomplete }
        guard command == 0x01 else {
            let name =
                switch command {
                case 0x02: "BIND"
                case 0x03: "UDP ASSOCIATE"
                default: "command \(command)"
                }
            return .invalid(
                "SOCKS5 \(name) is not supported (CONNECT only)", reply: SOCKS5Reply.bytes(.commandNotSupported))
        }
        let address = buffer[4..<(4 + addressLength)]
        let port = Int(buffer[length - 2]) << 8 | Int(buffer[length - 1])
        let host: String
        switch addressType {
        case 0x01:
            host = address.map(String.init).joined(separator: ".")
        case 0x04:
            host = SOCKS5Target.ipv6Text(Array(address))
        default:
            let name = address.dropFirst()
            // The rule an HTTP CONNECT authority meets: a name a resolver takes and a leaf can carry (no userinfo,
            // path or percent-encoding that filters would read one way and the policy another).
            guard HTTP1Authority.isHostName(name) else {
                return .invalid(
                    "SOCKS5 request for '\(String(decoding: name.prefix(64), as: UTF8.self).filter { $0.isASCII && !$0.isNewline })', which is not a host name",
                    reply: SOCKS5Reply.bytes(.generalFailure))
            }
            host = String(decoding: name, as: UTF8.self)
        }
        guard port > 0 else {
            return .invalid("SOCKS5 request for port 0", reply: SOCKS5Reply.bytes(.generalFailure))
        }
        return .complete(
            Request(target: SOCKS5Target(host: host, port: port, addressType: addressType), length: length))
    }
}

/// Where a SOCKS5 client asked to connect: a host (a domain name as sent, or an IPv4/IPv6 address in text form) and
/// a port.
public struct SOCKS5Target: Equatable, Sendable {
    public let host: String
    public let port: Int
    /// The request's ATYP: 1 (IPv4), 3 (domain name: `socks5h://`, the client let the proxy resolve it), 4 (IPv6).
    public let addressType: UInt8

    /// The text form of a 16-byte IPv6 address (RFC 5952: lower case, the longest run of two or more zero groups
    /// shortened to `::`).
    static func ipv6Text(_ bytes: [UInt8]) -> String {
        precondition(bytes.count == 16, "SOCKS5Target.ipv6Text: \(bytes.count) bytes")
        let groups = (0..<8).map { Int(bytes[2 * $0]) << 8 | Int(bytes[2 * $0 + 1]) }
        var best = (start: -1, length: 0)
        var index = 0
        while index < 8 {
            guard groups[index] == 0 else {
                index += 1
                continue
            }
            var end = index
            while end < 8 && groups[end] == 0 { end += 1 }
            if end - index > best.length { best = (index, end - index) }
            index = end
        }
        let hex = groups.map { String($0, radix: 16) }
        guard best.length >= 2 else { return hex.joined(separator: ":") }
        let head = hex[..<best.start].joined(separator: ":")
        let tail = hex[(best.start + best.length)...].joined(separator: ":")
        return head + "::" + tail
    }
}

/// The proxy's SOCKS5 replies (RFC 1928 section 6), and names for what clients send.
public enum SOCKS5Reply {
    /// REP codes the proxy uses.
    public enum Code: UInt8, Sendable {
        case succeeded = 0x00
        case generalFailure = 0x01
        case notAllowedByRuleset = 0x02
        case networkUnreachable = 0x03
        case hostUnreachable = 0x04
        case connectionRefused = 0x05
        case ttlExpired = 0x06
        case commandNotSupported = 0x07
        case addressTypeNotSupported = 0x08
    }

    /// A reply with `code`; the bound address is 0.0.0.0:0 (the proxy's upstream is its own, and clients do not
    /// use it for CONNECT).
    public static func bytes(_ code: Code) -> [UInt8] {
        [SOCKS5Negotiation.version, code.rawValue, 0x00, 0x01, 0, 0, 0, 0, 0, 0]
    }

    /// The reply a SOCKS5 client gets where an HTTP client would get `status` before its tunnel opens: a refusal
    /// by the proxy's rules (403, 508) is "not allowed by ruleset", anything else a general failure.
    public static func code(forHTTPStatus status: Int) -> Code {
        switch status {
        case 403, 508: .notAllowedByRuleset
        default: .generalFailure
        }
    }

    /// The reply for a tunnel whose upstream failed with `error` before it opened (a passthrough probe): an ATS or
    /// TLS failure is "not allowed by ruleset", the network's own failures their SOCKS5 counterparts.
    public static func code(for error: NSURLErrorCode?) -> Code {
        guard let error else { return .generalFailure }
        switch error {
        case .timedOut: return .ttlExpired
        case .cannotFindHost: return .hostUnreachable
        case .cannotConnectToHost: return .connectionRefused
        case .appTransportSecurityRequiresSecureConnection, .secureConnectionFailed, .serverCertificateHasBadDate,
            .serverCertificateUntrusted, .serverCertificateHasUnknownRoot, .serverCertificateNotYetValid,
            .clientCertificateRejected, .clientCertificateRequired:
            return .notAllowedByRuleset
        case .cancelled, .unsupportedURL, .networkConnectionLost, .badServerResponse:
            return .generalFailure
        }
    }

    /// The name of an authentication method number, for log lines.
    static func methodName(_ method: UInt8) -> String {
        switch method {
        case 0x00: "no authentication"
        case 0x01: "GSSAPI"
        case 0x02: "username/password"
        default: "method \(method)"
        }
    }
}
