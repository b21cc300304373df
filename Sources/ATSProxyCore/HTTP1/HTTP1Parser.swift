/// Incremental HTTP/1.1 message parser for one direction of one connection (sans-io).
///
/// Feed it bytes in chunks of any size, down to one byte; it returns `HTTPPart`s. Heads are
/// collected in a bounded buffer (64 KiB, then 431); bodies are returned as slices of the input and
/// never accumulated. After `.messageEnd` the parser pauses and holds any pipelined bytes until the
/// owner calls `resume()` (or `upgrade()` after a 101), so one message is handled at a time.
///
/// The `.request` role parses what a client sends to the proxy; the `.response` role parses what an
/// upstream answers and must be told each request's method (`requestSent(method:)`) to apply the
/// HEAD/CONNECT framing rules. Not thread-safe; owned by one connection state machine.
public struct HTTP1Parser: Sendable {
    /// Which start line the parser expects.
    public enum Role: Sendable {
        /// Request lines (proxy side, or origin-form requests inside a tunnel).
        case request
        /// Status lines (client side, towards an upstream).
        case response
    }

    /// The framing position of the current message.
    enum State: Sendable {
        /// Reading a head; partial bytes are in the head scanner.
        case head
        /// Reading a Content-Length body with `remaining` bytes to go.
        case contentLength(remaining: Int)
        /// Reading a chunked body; the position is in `chunkedDecoder`.
        case chunked
        /// Reading a body delimited by the end of the connection.
        case untilClose
        /// A message ended; pipelined bytes wait in `held` until `resume()` or `upgrade()`.
        case messageComplete
        /// No longer HTTP: the raw bytes have been handed over.
        case upgraded
        /// The peer closed the input between messages.
        case closed
        /// A rule was broken; the connection must close.
        case failed(HTTP1ParseError)
    }

    /// Which start line the parser expects.
    public let role: Role
    private(set) var state: State = .head
    private var scanner: HTTP1HeadScanner
    private var chunkedDecoder = HTTP1ChunkedDecoder()
    /// Bytes received while paused.
    private var held: ArraySlice<UInt8> = []
    /// The input ended while paused; applied on `resume()`.
    private var inputEndedWhilePaused = false
    /// Methods of requests sent upstream whose final response has not started (response role).
    private var outstandingMethods: [String] = []

    /// Creates a parser for one direction.
    public init(role: Role) {
        self.role = role
        self.scanner = HTTP1HeadScanner(skipsLeadingEmptyLines: role == .request)
    }

    /// Bytes the parser holds: the partial head or trailer section plus pipelined bytes while paused.
    public var bufferedByteCount: Int { scanner.buffer.count + held.count }

    /// True after `.messageEnd` until `resume()`/`upgrade()`.
    public var isPaused: Bool {
        if case .messageComplete = state { return true }
        return false
    }

    /// True when no part of a message has been received: between messages with nothing held.
    public var isIdle: Bool {
        switch state {
        case .head: return scanner.isEmpty
        case .messageComplete: return held.isEmpty
        case .contentLength, .chunked, .untilClose, .upgraded, .closed, .failed: return false
        }
    }

    /// Response role: a request with `method` was written upstream; its response comes next in order.
    public mutating func requestSent(method: String) {
        precondition(role == .response, "HTTP1Parser.requestSent is for the response role")
        outstandingMethods.append(method)
    }

    /// Parses the next bytes of input.
    public mutating func feed(_ bytes: [UInt8]) -> [HTTPPart] {
        feed(bytes[...])
    }

    /// Parses the next bytes of input. While paused the bytes are held, not parsed.
    public mutating func feed(_ bytes: ArraySlice<UInt8>) -> [HTTPPart] {
        var events: [HTTPPart] = []
        feed(bytes, into: &events)
        return events
    }

    /// `feed(_:)` appending to `events`, a list whose storage the caller may keep from feed to feed.
    public mutating func feed(_ bytes: ArraySlice<UInt8>, into events: inout [HTTPPart]) {
        switch state {
        case .head, .contentLength, .chunked, .untilClose:
            // A head, a body piece and the message end, without regrowing.
            events.reserveCapacity(events.count + 4)
            process(bytes, into: &events)
        case .messageComplete:
            if held.isEmpty { held = bytes } else { held.append(contentsOf: bytes) }
        case .failed:
            return
        case .upgraded, .closed:
            preconditionFailure("HTTP1Parser.feed in state \(state)")
        }
    }

    /// Continues with the next message after `.messageEnd`, parsing any held pipelined bytes.
    public mutating func resume() -> [HTTPPart] {
        guard case .messageComplete = state else { preconditionFailure("HTTP1Parser.resume in state \(state)") }
        state = .head
        let bytes = held
        held = []
        var events: [HTTPPart] = []
        process(bytes, into: &events)
        if inputEndedWhilePaused {
            events.append(contentsOf: inputClosed())
        }
        return events
    }

    /// After `.messageEnd` of a message that switched protocols (a 101 answered it): stop parsing and
    /// return the held bytes, which belong to the new protocol.
    public mutating func upgrade() -> ArraySlice<UInt8> {
        guard case .messageComplete = state else { preconditionFailure("HTTP1Parser.upgrade in state \(state)") }
        state = .upgraded
        let bytes = held
        held = []
        return bytes
    }

