import ATSTLS
import Synchronization

/// What the client side of one new connection gets.
public enum ChallengeAssignment: Sendable, Hashable, CustomStringConvertible {
    /// The proxy's normal leaf and handshake.
    case normal
    /// This challenge, instead of the normal leaf.
    case challenge(ChallengeKind)

    public var description: String {
        switch self {
        case .normal: "normal"
        case .challenge(let kind): "challenge \(kind)"
        }
    }
}

/// Decides, for every new client connection, whether it is challenged and with which kind.
///
/// Hosts no spec matches always get `.normal`. For a challenged host (the first matching spec gives
/// its kinds) the proxy counts that host's connections; with `every` = N, every Nth connection is
/// challenged (the Nth, the 2Nth, …) and the others get the normal leaf, so that the app keeps working
/// while it is tested. Successive challenges of a host take its kinds in order and start over after the
/// last. The default N is 2: the first connection of a host is normal (the app's first request goes
/// through, whatever it does with a refused one), then challenged and normal connections alternate,
/// which halves the app's failed connections compared with N = 1 and still puts every kind to the
/// test within 2 × kinds connections. N = 1 challenges every connection.
///
/// The counters live per host name (normalized like leaf names), not per port. Thread-safe: one
/// `Mutex` around the counters; `assign` is a dictionary update.
public final class ChallengeRotation: Sendable {
    /// One challenged connection in this many, unless the caller says otherwise.
    public static let defaultEvery = 2

    /// The `--challenge` values, in the order given.
    public let specs: [ChallengeSpec]
    /// One challenged connection in `every`.
    public let every: Int
    private let connections = Mutex<[String: Int]>([:])

    /// - Precondition: `every` ≥ 1 (`ChallengeSpec.parseEvery` checks user input).
    public init(specs: [ChallengeSpec], every: Int = ChallengeRotation.defaultEvery) {
        precondition(every >= 1, "ChallengeRotation.every must be at least 1, got \(every)")
        self.specs = specs
        self.every = every
    }

    /// The kinds `host` is challenged with (from the first spec that matches it), or nil when it is
    /// not challenged.
    public func kinds(for host: String) -> [ChallengeKind]? {
        specs.first { $0.matches(host: host) }?.kinds
    }

    /// Counts one new client connection to `host` and says what it gets.
    public func assign(host: String) -> ChallengeAssignment {
        guard let kinds = kinds(for: host), !kinds.isEmpty else { return .normal }
        let name = LeafCertificateCache.normalize(host)
        let number = connections.withLock { counts in
            let number = (counts[name] ?? 0) + 1
            counts[name] = number
            return number
        }
        return Self.assignment(connection: number, every: every, kinds: kinds)
    }

    /// The pure rule: what the `connection`th connection (1-based) of a host gets.
    public static func assignment(connection: Int, every: Int, kinds: [ChallengeKind]) -> ChallengeAssignment {
        guard connection >= 1, every >= 1, !kinds.isEmpty, connection % every == 0 else { return .normal }
        return .challenge(kinds[(connection / every - 1) % kinds.count])
    }

    /// Connections counted so far for `host` (0 for hosts never seen or not challenged).
    public func connectionCount(host: String) -> Int {
        connections.withLock { $0[LeafCertificateCache.normalize(host)] ?? 0 }
    }
}
