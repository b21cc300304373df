/// Which established upstream connection a request gets, and which idle ones are kept (sans-io): the decisions of
/// one event loop's pool, without its sockets, timers or TLS engines. The I/O side (`UpstreamPool`) names each
/// connection it hands over by an `Entry` and does what the answers say.
///
/// Rules, in the order they apply:
/// - a request for a key goes on a **shared HTTP/2 link** for that key that can take another stream (the oldest
///   such link first, so streams concentrate and spare links go idle and close);
/// - else on the most recently **parked** HTTP/1.1 connection for that key (last in, first out: the warmest one,
///   least likely to have been closed by the origin's keep-alive timeout);
/// - else on a **new** connection.
/// - An idle HTTP/1.1 connection is parked only when it is shareable (judged without a reported violation) and
///   idle connections are kept at all; a key keeps at most `maximumParkedPerKey` (parking one more evicts that
///   key's oldest) and the loop at most `maximumParked` (one more is refused).
/// - A link is shared only when its lease is shareable.
/// - After `shutdown` nothing is parked or shared again.
/// - A **connect in flight** for a key whose connection may become a shared HTTP/2 link holds the requests for the
///   same key that come meanwhile (up to `maximumWaitersPerPendingLink`, the number of streams RFC 9113 advises
///   a peer to allow at least): a burst of streams shares the link once it is up, instead of opening a connection
///   each. When the opener's connection settles (promoted to a link, HTTP/1.1, failed, gone) the waiters are
///   handed back, to acquire again.
///
/// Keys are `UpstreamKey`s (host, port, TLS requirements, permissive, HTTP/1.1-only), so a connection judged
/// under one decision never carries a request decided otherwise. Not thread-safe: one loop owns it.
public struct UpstreamDirectory {
    /// A connection the directory knows: numbered by the directory, never reused.
    public struct Entry: Hashable, Sendable, CustomStringConvertible {
        let number: Int
        public var description: String { "#\(number)" }
    }

    /// What a request for a key gets.
    public enum Choice: Equatable, Sendable {
        /// A new stream on this shared HTTP/2 link.
        case channel(on: Entry)
        /// This parked HTTP/1.1 connection, which the directory no longer holds.
        case parked(Entry)
        /// Nothing established fits: connect.
        case connect
    }

    /// What happens to an idle HTTP/1.1 connection offered for parking.
    public enum Parking: Equatable, Sendable {
        /// Parked as `entry`; `evicted`, when set, is the key's oldest parked connection, which must close.
        case parked(Entry, evicted: Entry?)
        /// Not kept: close it.
        case refused
    }

    /// Whoever asked for a connection: its owner (a connection driver) and lane.
    public struct Requester: Hashable, Sendable {
        public let owner: ObjectIdentifier
        public let lane: Int32
        public init(owner: ObjectIdentifier, lane: Int32) {
            self.owner = owner
            self.lane = lane
        }
    }

    /// What a request for a key gets when nothing established fits.
    public enum Connecting: Equatable, Sendable {
        /// Connect, and settle the key when the connection's protocol is known (the requester is its opener).
        case open
        /// Wait: a connection for the key is on its way and may become a shared link.
        case wait
        /// Connect (the connection cannot become a shared link, or enough requests wait already).
        case connect
    }

    /// A connect in flight that may become a shared link, and who waits for it.
    struct PendingLink {
        let opener: Requester
        var waiters: [Requester]
    }

    public static let defaultMaximumParkedPerKey = 16
    /// Requests held behind one connect in flight (RFC 9113 §6.5.2 advises at least 100 concurrent streams; the
    /// opener's own stream is one of them).
    public static let maximumWaitersPerPendingLink = 99
    public static let defaultMaximumParked = 1024

    /// Idle HTTP/1.1 connections kept per key (like URLSession's per-host limit).
    public let maximumParkedPerKey: Int
    /// Idle HTTP/1.1 connections kept in all.
    public let maximumParked: Int
    /// Whether idle connections are kept at all (an idle time of zero keeps none).
    public let keepsIdle: Bool

    private var nextNumber = 0
    /// Parked connections per key, oldest first.
    private var parked: [UpstreamKey: [Entry]] = [:]
    private var keyOfParked: [Entry: UpstreamKey] = [:]
    /// Shared links per key, oldest first.
    private var links: [UpstreamKey: [Entry]] = [:]
    private var keyOfLink: [Entry: UpstreamKey] = [:]
    /// Connects in flight that may become shared links, by key.
    private var pendingLinks: [UpstreamKey: PendingLink] = [:]
    public private(set) var isShuttingDown = false

    public init(
        keepsIdle: Bool, maximumParkedPerKey: Int = Self.defaultMaximumParkedPerKey,
        maximumParked: Int = Self.defaultMaximumParked
    ) {
        self.keepsIdle = keepsIdle
        self.maximumParkedPerKey = maximumParkedPerKey
        self.maximumParked = maximumParked
    }

    /// How many connections are parked.
    public var parkedCount: Int { keyOfParked.count }

