/// Why the parser refused a message: a typed reason with the status a server answers it with.
///
/// Requests map to 400, 431, 501 or 505 and the connection must be closed afterwards. On the
/// response side (parsing what an upstream sent) the proxy answers its client with 502 instead;
/// `status` then only documents which rule the upstream broke.
public struct HTTP1ParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The rule that was broken.
    public enum Kind: Hashable, Sendable {
        /// The head (or trailer section) exceeded the 64 KiB limit.
        case headerSectionTooLarge
        /// A request head with more than `HTTP1HeadParser.maxRequestFields` header fields.
        case tooManyHeaderFields
        /// The request line is not `method SP target SP version`.
        case invalidRequestLine
        /// The status line is not `version SP 3DIGIT [SP reason]`.
        case invalidStatusLine
        /// A major version other than 1.
        case unsupportedVersion
        /// The method is not a token.
        case invalidMethod
        /// The request target is not valid for its form or method.
        case invalidTarget
        /// A field name is empty or not a token, or the colon is missing.
        case invalidFieldName
        /// Whitespace between a field name and its colon (RFC 9112 §5.1).
        case whitespaceBeforeColon
        /// A field value has a control character.
        case invalidFieldValue
        /// A field line starts with whitespace: obsolete line folding (RFC 9112 §5.2).
        case obsoleteLineFolding
        /// A CR not followed by LF.
        case bareCR
        /// An LF not preceded by CR.
        case bareLF
        /// A NUL byte in the head.
        case nulByte
        /// An HTTP/1.1 request without Host.
        case missingHost
        /// More than one Host field.
        case multipleHost
        /// A Host value that is not a valid authority.
        case invalidHost
        /// Host differs from the authority of an absolute-form target.
        case hostMismatch
        /// Both Content-Length and Transfer-Encoding.
        case contentLengthWithTransferEncoding
        /// A Content-Length that is not a decimal number.
        case invalidContentLength
        /// Several Content-Length values that differ.
        case conflictingContentLength
        /// A request Transfer-Encoding whose final coding is not chunked, or chunked applied twice.
        case transferEncodingNotChunked
        /// A transfer coding other than chunked.
        case unsupportedTransferEncoding
        /// Transfer-Encoding in an HTTP/1.0 message (RFC 9112 §6.1: framing is faulty).
        case transferEncodingInHTTP10
        /// A chunk size that is empty or not hexadecimal.
        case invalidChunkSize
        /// A chunk size too large to represent.
        case chunkSizeOverflow
        /// A chunk extension with characters outside its grammar.
        case invalidChunkExtension
        /// Chunk data not followed by CRLF.
        case invalidChunkTerminator
        /// Response bytes with no request outstanding.
        case unexpectedResponse
        /// The peer closed before the message was complete.
        case truncatedMessage
    }

    /// The rule that was broken.
    public var kind: Kind

    /// Creates an error of the given kind.
    public init(_ kind: Kind) {
        self.kind = kind
    }

    /// The status a server answers this with (and then closes the connection).
    public var status: Int {
        switch kind {
        case .headerSectionTooLarge, .tooManyHeaderFields: 431
        case .unsupportedTransferEncoding: 501
        case .unsupportedVersion: 505
        case .invalidRequestLine, .invalidStatusLine, .invalidMethod, .invalidTarget, .invalidFieldName,
            .whitespaceBeforeColon, .invalidFieldValue, .obsoleteLineFolding, .bareCR, .bareLF, .nulByte,
            .missingHost, .multipleHost, .invalidHost, .hostMismatch, .contentLengthWithTransferEncoding,
            .invalidContentLength, .conflictingContentLength, .transferEncodingNotChunked,
            .transferEncodingInHTTP10, .invalidChunkSize, .chunkSizeOverflow, .invalidChunkExtension,
            .invalidChunkTerminator, .unexpectedResponse, .truncatedMessage:
            400
        }
    }

    /// A short human-readable reason, suitable for a response body or a log line.
    public var reason: String {
        switch kind {
        case .headerSectionTooLarge: "header section larger than 64 KiB"
        case .tooManyHeaderFields: "more than \(HTTP1HeadParser.maxRequestFields) header fields"
        case .invalidRequestLine: "malformed request line"
        case .invalidStatusLine: "malformed status line"
        case .unsupportedVersion: "HTTP version not supported"
        case .invalidMethod: "invalid method token"
        case .invalidTarget: "invalid request target"
        case .invalidFieldName: "malformed header field name"
        case .whitespaceBeforeColon: "whitespace between header field name and colon"
        case .invalidFieldValue: "control character in header field value"
        case .obsoleteLineFolding: "obsolete line folding in header section"
        case .bareCR: "bare CR in message framing"
        case .bareLF: "bare LF in message framing"
        case .nulByte: "NUL byte in header section"
        case .missingHost: "HTTP/1.1 request without Host"
        case .multipleHost: "more than one Host header"
        case .invalidHost: "invalid Host header"
        case .hostMismatch: "Host does not match the request target's authority"
        case .contentLengthWithTransferEncoding: "both Content-Length and Transfer-Encoding"
        case .invalidContentLength: "invalid Content-Length"
        case .conflictingContentLength: "conflicting Content-Length values"
        case .transferEncodingNotChunked: "final transfer coding is not chunked"
        case .unsupportedTransferEncoding: "unsupported transfer coding"
        case .transferEncodingInHTTP10: "Transfer-Encoding in an HTTP/1.0 message"
        case .invalidChunkSize: "invalid chunk size"
        case .chunkSizeOverflow: "chunk size too large"
        case .invalidChunkExtension: "invalid chunk extension"
        case .invalidChunkTerminator: "chunk data not followed by CRLF"
        case .unexpectedResponse: "response without an outstanding request"
        case .truncatedMessage: "connection closed before the message was complete"
        }
    }

    /// `<status> <reason>`.
    public var description: String { "\(status) \(reason)" }
}
