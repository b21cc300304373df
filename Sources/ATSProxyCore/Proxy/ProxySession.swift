import ATSPolicy
import ATSTLS
import Foundation

/// The state machine of one client connection to the proxy (sans-io): the client side of the proxy. It parses
/// HTTP/1.1 from the client, answers what is addressed to the proxy itself (onboarding, its info page, loops,
/// bad targets), runs CONNECT (interception with a minted leaf, passthrough), the client-side TLS and the
/// connection's header and idle timers, and hands each request to its `ExchangeLeg`, which decides, connects,
/// judges and relays. When an intercepted client negotiates h2, `HTTP2Frontend` takes the tunnel's streams, each
/// on a leg of its own. It never touches a socket or a clock: the driver feeds `ProxyEvent`s with the current time
/// and executes the returned `ProxyCommand`s in order.
///
/// Not thread-safe: one driver owns it on one event loop. It owns its client TLS engine.
///
/// This file holds its state and the event dispatch; each job is an extension of its own: `+ClientInput` (parser,
/// client TLS), `+Requests` (request heads to the leg), `+Connect` (CONNECT, interception, passthrough),
/// `+Detection` (what a tunnel's client speaks), `+SOCKS` (SOCKS5 on the same port), `+ProxyTLS` (TLS to the proxy), `+LocalAnswers` (answers of its own), `+Finishing` (the leg's
/// signals, closing), `+Timers` and `+Writing`.
public struct ProxySession {
    /// What the client connection is doing.
    enum Phase {
        /// A SOCKS5 client's greeting and request (`+SOCKS`), before its tunnel is granted.
        case socks(SOCKS5Negotiation)
        /// Reading HTTP/1.1 requests (cleartext, or decrypted inside an intercepted tunnel).
        case http
        /// CONNECT answered with 200; the client's first bytes tell what it speaks inside (`TunnelSniffer`).
        case detecting(TunnelDetection)
        /// CONNECT answered with 200; the TLS handshake with the client is in progress.
        case clientHandshake
        /// Raw bytes through the leg: a passthrough tunnel (probed, opening or open), or after 101.
        case tunnel
        /// The intercepted client negotiated HTTP/2: `h2` owns the streams, one per request.
        case h2
        /// The connection is being closed; further events are ignored.
        case closed
    }

    public let services: ProxyServices
    public let clientAddress: String
    /// The proxy's own address on this connection (`host:port`, as the client reached it): what `/proxy.pac`
    /// names. Nil when unknown (then the file is not served).
    public let localAddress: String?
    /// N of `Connection N:` in console lines.
    public let connectionNumber: Int
    let taskUUID: UUID
    /// `<UUID>.` of every task ID of this connection, formatted once (uuidString formats with vfprintf).
    let taskIDPrefix: String
    /// How requests arrive: as a proxy client's, or inside an intercepted tunnel.
    var role: ClientRole = .proxyClient
    /// The HTTP/2 side of an intercepted tunnel whose client negotiated h2.
    var h2: HTTP2Frontend?
    var requestCount = 0
    var phase: Phase = .http
    /// How this connection's client asks for tunnels: an HTTP CONNECT, unless its first byte was a SOCKS5
    /// greeting's (`+SOCKS`).
    var entry: TunnelEntry = .httpConnect
    /// Whether the connection's first bytes were read already (they decide between HTTP and SOCKS).
    var sawFirstBytes = false
    /// TLS to the proxy itself (`+ProxyTLS`): the layer around everything the session reads and writes, when the
    /// connection's first bytes were a TLS record; nil for a cleartext connection.
    var proxyTransport: TLSConnection?
    /// A SOCKS5 CONNECT waits for its reply: a refusal before the tunnel opens is a SOCKS5 reply, not HTTP.
    var socksReplyPending = false
    var parser = HTTP1Parser(role: .request)
    var clientTLS: TLSConnection?
    /// The upstream half of this connection's requests (and of a tunnel's raw bytes). Its command list is the
    /// session's: everything the session does is appended there, in order.
    var leg: ExchangeLeg
    /// Storage for parser events, reused from feed to feed.
    var eventList = HTTPPartList()
    var headerTimerRunning = false
    /// Set by `drain`: close as soon as the current exchange ends.
    var draining = false
    /// `--challenge`: what the client does with the forged TLS this connection presents (nil: a normal one).
    var challenge: ChallengeProbe?
    /// Why the proxy itself is ending the connection (its idle timeout, its shutdown), when it is; nil when the
    /// client or a fault ends it. A challenge without a verdict says so on its record.
    var endedByProxy: String?

