/// What a client speaks inside a CONNECT tunnel, read from the first bytes it sends after `200 Connection
/// established` (sans-io, strict). It only classifies: the bytes it held go, unchanged and in order, to whatever
/// reads that protocol (the client TLS engine, `HTTP1Parser`, `HTTP2Frontend`, or a raw relay).
///
/// - TLS: a handshake record header (`0x16 0x03`), however few bytes of the ClientHello came with it (the TLS
///   engine reassembles a hello split over many segments itself).
/// - HTTP/2 prior knowledge: the whole 24-byte connection preface `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
/// - HTTP/1.x: a request line `method SP target SP HTTP/1.d` (a token of at most 32 characters, a target of
///   visible ASCII, the version's digit): recognized as soon as the version's digit is in.
/// - Anything else, or a request line not done within `limit` bytes: unknown, with what was seen.
struct TunnelSniffer {
    /// A classification.
    enum Verdict: Equatable {
        /// The bytes so far fit one of the protocols; more are needed to tell.
        case needMore
        case tls
        case http1
        case http2PriorKnowledge
        /// Neither TLS nor HTTP: `seen` says what the first bytes were (hex and printable text).
        case unknown(seen: String)
    }

    /// At most this many bytes are held before deciding (a request line longer than this is not recognized).
    static let limit = 8192
    /// The longest method token recognized.
    static let maximumMethodLength = 32
    /// The HTTP/2 connection preface (RFC 9113 §3.4).
    static let http2Preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// The bytes received so far, in order (handed on once the verdict is in).
    private(set) var held: [UInt8] = []

    /// Adds `bytes` and classifies everything held so far.
    mutating func feed(_ bytes: [UInt8]) -> Verdict {
        held.append(contentsOf: bytes)
        let verdict = Self.classify(held[...])
        if case .needMore = verdict, held.count >= Self.limit {
            return .unknown(seen: "no request line within \(Self.limit) bytes; " + Self.describe(held[...]))
        }
        return verdict
    }

    /// Hands over the held bytes (the sniffer is empty afterwards).
    mutating func takeHeld() -> [UInt8] {
        defer { held = [] }
        return held
    }

    /// The verdict for `prefix`, the first bytes of the tunnel.
    static func classify(_ prefix: ArraySlice<UInt8>) -> Verdict {
        guard let first = prefix.first else { return .needMore }
        if first == 0x16 {
            guard prefix.count >= 2 else { return .needMore }
            return prefix[prefix.startIndex + 1] == 0x03 ? .tls : .unknown(seen: describe(prefix))
        }
        let prefaceLength = min(prefix.count, http2Preface.count)
        if prefix.prefix(prefaceLength).elementsEqual(http2Preface.prefix(prefaceLength)) {
            return prefix.count >= http2Preface.count ? .http2PriorKnowledge : .needMore
        }
        switch requestLine(prefix) {
        case .some(true): return .http1
        case .none: return .needMore
        case .some(false): return .unknown(seen: describe(prefix))
        }
    }

    /// Where the request-line scan is.
    private enum LineState {
        case method(length: Int)
        case target(length: Int)
        /// Matching `HTTP/1.` then a digit: `matched` bytes of it so far.
        case version(matched: Int)
    }

    private static let versionPrefix = Array("HTTP/1.".utf8)

    /// Whether `prefix` starts with an HTTP/1.x request line up to its version digit: true, false (it cannot),
    /// or nil (it might: the bytes so far fit).
    private static func requestLine(_ prefix: ArraySlice<UInt8>) -> Bool? {
        var state = LineState.method(length: 0)
        for byte in prefix {
            switch state {
            case .method(let length):
                if byte == HTTP1ASCII.space, length > 0 {
                    state = .target(length: 0)
                } else if HTTP1ASCII.isTokenCharacter(byte), length < maximumMethodLength {
                    state = .method(length: length + 1)
                } else {
                    return false
                }
            case .target(let length):
                if byte == HTTP1ASCII.space, length > 0 {
                    state = .version(matched: 0)
                } else if HTTP1ASCII.isVisible(byte) {
                    state = .target(length: length + 1)
                } else {
                    return false
                }
            case .version(let matched):
                if matched < versionPrefix.count {
                    guard byte == versionPrefix[matched] else { return false }
                    state = .version(matched: matched + 1)
                } else {
                    return HTTP1ASCII.isDigit(byte)
                }
            }
        }
        return nil
    }

    /// What the first bytes were, for a record: up to 16 of them in hex, and as text where printable.
    static func describe(_ bytes: ArraySlice<UInt8>) -> String {
        let shown = bytes.prefix(16)
        let hex = shown.map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined(separator: " ")
        let text = String(decoding: shown.map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
        return "first bytes \(hex)\(bytes.count > shown.count ? " …" : "") (\"\(text)\")"
    }
}