    /// The peer closed its side. Ends a read-until-close body; anything else mid-message is truncated,
    /// and so is a close before the response to an outstanding request (response role).
    public mutating func inputClosed() -> [HTTPPart] {
        switch state {
        case .head:
            // A response that never started is as truncated as a partial one (upstream reset, -1005).
            guard scanner.isEmpty && outstandingMethods.isEmpty else { return fail(.truncatedMessage) }
            state = .closed
            return []
        case .contentLength, .chunked:
            return fail(.truncatedMessage)
        case .untilClose:
            state = .closed
            return [.messageEnd]
        case .messageComplete:
            inputEndedWhilePaused = true
            return []
        case .upgraded, .closed, .failed:
            return []
        }
    }

    private mutating func fail(_ kind: HTTP1ParseError.Kind) -> [HTTPPart] {
        let error = HTTP1ParseError(kind)
        state = .failed(error)
        return [.failed(error)]
    }

    /// Runs the framing loop over `input` until it is used up, the message ends, or an error.
    private mutating func process(_ input: ArraySlice<UInt8>, into events: inout [HTTPPart]) {
        var input = input
        while true {
            switch state {
            case .head:
                guard !input.isEmpty else { return }
                switch scanner.scan(input) {
                case .needMore:
                    return
                case .complete(let consumed):
                    let section = scanner.finishSection(input, consumed: consumed)
                    input = input.dropFirst(consumed)
                    headCompleted(section, remaining: &input, into: &events)
                case .failed(let error):
                    state = .failed(error)
                    events.append(.failed(error))
                    return
                }
            case .contentLength(let remaining):
                guard !input.isEmpty else { return }
                let count = min(remaining, input.count)
                events.append(.body(input.prefix(count)))
                input = input.dropFirst(count)
                if count == remaining {
                    endMessage(remaining: input, into: &events)
                } else {
                    state = .contentLength(remaining: remaining - count)
                }
            case .chunked:
                guard !input.isEmpty else { return }
                input = decodeChunked(input, into: &events)
            case .untilClose:
                if !input.isEmpty { events.append(.body(input)) }
                return
            case .messageComplete, .upgraded, .closed, .failed:
                return
            }
        }
    }

    /// Feeds the chunked decoder; returns the input left after the message (if it ended).
    private mutating func decodeChunked(_ input: ArraySlice<UInt8>, into events: inout [HTTPPart])
        -> ArraySlice<UInt8>
    {
        var steps: [HTTP1ChunkedDecoder.Step] = []
        chunkedDecoder.decode(input, into: &steps)
        for step in steps {
            switch step {
            case .data(let data):
                events.append(.body(data))
            case .end(let trailers, let consumed):
                if !trailers.isEmpty { events.append(.trailers(trailers)) }
                let rest = input.dropFirst(consumed)
                endMessage(remaining: rest, into: &events)
                return []
            case .failed(let error):
                state = .failed(error)
                events.append(.failed(error))
                return []
            }
        }
        return []
    }

    /// Emits `.messageEnd` and pauses, holding what follows.
    private mutating func endMessage(remaining: ArraySlice<UInt8>, into events: inout [HTTPPart]) {
        events.append(.messageEnd)
        state = .messageComplete
        held = remaining
    }

    /// Parses the collected head, emits it and enters the body state its framing calls for.
    private mutating func headCompleted(
        _ section: ArraySlice<UInt8>, remaining input: inout ArraySlice<UInt8>, into events: inout [HTTPPart]
    ) {
        let framing: HTTPBodyFraming
        do throws(HTTP1ParseError) {
            switch role {
            case .request:
                var head = try HTTP1HeadParser.parseRequest(section)
                framing = try HTTPBodyFraming.forRequest(head)
                if case .contentLength(let length) = framing { head.headers.collapseContentLength(to: length) }
                events.append(.request(head, body: framing))
                #if DEBUG
                    HTTP1TextCounter.countParse()
                #endif
            case .response:
                guard let method = outstandingMethods.first else { throw HTTP1ParseError(.unexpectedResponse) }
                var head = try HTTP1HeadParser.parseResponse(section)
                framing = try HTTPBodyFraming.forResponse(head, requestMethod: method)
                if case .contentLength(let length) = framing { head.headers.collapseContentLength(to: length) }
                events.append(.response(head, body: framing))
                #if DEBUG
                    HTTP1TextCounter.countParse()
                #endif
                if head.isInterim { return }
                outstandingMethods.removeFirst()
            }
        } catch {
            state = .failed(error)
            events.append(.failed(error))
            return
        }
        startBody(framing, remaining: &input, into: &events)
    }

    private mutating func startBody(
        _ framing: HTTPBodyFraming, remaining input: inout ArraySlice<UInt8>, into events: inout [HTTPPart]
    ) {
        switch framing {
        case .none, .contentLength(0):
            endMessage(remaining: input, into: &events)
            input = []
        case .contentLength(let length):
            state = .contentLength(remaining: length)
        case .chunked:
            chunkedDecoder = HTTP1ChunkedDecoder()
            state = .chunked
        case .untilClose:
            state = .untilClose
        case .tunnel:
            state = .upgraded
            events.append(.upgraded(remaining: input))
            input = []
        }
    }
}
