import ATSPolicy
import ATSTLS
import Foundation

/// The state machine of one client connection to the proxy (sans-io): it parses HTTP/1.1 from
/// the client, decides each request with the ATS policy, answers blocked loads itself, runs TLS
/// with the client (minted leaf) and with the upstream (requirements from the decision), judges
/// the upstream handshake, and relays messages. It never touches a socket or a clock: the driver
/// feeds `ProxyEvent`s with the current time and executes the returned `ProxyCommand`s in order.
///
/// Not thread-safe: one driver owns it on one serial queue. It owns its TLS engines.
///
/// This file holds its state and the event dispatch; each job is an extension of its own:
/// `+ClientInput` (parser, client TLS), `+Requests` (decision, forwarding, request parts),
/// `+Connect` (CONNECT, interception, passthrough), `+Upstream` (connection, handshake verdict, retry),
/// `+Response` (relaying a response as HTTP/1.1 text or as a lane's parts), `+LocalAnswers`,
/// `+Finishing` (records, parking, closing), `+Timers` and `+Writing`.
public struct ProxySession {
    /// What the client connection is doing.
    enum Phase {
        /// Reading HTTP/1.1 requests (cleartext, or decrypted inside an intercepted tunnel).
        case http
        /// CONNECT answered with 200; the TLS handshake with the client is in progress.
        case clientHandshake
        /// CONNECT to a passthrough host: probing the upstream before answering.
        case passthroughProbe(host: String, port: Int)
        /// Probe passed; opening the raw tunnel connection.
        case passthroughConnecting(host: String, port: Int)
        /// Bytes relayed both ways without parsing (passthrough tunnel, or after 101).
        case relay
        /// The intercepted client negotiated HTTP/2: `h2` owns the streams, one per request.
        case h2
        /// The connection is being closed; further events are ignored.
        case closed
    }

    /// What the upstream leg is doing.
    enum Upstream {
        /// No upstream connection.
        case none
        /// TCP connect in progress.
        case connecting(UpstreamKey)
        /// TCP open; TLS handshake in progress.
        case handshaking(UpstreamKey, TLSConnection)
        /// Ready for requests (TLS established when the key has requirements).
        case ready(UpstreamKey, TLSConnection?)
    }

    typealias UpstreamKey = ATSProxyCore.UpstreamKey

