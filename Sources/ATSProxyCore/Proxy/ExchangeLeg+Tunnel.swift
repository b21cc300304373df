import ATSPolicy
import ATSTLS
import Foundation

/// Tunnels: a passthrough CONNECT's probe (an exchange that only judges the upstream handshake), the raw tunnel
/// connection opened after it, and raw bytes both ways (a tunnel, or a connection after 101 Switching Protocols).
extension ExchangeLeg {
    /// Starts the probe of a passthrough CONNECT to `host:port`: `exchange` (in state `probing`) is judged on a
    /// connection of its own under `key`; if it passes, the raw tunnel opens (`tunnelOpened`), otherwise the
    /// CONNECT is answered with the failure.
    mutating func startProbe(_ exchange: Exchange, key: UpstreamKey, host: String, port: Int) {
        precondition(self.exchange == nil && carriesExchanges, "ExchangeLeg.startProbe: \(mode)")
        lastNumber = exchange.number
        // An idle upstream of earlier requests on this proxy connection goes back to the pool first.
        releaseOrCloseUpstream()
        self.exchange = exchange
        mode = .probe(host: host, port: port)
        openUpstream(key, reusable: false)
    }

    /// Opens a raw tunnel to `host:port` without a probe (a host the host filter leaves alone).
    mutating func openTunnel(host: String, port: Int) {
        precondition(exchange == nil && carriesExchanges, "ExchangeLeg.openTunnel: \(mode)")
        releaseOrCloseUpstream()
        mode = .tunnelConnecting(host: host, port: port)
        openUpstream(UpstreamKey(host: host, port: port, requirements: nil, permissive: false), reusable: false)
    }

    /// Opens a raw tunnel to `host:port` for a client that spoke neither TLS nor HTTP after CONNECT
    /// (`--tunnel-unknown relay`): `exchange` (in state `probing`, no TLS requirements) is its record, written with
    /// 200 once the connection is open, or with the failure when it cannot be made.
    mutating func openRawTunnel(_ exchange: Exchange, host: String, port: Int) {
        precondition(self.exchange == nil && carriesExchanges, "ExchangeLeg.openRawTunnel: \(mode)")
        lastNumber = exchange.number
        releaseOrCloseUpstream()
        let key = UpstreamKey(host: host, port: port, requirements: nil, permissive: false)
        exchange.attempt.key = key
        self.exchange = exchange
        mode = .tunnelConnecting(host: host, port: port)
        openUpstream(key, reusable: false)
    }

    /// The tunnel's connection is open: the probe's record (200) is written and raw bytes flow from now on.
    mutating func tunnelOpened() {
        if let exchange {
            exchange.response.status = 200
            exchange.state.tunnelOpened()
            logExchange()
        }
        exchange = nil
        mode = .relay
        signals.append(.tunnelOpened)
        flushPendingUpstream()
    }

    /// Raw bytes from the client of a tunnel (held while its connection opens).
    mutating func relayFromClient(_ bytes: [UInt8]) {
        switch mode {
        case .probe, .tunnelConnecting:
            upstream.pendingBytes.append(contentsOf: bytes)
        case .relay:
            sendToUpstream(bytes)
        case .closed:
            break
        case .exchanges:
            preconditionFailure("ExchangeLeg.relayFromClient: a leg carrying exchanges relays no raw bytes")
        }
    }

    /// Whether the leg relays raw bytes already (not still setting a tunnel up).
    var isRelaying: Bool {
        if case .relay = mode { return true }
        return false
    }
}
