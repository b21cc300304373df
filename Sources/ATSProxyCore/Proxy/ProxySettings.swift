import ATSPolicy
import Foundation
import Synchronization

/// How the proxy treats violations.
public enum EnforcementMode: String, Sendable, CaseIterable {
    /// Block what ATS blocks (default).
    case enforce
    /// Log every violation but let the traffic through, connecting upstream without ATS constraints.
    case report
}

/// What happens to a cleartext load that ATS blocks.
public enum CleartextHandling: String, Sendable, CaseIterable {
    /// Answer 403 with the -1022 explanation (default).
    case block
    /// Fetch the same URL over https:// under the host's ATS requirements instead.
    case upgrade
}

/// What happens to a CONNECT tunnel whose client speaks neither TLS nor HTTP (`--tunnel-unknown`).
public enum TunnelUnknownHandling: String, Sendable, CaseIterable {
    /// Close the tunnel and record what was seen (default).
    case refuse
    /// Relay the raw bytes to the CONNECT authority when the policy allows cleartext to that host; recorded.
    case relay
}

/// Where the request source comes from.
public enum SourceSetting: Sendable, Equatable {
    /// Read the User-Agent (`RequestSourceDetector`).
    case auto
    /// Always this source.
    case fixed(RequestSource)
}

/// Settings of a running proxy that are not the ATS policy itself. Immutable; shared by all
/// sessions.
public struct ProxySettings: Sendable {
    public var mode: EnforcementMode = .enforce
    public var cleartext: CleartextHandling = .block
    /// What a tunnel gets whose client speaks neither TLS nor HTTP after CONNECT.
    public var tunnelUnknown: TunnelUnknownHandling = .refuse
    /// `--proxy-auth`: the credentials every proxy client must present (HTTP Basic, SOCKS5 username/password); nil
    /// for none (the default: the listener is on loopback or limited by `--allow-client`).
    public var proxyCredentials: ProxyCredentials?
    public var source: SourceSetting = .auto
    /// Hosts tunnelled without interception (suffix match with a leading dot).
    public var passthroughHosts: [String] = []
    /// Tunnel hosts under NSPinnedDomains without interception (the app would reject minted leaves).
    public var passthroughPinnedDomains: Bool = true
    /// Process name used in console lines (from CFBundleExecutable when known).
    public var processName: String = "App"
    /// Seconds to receive a complete request head once it has started.
    public var headerTimeout: Double = 30
    /// Seconds an idle keep-alive client connection is kept.
    public var idleTimeout: Double = 60
    /// Seconds an idle keep-alive client connection keeps its upstream connection before handing it back
    /// to the loop's pool (0: kept until the client connection closes). The client's next request takes
    /// one from the pool again, so a thousand idle clients hold a few parked upstreams, not a thousand.
    public var upstreamLinger: Double = 1
    /// Seconds an idle HTTP/1.1 connection keeps the TLS record buffers of its engines (about 34 KiB each)
    /// before freeing them (0: freed whenever an engine runs dry, which costs allocations per record).
    /// Short, so that back-to-back requests keep them while a burst of connections going idle does not
    /// pile up freed buffers the allocator keeps as resident memory.
    public var bufferLinger: Double = 0.05
    /// Seconds an exchange may go without any progress from either side (a stalled origin
    /// handshake or response, or a client that stops sending its body).
    public var exchangeTimeout: Double = 60
    /// Seconds an upstream TLS handshake may go without progress once its TCP connection is open (`--connect-timeout`,
    /// which times the TCP connect in the driver as well): a silent TLS server fails with -1001 after it.
    public var connectTimeout: Double = 15
    /// host:port pairs that address the proxy itself (requests to them are never proxied). A
    /// shared book, completed with the real ports once the listeners are bound.
    public var selfAuthorities = AuthorityBook()
    /// Which clients may reach the proxy host's own services (`--allow-local-targets`).
    public var localTargets = LocalTargetPolicy()
    /// Port used for `--cleartext upgrade` (443 unless mapped).
    public var upgradePort: Int = 443
    /// Hosts left alone (`--ignore-hosts`, `--allow-hosts`): tunnelled or forwarded without judging.
    public var hostFilter = HostFilter()
    /// `--system-services-hosts`: hosts also judged by the system-services profile (nil: none).
    public var systemServices: SystemServicesSetting?
    /// Records carry `HandshakeSummary.detailedFacts` too (chain, names, SCTs) and their phase timings
    /// (for the live view and the HAR).
    public var detailedRecords = false
    /// Bytes of each request and response body a record keeps (`--capture-bodies`; 0: none).
    public var captureBodyLimit = 0

