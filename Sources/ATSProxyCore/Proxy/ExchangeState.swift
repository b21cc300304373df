/// Where one request/response exchange stands, both halves in one value: what the client has sent of its
/// request, what has come back of the response, and whether the proxy forwards it, answers it itself, probes a
/// passthrough tunnel, or has written its record.
///
/// The life of an exchange:
///
///     forwarding(receiving, awaitingResponse)
///       → request: receiving → trailersForwarded → complete        (the client's message, as passed upstream)
///       → response: awaitingResponse → arriving → streaming → complete   (bytes seen, head sent, end sent)
///     forwarding(_, awaitingResponse | arriving) → answeredLocally(request)   (a verdict, a timeout, a bad response)
///     probing → answeredLocally(complete)                                     (a passthrough probe that failed)
///     any state but recorded → recorded                                       (its one record was written)
///
/// Every transition is a mutating method; one that the current state does not allow traps, naming the state
/// and the transition: a session that gets there has lost track of its exchange, and carrying on would send
/// the client a second response or lose a record. Queries (`responseStarted`, `isComplete` …) are total.
enum ExchangeState: Equatable, CustomStringConvertible {
    /// The client's request, as far as it has arrived (and, while forwarding, been passed upstream).
    enum Request: Equatable {
        /// The body (if any) is still arriving.
        case receiving
        /// Trailers ended the body and were passed on; the message end follows.
        case trailersForwarded
        /// The client's message is complete (while forwarding: its end was passed upstream).
        case complete
    }

    /// The response, as far as the origin has sent it and the client has been given it.
    enum Response: Equatable {
        /// Nothing from the origin yet (connecting, TLS, or waiting for the first byte).
        case awaitingResponse
        /// Bytes arrived (perhaps interim 1xx heads), but no final head went to the client yet.
        case arriving
        /// The final head went to the client; the body is on its way.
        case streaming
        /// The whole response went to the client.
        case complete
    }

    /// Sent to the origin; both halves move independently.
    case forwarding(request: Request, response: Response)
    /// The TLS probe of a passthrough CONNECT (the CONNECT itself is the whole request).
    case probing
    /// Answered by the proxy (a block, a failure, an onboarding page): the response is complete; the rest of the
    /// request body, if any, is read and dropped.
    case answeredLocally(request: Request)
    /// Its record was written; nothing more happens to it.
    case recorded

    var description: String {
        switch self {
        case .forwarding(let request, let response): "forwarding(\(request), \(response))"
        case .probing: "probing"
        case .answeredLocally(let request): "answeredLocally(\(request))"
        case .recorded: "recorded"
        }
    }

    // MARK: - Queries

    /// Whether the request goes to the origin (its body is passed on, its response relayed).
    var isForwarding: Bool {
        if case .forwarding = self { return true }
        return false
    }

    /// Whether the client's request is complete.
    var requestComplete: Bool {
        switch self {
        case .forwarding(let request, _), .answeredLocally(let request): request == .complete
        case .probing, .recorded: true
        }
    }

    /// Whether the client's request end (or its trailers) was passed upstream.
    var requestEndForwarded: Bool {
        switch self {
        case .forwarding(let request, _): request != .receiving
        case .probing, .answeredLocally, .recorded: false
        }
    }

    /// Whether a final response head (the origin's or the proxy's) went to the client.
    var responseStarted: Bool {
        switch self {
        case .forwarding(_, let response): response == .streaming || response == .complete
        case .answeredLocally, .recorded: true
        case .probing: false
        }
    }

    /// Whether any byte of the response came from the origin (after that, a lost connection is never retried).
    var responseBytesSeen: Bool {
        switch self {
        case .forwarding(_, let response): response != .awaitingResponse
        case .probing: false
        case .answeredLocally, .recorded: true
        }
    }

    /// Whether the client has its whole response.
    var responseComplete: Bool {
        switch self {
        case .forwarding(_, let response): response == .complete
        case .answeredLocally, .recorded: true
        case .probing: false
        }
    }

    /// Both halves are over: the exchange can be recorded and dropped.
    var isComplete: Bool { requestComplete && responseComplete }

    /// Whether the record was written.
    var isRecorded: Bool { self == .recorded }

    // MARK: - Transitions

    /// The client's trailers ended the body and were passed on (forwarding only, once).
    mutating func requestTrailersForwarded() {
        guard case .forwarding(.receiving, let response) = self else { illegal("requestTrailersForwarded") }
        self = .forwarding(request: .trailersForwarded, response: response)
    }

    /// The client's message ended (and, while forwarding, the end was passed on).
    mutating func requestEnded() {
        switch self {
        case .forwarding(.receiving, let response), .forwarding(.trailersForwarded, let response):
            self = .forwarding(request: .complete, response: response)
        case .answeredLocally(.receiving), .answeredLocally(.trailersForwarded):
            self = .answeredLocally(request: .complete)
        case .forwarding(.complete, _), .answeredLocally(.complete), .probing, .recorded:
            illegal("requestEnded")
        }
    }

    /// Bytes of the response arrived from the origin. Returns whether they are the first ones (the first-byte
    /// time). Legal while forwarding only; later bytes change nothing.
    mutating func responseBytesArrived() -> Bool {
        guard case .forwarding(let request, let response) = self else { illegal("responseBytesArrived") }
        guard response == .awaitingResponse else { return false }
        self = .forwarding(request: request, response: .arriving)
        return true
    }

    /// The origin's final response head went to the client.
    mutating func responseHeadSent() {
        switch self {
        case .forwarding(let request, .awaitingResponse), .forwarding(let request, .arriving):
            self = .forwarding(request: request, response: .streaming)
        case .forwarding(_, .streaming), .forwarding(_, .complete), .probing, .answeredLocally, .recorded:
            illegal("responseHeadSent")
        }
    }

    /// The origin's response ended and its end went to the client.
    mutating func responseEnded() {
        guard case .forwarding(let request, .streaming) = self else { illegal("responseEnded") }
        self = .forwarding(request: request, response: .complete)
    }

    /// A 101 answer switched the connection to a raw relay: both halves are over.
    mutating func upgraded() {
        guard case .forwarding(_, .streaming) = self else { illegal("upgraded") }
        self = .forwarding(request: .complete, response: .complete)
    }

    /// The proxy answered in place of the origin (before any final head from the origin went to the client).
    mutating func answeredLocally() {
        switch self {
        case .forwarding(let request, .awaitingResponse), .forwarding(let request, .arriving):
            self = .answeredLocally(request: request)
        case .probing:
            self = .answeredLocally(request: .complete)
        case .forwarding(_, .streaming), .forwarding(_, .complete), .answeredLocally, .recorded:
            illegal("answeredLocally")
        }
    }

    /// The passthrough probe passed and the tunnel is open: the CONNECT's 200 is the whole response.
    mutating func tunnelOpened() {
        guard case .probing = self else { illegal("tunnelOpened") }
        self = .answeredLocally(request: .complete)
    }

    /// The request goes once more to another upstream: nothing of the first attempt's response was seen.
    mutating func resent() {
        guard case .forwarding(let request, .awaitingResponse) = self else { illegal("resent") }
        self = .forwarding(request: request, response: .awaitingResponse)
    }

    /// Its record was written.
    mutating func record() {
        guard self != .recorded else { illegal("record") }
        self = .recorded
    }

    /// Traps: `transition` is not allowed in the current state.
    private func illegal(_ transition: String) -> Never {
        preconditionFailure("Exchange: \(transition) is not allowed in state \(self)")
    }
}