    public init(services: ProxyServices, clientAddress: String, connectionNumber: Int, localAddress: String? = nil) {
        self.services = services
        self.clientAddress = clientAddress
        self.localAddress = localAddress
        self.connectionNumber = connectionNumber
        taskUUID = TaskUUIDs.next()
        taskIDPrefix = taskUUID.uuidString + "."
        leg = ExchangeLeg(
            services: services,
            client: ExchangeLeg.Client(
                address: clientAddress, connectionNumber: connectionNumber, taskUUID: taskUUID,
                taskIDPrefix: taskIDPrefix, protocolName: "http/1.1"),
            delivery: .http1(encrypted: false))
    }

    /// Commands to run right after the connection is accepted (arms the idle timer).
    public mutating func start() -> [ProxyCommand] {
        [.armTimer(seconds: services.settings.idleTimeout)]
    }

    /// Whether requests arrive from inside an intercepted tunnel (decrypted, origin-form).
    var inTunnel: Bool { role.isInTunnel }

    /// The current time of the event being handled.
    var now: Date { leg.now }

    /// The exchange in flight, if any (the leg's).
    var exchange: Exchange? { leg.exchange }

    /// Handles one event at time `now` and returns what the driver must do, in order.
    public mutating func handle(_ event: ProxyEvent, now: Date) -> [ProxyCommand] {
        var out: [ProxyCommand] = []
        handle(event, now: now, into: &out)
        return out
    }

    /// `handle(_:now:)` appending to `out`, an empty list whose storage the caller keeps from event to
    /// event: no command list is allocated per event.
    public mutating func handle(_ event: ProxyEvent, now: Date, into out: inout [ProxyCommand]) {
        if let transport = proxyTransport ?? startProxyTLS(event) {
            return handleThroughProxyTLS(event, transport: transport, now: now, into: &out)
        }
        handlePlain(event, now: now, into: &out)
    }

    /// `handle` on the connection's own bytes: cleartext, or the plaintext inside TLS to the proxy.
    mutating func handlePlain(_ event: ProxyEvent, now: Date, into out: inout [ProxyCommand]) {
        swap(&leg.commands, &out)
        leg.now = now
        if case .closed = phase {
        } else {
            dispatch(event)
            if case .closed = phase {
            } else {
                if let tls = clientTLS { flushClientTLS(tls) }
                updateTimer()
            }
        }
        swap(&leg.commands, &out)
    }

    mutating func dispatch(_ event: ProxyEvent) {
        switch event {
        case .clientBytes(let bytes):
            leg.timers.quietBuffersReleased = false
            clientBytes(bytes)
        case .clientEOF: clientEOF()
        case .upstreamConnected, .upstreamPeer, .upstreamReused, .upstreamConnectFailed, .upstreamParts,
            .upstreamBytes, .upstreamEOF, .upstreamReset, .upstreamRequiresHTTP11:
            leg.handleUpstreamEvent(event)
            handleSignals()
        case .timerFired: timerFired()
        case .clientGone: clientGone()
        case .drain: drain()
        case .stream(let lane, let inner): streamEvent(lane: lane, inner)
        case .upstreamWritable: break  // Streams' legs only (see the event); their frontend takes it.
        }
    }

    /// Whether the session wants the driver to stop reading from the client.
    public var wantsClientReadsPaused: Bool { leg.clientReadsPaused }
}
