import ATSPolicy
import ATSTLS
import Foundation

/// The upstream half of a client's requests (sans-io): it takes one request at a time from its owner, decides it
/// with the ATS policy, leases or opens the upstream the decision calls for, runs and judges the upstream TLS,
/// forwards the request's parts, relays the response's parts back, answers failures itself, retries what may be
/// retried and writes the record. It owns the current `Exchange` and the upstream connection (which outlives
/// exchanges: kept alive, parked in the loop's pool, or promoted to a shared HTTP/2 link).
///
/// Two owners hold legs: `ProxySession` (one leg for an HTTP/1.1 client, also carrying a CONNECT tunnel's raw
/// bytes) and `HTTP2Frontend` (one leg per busy or idle stream slot). The leg knows nothing of its owner's
/// parser, client TLS or HTTP/2 session: it appends `ProxyCommand`s for its upstream, its timer and the logs to
/// `commands`, delivers the response as the owner's client expects it (`Delivery`), and tells the owner what only
/// the owner can do with `signals` (read the next request, close the client, switch to raw bytes).
///
/// Not thread-safe: used on the event loop of its owner's driver. It owns its upstream TLS engine.
struct ExchangeLeg {
    /// How responses reach the owner's client.
    enum Delivery {
        /// HTTP/1.1 text (`HTTP1ResponseEncoder`): appended to `clientPlain` when `encrypted` (the owner seals it
        /// with its client TLS engine), otherwise written with `writeToClient` commands.
        case http1(encrypted: Bool)
        /// Message parts for one HTTP/2 stream (`ProxyCommand.respond`); the frontend frames them.
        case stream
    }

    /// What the leg carries.
    enum Mode {
        /// Exchanges, one at a time.
        case exchanges
        /// A passthrough CONNECT: the probe exchange judges the upstream before the tunnel opens.
        case probe(host: String, port: Int)
        /// The probe passed (or the host is left alone): the raw tunnel connection is opening.
        case tunnelConnecting(host: String, port: Int)
        /// Raw bytes both ways (a passthrough tunnel, or after 101 Switching Protocols).
        case relay
        /// Shut down; further input is ignored.
        case closed
    }

    /// What the owner must do after a call, in order.
    enum Signal {
        /// The exchange ended with its whole response; the owner may read the next request when `keepAlive`.
        case finished(keepAlive: Bool)
        /// The client connection (or HTTP/2 stream) must end: the leg has shut down.
        case closeClient
        /// 101 Switching Protocols was relayed: the owner passes client bytes through as they are from now on.
        case upgraded
        /// A passthrough tunnel's upstream is open: the owner answers the CONNECT and relays raw bytes.
        case tunnelOpened
        /// A SOCKS5 client's passthrough probe failed: the owner answers with the SOCKS5 reply `code` (the leg
        /// writes no HTTP to a SOCKS client). The leg shuts down after it.
        case tunnelRefused(SOCKS5Reply.Code)
    }

    /// An origin as upstream keys name it: host and port, whatever the TLS requirements.
    struct OriginAuthority: Hashable {
        let host: String
        let port: Int
    }

    /// Who the requests are from, as records and console lines name it.
    struct Client {
        let address: String
        /// N of `Connection N:` in console lines.
        let connectionNumber: Int
        let taskUUID: UUID
        /// `<UUID>.` of every task ID, formatted once (uuidString formats with vfprintf).
        let taskIDPrefix: String
        /// `http/1.1` or `h2`: the client-side protocol recorded.
        let protocolName: String
    }

    /// Methods a lost connection may repeat (RFC 9110 §9.2.2), when the request has no body.
    static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]

    let services: ProxyServices
    let client: Client
    var delivery: Delivery
    /// How the owner's client reached the proxy, for the records (set by the owner as it learns it).
    var route: ProxyRoute = .absoluteForm
    var mode: Mode = .exchanges
    var exchange: Exchange?
    /// The upstream connection, its state and what waits for it (one at a time; it outlives exchanges).
    var upstream = UpstreamLeg()
    /// Client-bound plaintext for an encrypted HTTP/1.1 client (`Delivery.http1(encrypted: true)`): the owner seals
    /// it once the event is handled, or before anything that must follow it, so a response head and its small
    /// body leave as one record.
    var clientPlain: [UInt8] = []
    /// Storage for response parser events, reused from feed to feed.
    var eventList = HTTPPartList()
    /// Origins that reset a request's HTTP/2 stream with HTTP_1_1_REQUIRED: for the rest of this leg's life every
    /// request to them asks for an HTTP/1.1-only upstream (`UpstreamKey.http1Only`), as browsers remember it.
    /// Learned per leg, never shared.
    var http11Origins: Set<OriginAuthority> = []
    /// The last decision, what it was made for and under which policy generation: the requests of a tunnel all
    /// go to one origin, so nearly all of them reuse it without the policy store's locks.
    var lastDecision: (generation: Int, key: DecisionCache.Key, decision: ATSDecision, policy: PolicyStore.Snapshot)?
    /// The number of the last exchange started (console lines of a leg between exchanges name it).
    var lastNumber = 0
    /// The timer stages (see `+Timers`).
    var timers = LegTimers()
    /// Whether the owner's client reads are paused (the upstream is still opening).
    var clientReadsPaused = false
    var commands: [ProxyCommand] = []
    var signals: [Signal] = []
    var now = Date(timeIntervalSince1970: 0)

    init(services: ProxyServices, client: Client, delivery: Delivery) {
        self.services = services
        self.client = client
        self.delivery = delivery
    }

    /// Whether requests' responses go to an HTTP/2 stream.
    var deliversToStream: Bool {
        if case .stream = delivery { return true }
        return false
    }

    /// Whether the leg carries exchanges (not a tunnel, not shut down).
    var carriesExchanges: Bool {
        if case .exchanges = mode { return true }
        return false
    }

    /// Whether the leg is between exchanges with nothing in flight (its upstream may be kept for reuse).
    var isIdleForReuse: Bool { exchange == nil && upstream.pendingBytes.isEmpty && carriesExchanges }

    /// Handles an event of the leg's upstream connection or its timer. Client events are the owner's: one here
    /// is a driver fault.
    mutating func handleUpstreamEvent(_ event: ProxyEvent) {
        switch event {
        case .upstreamConnected: upstreamConnected()
        case .upstreamPeer(let address): upstream.address = address
        case .upstreamReused(let lease): upstreamReused(lease)
        case .upstreamConnectFailed(let failure): upstreamConnectFailed(failure)
        case .upstreamParts(let parts): upstreamParts(parts)
        case .upstreamBytes(let bytes):
            timers.quietBuffersReleased = false
            upstreamBytes(bytes)
        case .upstreamEOF: upstreamEOF(reset: false)
        case .upstreamReset: upstreamEOF(reset: true)
        case .upstreamRequiresHTTP11: upstreamRequiresHTTP11()
        case .timerFired, .upstreamWritable, .clientBytes, .clientEOF, .clientGone, .drain, .stream:
            preconditionFailure("ExchangeLeg: \(event) is not an event of the upstream")
        }
    }
}
