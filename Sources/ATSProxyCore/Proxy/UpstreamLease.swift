import ATSPolicy
import ATSTLS

/// Identity of a reusable upstream connection: host, port, and the TLS requirements it was judged
/// against (nil for cleartext). Connections are only ever reused for an identical key, so a request
/// never rides on a connection judged under another decision.
public struct UpstreamKey: Hashable, Sendable {
    public var host: String
    public var port: Int
    public var requirements: TLSRequirements?
    /// `--mode report` offers everything upstream; such connections never mix with enforced ones.
    public var permissive: Bool
    /// Offer only `http/1.1` in ALPN: HTTP/1.1 Upgrade requests (WebSockets), which HTTP/2 cannot carry.
    public var http1Only: Bool

    public init(host: String, port: Int, requirements: TLSRequirements?, permissive: Bool, http1Only: Bool = false) {
        self.host = host
        self.port = port
        self.requirements = requirements
        self.permissive = permissive
        self.http1Only = http1Only
    }
}

/// An established, judged upstream connection's protocol state as it moves between a session and its
/// event loop's pool: the TLS engine (nil for cleartext, and for a channel of a shared HTTP/2 link, whose
/// link owns the TLS), the handshake facts recorded on every request it carries, and the protocol.
///
/// Loop-confined: created, handed over and used only on one event loop (the invariant behind
/// `@unchecked Sendable`). The TLS engine has one user at a time: the session, or the pool while parked.
public final class UpstreamLease: @unchecked Sendable {
    public let key: UpstreamKey
    public let tls: TLSConnection?
    /// TLS facts of the handshake that established the connection (nil for cleartext).
    public let facts: [String: String]?
    /// What the connection speaks: HTTP/1.1, or h2 for a channel of a shared link.
    public let wire: UpstreamWire
    /// Whether other sessions may share it (false for connections whose ATS violations were only reported).
    public let shareable: Bool

    public init(key: UpstreamKey, tls: TLSConnection?, facts: [String: String]?, wire: UpstreamWire, shareable: Bool) {
        self.key = key
        self.tls = tls
        self.facts = facts
        self.wire = wire
        self.shareable = shareable
    }

    /// What a parked (idle, pooled) connection does with bytes from the origin: TLS 1.3 session tickets
    /// and other post-handshake records are absorbed; application data, alerts or EOF end the connection.
    public enum IdleVerdict: Equatable, Sendable {
        /// Keep it parked; write these bytes (TLS records the engine produced) if not empty.
        case keep([UInt8])
        /// Close it.
        case discard
    }

    /// Feeds bytes that arrived while the connection was parked: kept (with the records the engine answered)
    /// when they decrypt to nothing and did not end the connection; discarded otherwise, and when cleartext.
    public func absorbWhileIdle(_ bytes: [UInt8]) -> IdleVerdict {
        guard let tls else { return .discard }
        let layer = TLSLayer(tls)
        let inbound = layer.decrypt(bytes)
        guard inbound.plaintext.isEmpty, inbound.end == nil else { return .discard }
        return .keep(layer.takeRecords())
    }
}
