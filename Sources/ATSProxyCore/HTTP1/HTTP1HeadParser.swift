import ATSHTTP2

/// Turns a complete header section (as collected by `HTTP1HeadScanner`) into a typed head.
///
/// Stateless. Applies the line-level rules of RFC 9112 §3–§5: start-line syntax, field-name tokens,
/// no whitespace before the colon, no obs-fold, no control characters in values, and for requests
/// the Host rules of RFC 9112 §3.2.
enum HTTP1HeadParser {
    /// Most header fields a request head may carry (Apache's `LimitRequestFields` default); more is answered 431.
    /// Each field costs a parse, a copy and every later lookup, so the 64 KiB size limit alone let 10,000 tiny fields
    /// cost milliseconds of CPU per request.
    static let maxRequestFields = 100

    /// The lines of a section without their CRLF, empty ones skipped (the final empty line among them),
    /// walked in place: no list of lines is built.
    struct Lines: Sequence, IteratorProtocol {
        private let section: ArraySlice<UInt8>
        private var position: Int

        init(_ section: ArraySlice<UInt8>) {
            self.section = section
            position = section.startIndex
        }

        mutating func next() -> ArraySlice<UInt8>? {
            var start = position
            var index = position
            while index + 1 < section.endIndex {
                if section[index] == HTTP1ASCII.cr && section[index + 1] == HTTP1ASCII.lf {
                    let line = section[start..<index]
                    index += 2
                    position = index
                    if !line.isEmpty { return line }
                    start = index
                } else {
                    index += 1
                }
            }
            position = section.endIndex
            return nil
        }

        /// How many lines are left (a count of the LF bytes is enough to size the field list).
        var roughCount: Int {
            var count = 0
            for byte in section[position...] where byte == HTTP1ASCII.lf { count += 1 }
            return count
        }
    }

    /// Parses a request head and checks method, target, version and Host.
    static func parseRequest(_ section: ArraySlice<UInt8>) throws(HTTP1ParseError) -> HTTPRequestHead {
        var lines = Lines(section)
        guard let requestLine = lines.next() else { throw HTTP1ParseError(.invalidRequestLine) }
        guard let firstSpace = requestLine.firstIndex(of: HTTP1ASCII.space),
            let secondSpace = requestLine[(firstSpace + 1)...].firstIndex(of: HTTP1ASCII.space)
        else { throw HTTP1ParseError(.invalidRequestLine) }
        let methodBytes = requestLine[..<firstSpace]
        let targetBytes = requestLine[(firstSpace + 1)..<secondSpace]
        let versionBytes = requestLine[(secondSpace + 1)...]
        guard !methodBytes.isEmpty, !targetBytes.isEmpty, !versionBytes.contains(HTTP1ASCII.space) else {
            throw HTTP1ParseError(.invalidRequestLine)
        }
        guard methodBytes.allSatisfy(HTTP1ASCII.isTokenCharacter) else { throw HTTP1ParseError(.invalidMethod) }
        guard let version = HTTP1Version(bytes: versionBytes) else { throw HTTP1ParseError(.invalidRequestLine) }
        guard version.major == 1 else { throw HTTP1ParseError(.unsupportedVersion) }
        let method = String(decoding: methodBytes, as: UTF8.self)
        let target = try HTTP1RequestTarget.parse(targetBytes, method: method)
        let headers = try parseFields(lines, maximum: maxRequestFields)
        // An absolute-form request without Host (HTTP/1.0 may omit it) gains one when the proxy forwards it
        // (`forOrigin`): at the limit already, the forwarded head would carry one field more than the proxy itself
        // accepts, so it is refused here. Found by the http1-request fuzz target.
        if case .absolute = target, headers.count >= maxRequestFields, !headers.contains("Host") {
            throw HTTP1ParseError(.tooManyHeaderFields)
        }
        let head = HTTPRequestHead(method: method, target: target, version: version, headers: headers)
        try validateHost(head)
        return head
    }