    /// Methods a lost connection may repeat (RFC 9110 §9.2.2), when the request has no body.
    static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]

    /// An origin as upstream keys name it: host and port, whatever the TLS requirements.
    struct OriginAuthority: Hashable {
        let host: String
        let port: Int
    }

    public let services: ProxyServices
    public let clientAddress: String
    /// N of `Connection N:` in console lines.
    public let connectionNumber: Int
    var taskUUID = TaskUUIDs.next()
    /// `<UUID>>.<` of every task ID of this connection, formatted once (uuidString formats with vfprintf).
    var taskIDPrefix: String
    /// How requests arrive: as a proxy client's, inside an intercepted tunnel, or as an HTTP/2 stream's lane.
    var role: ClientRole = .proxyClient
    /// The client-side protocol recorded for this session's requests.
    var clientProtocol = "http/1.1"
    /// The HTTP/2 side of an intercepted tunnel whose client negotiated h2.
    var h2: HTTP2Frontend?
    var requestCount = 0
    var phase: Phase = .http
    var parser = HTTP1Parser(role: .request)
    var clientTLS: TLSConnection?
    var exchange: Exchange?
    var upstream: Upstream = .none
    /// Plaintext waiting for the upstream to become ready.
    var pendingUpstream: [UInt8] = []
    /// Request parts of the current exchange waiting for the upstream to be ready: they are encoded for it (HTTP/1.1
    /// text, or handed to an HTTP/2 channel as they are) only once it is known which one it is.
    var pendingParts: [HTTP1Event] = []
    /// Plaintext for the client's TLS engine (`sendToClient`, `writeToClient`), sealed by `flushClientTLS` once
    /// the event is handled or before anything that must follow it: a response head and its small body leave as
    /// one record, not one record each.
    var clientPlain: [UInt8] = []
    /// Storage for parser events, reused from feed to feed (`takeEventList`).
    var eventList: [HTTP1Event] = []
    /// TLS facts of the current upstream connection (recorded on every request it carries).
    var upstreamFacts: [String: String]?
    /// The peer IP address of the current upstream connection (`ProxyEvent.upstreamPeer`).
    var upstreamAddress: String?
    /// `http/1.1`, or `h2` when the upstream is a channel of a shared HTTP/2 link.
    var upstreamProtocol = "http/1.1"
    /// Whether the current upstream may go back to the loop's pool when this session is done with it.
    var upstreamShareable = false
    /// The current upstream is ready and carries no exchange.
    var upstreamIdle = false
    var clientReadsPaused = false
    var headerTimerRunning = false
    /// Seconds of the current idle period (between requests) whose timer stages have fired.
    var idleElapsed: Double = 0
    /// This idle period's stages that have run: the TLS engines freed their record buffers
    /// (`bufferLinger`); the upstream went back to the pool (`upstreamLinger`).
    var idleBuffersReleased = false
    var idleUpstreamReleased = false
    /// During an exchange: no bytes moved for `bufferLinger` (an origin thinking, a long poll), so the TLS
    /// engines freed their record buffers; the exchange timer runs on for the rest of `exchangeTimeout`.
    /// Cleared when bytes move again.
    var quietBuffersReleased = false
    /// Set by `drain`: close as soon as the current exchange ends.
    var draining = false
    /// Origins that reset a request's HTTP/2 stream with HTTP_1_1_REQUIRED: for the rest of this session every
    /// request to them asks for an HTTP/1.1-only upstream (`UpstreamKey.http1Only`), as browsers remember it.
    /// Learned per session, never shared: each lane of an HTTP/2 client learns it for itself (and keeps it while
    /// it serves later streams).
    var http11Origins: Set<OriginAuthority> = []
    /// This connection's last decision, what it was made for and under which policy generation: the requests
    /// of a tunnel all go to one origin, so nearly all of them reuse it without the policy store's locks.
    var lastDecision: (generation: Int, key: DecisionCache.Key, decision: ATSDecision, policy: PolicyStore.Snapshot)?
    var commands: [ProxyCommand] = []
    var now = Date(timeIntervalSince1970: 0)

    public init(services: ProxyServices, clientAddress: String, connectionNumber: Int) {
        self.services = services
        self.clientAddress = clientAddress
        self.connectionNumber = connectionNumber
        taskIDPrefix = taskUUID.uuidString + "."
    }

    /// Commands to run right after the connection is accepted (arms the idle timer).
    public mutating func start() -> [ProxyCommand] {
        [.armTimer(seconds: services.settings.idleTimeout)]
    }

    /// A per-stream session of an HTTP/2 client of `parent` (same task UUID, tunnel and client).
    init(streamOf parent: ProxySession) {
        self.init(
            services: parent.services, clientAddress: parent.clientAddress, connectionNumber: parent.connectionNumber)
        taskUUID = parent.taskUUID
        taskIDPrefix = parent.taskIDPrefix
        if let tunnel = parent.role.tunnel { role = .stream(tunnel) }
        clientProtocol = "h2"
    }

    /// A stream session between requests, with nothing in flight (its upstream may be kept for reuse).
    var isIdleForReuse: Bool {
        guard exchange == nil, pendingUpstream.isEmpty else { return false }
        if case .http = phase { return true }
        return false
    }

    /// Whether requests arrive from inside an intercepted tunnel (decrypted, origin-form).
    var inTunnel: Bool { role.isInTunnel }

    /// Whether this session is a stream's lane of an HTTP/2 client (`HTTP2Frontend`).
    var isStreamSession: Bool { role.isStream }

    /// Handles one event at time `now` and returns what the driver must do, in order.
    public mutating func handle(_ event: ProxyEvent, now: Date) -> [ProxyCommand] {
        var out: [ProxyCommand] = []
        handle(event, now: now, into: &out)
        return out
    }

    /// `handle(_:now:)` appending to `out`, an empty list whose storage the caller keeps from event to
    /// event: no command list is allocated per event.
    public mutating func handle(_ event: ProxyEvent, now: Date, into out: inout [ProxyCommand]) {
        swap(&commands, &out)
        run(now: now) { $0.dispatch(event) }
        swap(&commands, &out)
    }

    /// Feeds an HTTP/2 stream's request, already parsed, as request number `number` (stream sessions only).
    mutating func handleStreamRequest(_ events: [HTTP1Event], number: Int?, now: Date) -> [ProxyCommand] {
        run(now: now) { session in
            if let number { session.requestCount = number - 1 }
            session.process(events)
        }
        let out = commands
        commands = []
        return out
    }

    /// Runs `body` for one event and what follows every event (sealing client plaintext, the timer),
    /// appending to `commands`, which the caller empties.
    mutating func run(now: Date, _ body: (inout ProxySession) -> Void) {
        self.now = now
        if case .closed = phase { return }
        body(&self)
        if case .closed = phase {
        } else {
            if let tls = clientTLS { flushClientTLS(tls) }
            updateTimer()
        }
    }

    mutating func dispatch(_ event: ProxyEvent) {
        switch event {
        case .clientBytes(let bytes):
            quietBuffersReleased = false
            clientBytes(bytes)
        case .clientEOF: clientEOF()
        case .upstreamConnected: upstreamConnected()
        case .upstreamPeer(let address): upstreamAddress = address
        case .upstreamReused(let lease): upstreamReused(lease)
        case .upstreamConnectFailed(let code, let detail): upstreamConnectFailed(code, detail: detail)
        case .upstreamParts(let parts): upstreamParts(parts)
        case .upstreamBytes(let bytes):
            quietBuffersReleased = false
            upstreamBytes(bytes)
        case .upstreamEOF: upstreamEOF(reset: false)
        case .upstreamReset: upstreamEOF(reset: true)
        case .upstreamRequiresHTTP11: upstreamRequiresHTTP11()
        case .timerFired: timerFired()
        case .clientGone: clientGone()
        case .drain: drain()
        case .stream(let lane, let inner): streamEvent(lane: lane, inner)
        case .upstreamWritable: break  // Lanes only (see the event); their frontend takes it.
        }
    }

    /// Whether the session wants the driver to stop reading from the client.
    public var wantsClientReadsPaused: Bool { clientReadsPaused }
}
