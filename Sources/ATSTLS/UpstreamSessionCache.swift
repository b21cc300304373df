internal import COpenSSL
import Foundation
import Synchronization

/// One resumable upstream TLS session together with the certificate facts of the full handshake
/// that established it. Owns one reference to the `SSL_SESSION`; `deinit` frees it. Immutable,
/// hence `@unchecked Sendable` (OpenSSL allows concurrent `SSL_set_session` of one session).
final class CachedUpstreamSession: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The summary of the full handshake behind this session (chain, verification, SCTs, OCSP).
    let facts: HandshakeSummary
    /// After this the session is not offered again.
    let expires: Date

    init(taking pointer: OpaquePointer, facts: HandshakeSummary, expires: Date) {
        self.pointer = pointer
        self.facts = facts
        self.expires = expires
    }

    deinit { SSL_SESSION_free(pointer) }
}

/// Upstream TLS sessions for resumption, one per (offer, host, port): the latest ticket a server
/// issued on a connection whose full handshake the proxy summarized.
///
/// Why resumption keeps the judgement correct: a resumed handshake carries no certificates, so
/// its summary takes the certificate facts (presented and built chain, verification issues,
/// anchor, SCTs, OCSP, handshake signature digest, and the time they were verified at) from the
/// full handshake that created the session, and the live facts (version, cipher, group, ALPN)
/// from the resumed connection. The server proved possession of that session's secret, which it
/// only obtained by completing the full handshake with that chain (CFNetwork likewise keeps the
/// trust result of a session it resumes). A session is offered only to the same host with the
/// same ClientHello configuration, and at most `lifetime` after the full handshake, never past
/// the session's own timeout or the leaf's notAfter; `--upstream-ca` trust is fixed for the
/// process, and a reloaded policy that changes requirements changes the offer and thus the key.
///
/// Thread-safe: entries live behind a `Mutex`.
public final class UpstreamSessionCache: Sendable {
    /// How long after the full handshake a session may be offered.
    public let lifetime: TimeInterval
    /// Most entries kept; beyond it the entry closest to expiry is dropped.
    public let capacity: Int
    private let clock: @Sendable () -> Date
    private let entries = Mutex<[String: CachedUpstreamSession]>([:])

    public init(
        lifetime: TimeInterval = 300, capacity: Int = 4096, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.lifetime = lifetime
        self.capacity = capacity
        self.clock = clock
    }

    /// Sessions currently held.
    public var count: Int { entries.withLock { $0.count } }

    /// Forgets every session (tests; a changed trust store).
    public func removeAll() { entries.withLock { $0.removeAll() } }

    static func key(offer: ObjectIdentifier, host: String, port: Int?) -> String {
        "\(UInt(bitPattern: offer.hashValue))|\(host.lowercased())|\(port.map(String.init) ?? "-")"
    }

    func lookup(_ key: String) -> CachedUpstreamSession? {
        let now = clock()
        return entries.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard entry.expires > now else {
                entries[key] = nil
                return nil
            }
            return entry
        }
    }

    /// Takes ownership of `session` (one reference) and keeps it for `key` with `facts`.
    func store(_ session: OpaquePointer, facts: HandshakeSummary, key: String) {
        let now = clock()
        let issued = Date(timeIntervalSince1970: TimeInterval(SSL_SESSION_get_time(session)))
        let timeout = TimeInterval(SSL_SESSION_get_timeout(session))
        var expires = min(now.addingTimeInterval(lifetime), issued.addingTimeInterval(timeout))
        if let leaf = facts.leaf { expires = min(expires, leaf.notAfter) }
        let entry = CachedUpstreamSession(taking: session, facts: facts, expires: expires)
        guard expires > now else { return }
        entries.withLock { entries in
            if entries[key] == nil, entries.count >= capacity {
                entries = entries.filter { $0.value.expires > now }
                if entries.count >= capacity, let soonest = entries.min(by: { $0.value.expires < $1.value.expires }) {
                    entries[soonest.key] = nil
                }
            }
            entries[key] = entry
        }
    }

    func remove(_ key: String) { _ = entries.withLock { $0.removeValue(forKey: key) } }
}