    /// Parses a status line and fields.
    static func parseResponse(_ section: ArraySlice<UInt8>) throws(HTTP1ParseError) -> HTTPResponseHead {
        var lines = Lines(section)
        guard let statusLine = lines.next(), statusLine.count >= 12,
            statusLine[statusLine.startIndex + 8] == HTTP1ASCII.space
        else { throw HTTP1ParseError(.invalidStatusLine) }
        let start = statusLine.startIndex
        guard let version = HTTP1Version(bytes: statusLine[start..<(start + 8)]) else {
            throw HTTP1ParseError(.invalidStatusLine)
        }
        guard version.major == 1 else { throw HTTP1ParseError(.unsupportedVersion) }
        let codeBytes = statusLine[(start + 9)..<(start + 12)]
        guard codeBytes.allSatisfy(HTTP1ASCII.isDigit), codeBytes.first != UInt8(ascii: "0") else {
            throw HTTP1ParseError(.invalidStatusLine)
        }
        let status = codeBytes.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        var reason = ""
        let rest = statusLine[(start + 12)...]
        if let separator = rest.first {
            guard separator == HTTP1ASCII.space else { throw HTTP1ParseError(.invalidStatusLine) }
            let reasonBytes = rest.dropFirst()
            guard reasonBytes.allSatisfy(HTTP1ASCII.isFieldValueCharacter) else {
                throw HTTP1ParseError(.invalidStatusLine)
            }
            reason = String(decoding: reasonBytes, as: UTF8.self)
        }
        let headers = try parseFields(lines)
        return HTTPResponseHead(version: version, status: status, reason: reason, headers: headers)
    }

    /// Parses a trailer section (fields only).
    static func parseTrailers(_ section: ArraySlice<UInt8>) throws(HTTP1ParseError) -> HTTPFields {
        try parseFields(Lines(section))
    }

    /// Parses field lines: `token ":" OWS value OWS`; more than `maximum` of them is `tooManyHeaderFields`.
    static func parseFields(_ lines: Lines, maximum: Int = .max) throws(HTTP1ParseError) -> HTTPFields {
        var fields: [HTTPField] = []
        fields.reserveCapacity(min(lines.roughCount, maximum))
        for line in lines {
            guard let first = line.first else { continue }
            guard fields.count < maximum else { throw HTTP1ParseError(.tooManyHeaderFields) }
            if first == HTTP1ASCII.space || first == HTTP1ASCII.htab { throw HTTP1ParseError(.obsoleteLineFolding) }
            guard let colon = line.firstIndex(of: HTTP1ASCII.colon) else { throw HTTP1ParseError(.invalidFieldName) }
            let name = line[..<colon]
            guard let last = name.last else { throw HTTP1ParseError(.invalidFieldName) }
            if last == HTTP1ASCII.space || last == HTTP1ASCII.htab { throw HTTP1ParseError(.whitespaceBeforeColon) }
            guard name.allSatisfy(HTTP1ASCII.isTokenCharacter) else { throw HTTP1ParseError(.invalidFieldName) }
            var value = line[(colon + 1)...]
            while let byte = value.first, byte == HTTP1ASCII.space || byte == HTTP1ASCII.htab { value.removeFirst() }
            while let byte = value.last, byte == HTTP1ASCII.space || byte == HTTP1ASCII.htab { value.removeLast() }
            var ascii = true
            for byte in value {
                guard HTTP1ASCII.isFieldValueCharacter(byte) else { throw HTTP1ParseError(.invalidFieldValue) }
                if byte >= 0x80 { ascii = false }
            }
            // Nearly every value is ASCII: decode it directly; obs-text takes the lossless path.
            let text = ascii ? String(decoding: value, as: UTF8.self) : FieldValueBytes.string(from: value)
            fields.append(HTTPField(name: String(decoding: name, as: UTF8.self), value: text))
        }
        return HTTPFields(fields)
    }

    /// Host rules: required once on HTTP/1.1 (optional for CONNECT, whose target is the authority),
    /// a valid authority, and equal to an absolute-form target's authority after default ports.
    private static func validateHost(_ head: HTTPRequestHead) throws(HTTP1ParseError) {
        var host: String?
        for field in head.headers.fields
        where field.name.utf8.count == 4 && HTTPFields.nameMatches(field.name, "Host") {
            guard host == nil else { throw HTTP1ParseError(.multipleHost) }
            host = field.value
        }
        guard let host else {
            if head.version.isAtLeastHTTP11 && head.method != "CONNECT" { throw HTTP1ParseError(.missingHost) }
            return
        }
        guard let authority = HTTP1Authority(bytes: host.utf8) else {
            // An empty Host is allowed only when the target has no authority (RFC 9112 §3.2).
            guard host.isEmpty, case .origin = head.target else { throw HTTP1ParseError(.invalidHost) }
            return
        }
        switch head.target {
        case .absolute(let scheme, let targetAuthority, _):
            let defaultPort = HTTP1RequestTarget.defaultPort(scheme: scheme)
            guard targetAuthority.matches(authority, defaultPort: defaultPort) else {
                throw HTTP1ParseError(.hostMismatch)
            }
        case .origin, .authority, .asterisk:
            break
        }
    }
}
