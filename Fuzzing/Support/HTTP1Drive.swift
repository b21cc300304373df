@testable import ATSProxyCore

/// Drives one `HTTP1Parser` over input cut into pieces, the way a connection does: resumes after every message,
/// hands everything after an upgrade over raw, and reports the end of input. Its results are compared across
/// different cuts of the same bytes, so everything it records is independent of the cuts.
public struct HTTP1Drive {
    /// One message as the events described it.
    public struct Message: Equatable {
        public var request: HTTPRequestHead?
        public var response: HTTPResponseHead?
        public var framing: HTTPBodyFraming
        public var body: [UInt8] = []
        public var trailers: HTTPFields = [:]
        /// `.messageEnd` (or, for a tunnel, `.upgraded`) was reported.
        public var ended = false
    }

    /// How the input stream ended.
    public enum Ending: Equatable {
        /// Every byte was parsed; the parser was between messages or inside one when the input stopped.
        case open
        /// A rule was broken.
        case failed(HTTP1ParseError)
        /// The stream left HTTP/1 after the last message; these raw bytes followed.
        case upgraded([UInt8])
    }

    public private(set) var messages: [Message] = []
    public private(set) var ending: Ending = .open
    /// Whether a `.body` event arrived empty (the parser never reports empty pieces).
    public private(set) var sawEmptyBody = false

    /// Parses `pieces` with a parser of `role`; `methods` are the requests outstanding (response role).
    public init(role: HTTP1Parser.Role, methods: [String] = [], pieces: [ArraySlice<UInt8>], closeAtEnd: Bool) {
        var parser = HTTP1Parser(role: role)
        for method in methods { parser.requestSent(method: method) }
        var raw: [UInt8]?
        for piece in pieces {
            if raw != nil {
                raw?.append(contentsOf: piece)
                continue
            }
            if case .failed = ending { break }
            record(parser.feed(piece), raw: &raw)
            while parser.isPaused, raw == nil, !isFailed {
                record(parser.resume(), raw: &raw)
            }
        }
        if closeAtEnd, raw == nil, !isFailed {
            record(parser.inputClosed(), raw: &raw)
            while parser.isPaused, raw == nil, !isFailed {
                record(parser.resume(), raw: &raw)
            }
        }
        if let raw { ending = .upgraded(raw) }
    }

    private var isFailed: Bool {
        if case .failed = ending { return true }
        return false
    }

    /// Checks the event grammar as it goes and folds the events into messages.
    private mutating func record(_ events: [HTTPPart], raw: inout [UInt8]?) {
        for event in events {
            FuzzCheck.require(!isFailed && raw == nil, "event \(event) after the stream ended (\(ending))")
            let open = messages.last.map { !$0.ended } ?? false
            switch event {
            case .request(let head, let framing):
                FuzzCheck.require(!open, "a request head inside an unfinished message")
                messages.append(Message(request: head, framing: framing))
            case .response(let head, let framing):
                FuzzCheck.require(!open, "a response head inside an unfinished message")
                // An interim (1xx) response has no body and no end event: the final response follows at once.
                FuzzCheck.require(!head.isInterim || framing == .none, "interim response framed \(framing)")
                messages.append(Message(response: head, framing: framing, ended: head.isInterim))
            case .body(let piece):
                FuzzCheck.require(open, "body bytes outside a message")
                if piece.isEmpty { sawEmptyBody = true }
                messages[messages.count - 1].body.append(contentsOf: piece)
                switch messages[messages.count - 1].framing {
                case .contentLength(let length):
                    FuzzCheck.require(
                        messages[messages.count - 1].body.count <= length, "more body than Content-Length \(length)")
                case .none, .tunnel:
                    FuzzCheck.fail("body bytes for a message framed \(messages[messages.count - 1].framing)")
                case .chunked, .untilClose:
                    break
                }
            case .trailers(let fields):
                FuzzCheck.require(open && messages[messages.count - 1].framing == .chunked, "trailers outside chunked")
                FuzzCheck.require(!fields.isEmpty, "an empty trailers event")
                messages[messages.count - 1].trailers = fields
            case .messageEnd:
                FuzzCheck.require(open, "message end outside a message")
                if case .contentLength(let length) = messages[messages.count - 1].framing {
                    FuzzCheck.require(messages[messages.count - 1].body.count == length, "body shorter than \(length)")
                }
                FuzzCheck.require(messages[messages.count - 1].framing != .tunnel, "message end of a tunnel")
                messages[messages.count - 1].ended = true
            case .upgraded(let remaining):
                FuzzCheck.require(open && messages[messages.count - 1].framing == .tunnel, "upgrade without tunnel")
                messages[messages.count - 1].ended = true
                raw = Array(remaining)
            case .failed(let error):
                ending = .failed(error)
            }
        }
    }

    /// The messages that ended, in order.
    public var completeMessages: [Message] { messages.filter(\.ended) }
}

extension HTTP1Drive: Equatable {}

/// Writes messages back to bytes with the project's serializer and body writer.
public enum HTTP1Writer {
    /// The head and framed body of `message` (a tunnel: the head alone).
    public static func bytes(of message: HTTP1Drive.Message) -> [UInt8] {
        var out: [UInt8] = []
        if let request = message.request {
            HTTP1Serializer.writeRequestHead(request, into: &out)
        } else if let response = message.response {
            HTTP1Serializer.writeResponseHead(response, into: &out)
        }
        appendBody(message, framing: message.framing, into: &out)
        return out
    }

    /// Appends `message`'s body and trailers framed as `framing`.
    public static func appendBody(_ message: HTTP1Drive.Message, framing: HTTPBodyFraming, into out: inout [UInt8]) {
        guard framing != .tunnel else { return }
        var writer = HTTP1BodyWriter(framing: framing)
        do {
            if !message.body.isEmpty { try writer.write(message.body[...], into: &out) }
            try writer.finish(trailers: message.trailers, into: &out)
        } catch {
            FuzzCheck.fail("the body writer refused a body the parser accepted (\(framing)): \(error)")
        }
    }
}