    /// How many links are shared.
    public var sharedLinkCount: Int { keyOfLink.count }

    /// The connection a request for `key` gets; `canOpenChannel` says whether a shared link can take another
    /// stream now (its stream limit and state are the I/O side's). A parked connection chosen leaves the directory.
    public mutating func acquire(_ key: UpstreamKey, canOpenChannel: (Entry) -> Bool) -> Choice {
        if let link = links[key]?.first(where: canOpenChannel) { return .channel(on: link) }
        guard var waiting = parked[key], let entry = waiting.popLast() else { return .connect }
        parked[key] = waiting.isEmpty ? nil : waiting
        keyOfParked[entry] = nil
        return .parked(entry)
    }

    /// For a request that `acquire` answered with `connect`: whether `requester` opens the connection (and settles
    /// it later), waits behind one already on its way, or just connects. `mayBecomeLink`: the connection could
    /// negotiate h2 (TLS with h2 offered, reusable, not HTTP/1.1-only).
    public mutating func connecting(_ key: UpstreamKey, mayBecomeLink: Bool, requester: Requester) -> Connecting {
        guard mayBecomeLink, !isShuttingDown else { return .connect }
        guard var pending = pendingLinks[key] else {
            pendingLinks[key] = PendingLink(opener: requester, waiters: [])
            return .open
        }
        guard pending.opener != requester, pending.waiters.count < Self.maximumWaitersPerPendingLink else {
            return .connect
        }
        pending.waiters.append(requester)
        pendingLinks[key] = pending
        return .wait
    }

    /// The opener's connection for `key` settled (became a link, stayed HTTP/1.1, failed or went away): the
    /// requests that waited for it, to acquire again. Nothing when `requester` is not the key's opener.
    public mutating func settle(_ key: UpstreamKey, opener requester: Requester) -> [Requester] {
        guard let pending = pendingLinks[key], pending.opener == requester else { return [] }
        pendingLinks[key] = nil
        return pending.waiters
    }

    /// A waiting request went away before its key settled: it is no longer handed back.
    public mutating func stopWaiting(_ key: UpstreamKey, requester: Requester) {
        guard var pending = pendingLinks[key] else { return }
        pending.waiters.removeAll { $0 == requester }
        pendingLinks[key] = pending
    }

    /// How many requests wait behind connects in flight.
    public var waitingCount: Int { pendingLinks.values.reduce(0) { $0 + $1.waiters.count } }

    /// Offers an idle HTTP/1.1 connection for `key` (`shareable`: judged without a reported violation).
    public mutating func park(_ key: UpstreamKey, shareable: Bool) -> Parking {
        guard !isShuttingDown, keepsIdle, shareable else { return .refused }
        var evicted: Entry?
        if var waiting = parked[key], waiting.count >= maximumParkedPerKey {
            let oldest = waiting.removeFirst()
            parked[key] = waiting
            keyOfParked[oldest] = nil
            evicted = oldest
        }
        guard keyOfParked.count < maximumParked else {
            // The loop holds as many as it keeps: the newcomer is not kept (an eviction above made room, so
            // this happens only when the key had none to give up).
            return .refused
        }
        let entry = makeEntry()
        parked[key, default: []].append(entry)
        keyOfParked[entry] = key
        return .parked(entry, evicted: evicted)
    }

    /// A parked connection closed or timed out: it is no longer offered. Unknown entries are ignored (it was
    /// handed out or evicted already).
    public mutating func unpark(_ entry: Entry) {
        guard let key = keyOfParked.removeValue(forKey: entry), var waiting = parked[key] else { return }
        waiting.removeAll { $0 == entry }
        parked[key] = waiting.isEmpty ? nil : waiting
    }

    /// A connection for `key` became an HTTP/2 link: it gets an entry, and is offered to later requests when
    /// `shareable` (and the loop is not shutting down).
    public mutating func addLink(_ key: UpstreamKey, shareable: Bool) -> Entry {
        let entry = makeEntry()
        if shareable && !isShuttingDown {
            links[key, default: []].append(entry)
            keyOfLink[entry] = key
        }
        return entry
    }

    /// A link is over or closing: no new streams go to it. Unknown entries are ignored.
    public mutating func removeLink(_ entry: Entry) {
        guard let key = keyOfLink.removeValue(forKey: entry), var list = links[key] else { return }
        list.removeAll { $0 == entry }
        links[key] = list.isEmpty ? nil : list
    }

    /// Shutdown: returns every parked connection (to close) and every shared link (to send GOAWAY); nothing is
    /// kept or shared from now on.
    public mutating func shutdown() -> (parked: [Entry], links: [Entry]) {
        isShuttingDown = true
        // Waiters are not dropped: each opener still settles its key and hands them back, to connect.
        let closing = (parked.values.flatMap { $0 }, links.values.flatMap { $0 })
        parked = [:]
        keyOfParked = [:]
        links = [:]
        keyOfLink = [:]
        return closing
    }

    private mutating func makeEntry() -> Entry {
        nextNumber += 1
        return Entry(number: nextNumber)
    }
}