    public init() {}

    /// Whether `host` is listed for passthrough.
    public func isPassthroughHost(_ host: String) -> Bool {
        let host = host.lowercased()
        return passthroughHosts.contains { pattern in
            let pattern = pattern.lowercased()
            if pattern.hasPrefix(".") { return host.hasSuffix(pattern) || host == String(pattern.dropFirst()) }
            return host == pattern
        }
    }
}

/// The ATS policy in force, replaceable at run time (SIGHUP) without dropping connections: each
/// request takes the evaluator current when it starts.
public final class PolicyStore: Sendable {
    /// One loaded policy.
    public struct Snapshot: Sendable {
        public let evaluator: ATSEvaluator
        /// Where it came from, for logs.
        public let sourceSummary: String
        public let processName: String?
        /// Decisions already made under this policy (the evaluator is pure, so they never change).
        let cache = DecisionCache()

        public init(evaluator: ATSEvaluator, sourceSummary: String, processName: String?) {
            self.evaluator = evaluator
            self.sourceSummary = sourceSummary
            self.processName = processName
        }

        /// The decision for `target` and `source`, computed once per distinct (scheme, host,
        /// port, source) under this policy. The URL in the returned decision is `target`'s.
        public func decide(_ target: RequestTarget, source: RequestSource) -> ATSDecision {
            let key = DecisionCache.Key(target, source: source)
            if let cached = cache.lookup(key) { return cached.retargeted(target) }
            let decision = evaluator.evaluate(target, source: source)
            cache.store(key, decision)
            return decision
        }
    }

    private let current: Mutex<Snapshot>
    /// Counts replacements, so that a session can tell without the lock that a decision it kept is current.
    private let replacements = Atomic<Int>(0)

    public init(_ snapshot: Snapshot) { current = Mutex(snapshot) }

    /// The policy in force now.
    public var snapshot: Snapshot { current.withLock { $0 } }

    /// Changes whenever the policy is replaced (read it before `snapshot`: a decision made after reading
    /// generation G is current for as long as `generation` is still G).
    public var generation: Int { replacements.load(ordering: .acquiring) }

    /// Replaces the policy; requests already running keep the one they started with.
    public func replace(with snapshot: Snapshot) {
        current.withLock { $0 = snapshot }
        replacements.add(1, ordering: .releasing)
    }
}

/// A bounded cache of decisions for one policy snapshot. Thread-safe (a mutex); cleared wholesale
/// when full, which is cheap and keeps the worst case bounded.
final class DecisionCache: Sendable {
    /// What a decision depends on besides the policy (the path and query do not matter to ATS).
    struct Key: Hashable, Sendable {
        let scheme: URLScheme
        let host: String
        let port: Int
        let source: RequestSource

        init(scheme: URLScheme, host: String, port: Int, source: RequestSource) {
            self.scheme = scheme
            self.host = host
            self.port = port
            self.source = source
        }

        init(_ target: RequestTarget, source: RequestSource) {
            self.init(scheme: target.scheme, host: target.host, port: target.port, source: source)
        }
    }

    static let capacity = 4096
    private let entries = Mutex<[Key: ATSDecision]>([:])

    func lookup(_ key: Key) -> ATSDecision? { entries.withLock { $0[key] } }

    func store(_ key: Key, _ decision: ATSDecision) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = decision
        }
    }
}

/// A thread-safe set of `host:port` strings (the proxy's own addresses). A reference type so that
/// addresses learnt after binding (port 0) reach every session that shares the settings.
public final class AuthorityBook: Sendable, ExpressibleByArrayLiteral {
    private let entries: Mutex<Set<String>>

    public init(_ entries: Set<String> = []) { self.entries = Mutex(entries) }

    public convenience init(arrayLiteral elements: String...) { self.init(Set(elements)) }

    public func contains(_ authority: String) -> Bool { entries.withLock { $0.contains(authority) } }

    public func insert(contentsOf authorities: some Sequence<String>) {
        entries.withLock { $0.formUnion(authorities) }
    }
}
