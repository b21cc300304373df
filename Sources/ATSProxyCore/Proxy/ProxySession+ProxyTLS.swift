import ATSPolicy
import ATSTLS
import Foundation

/// TLS to the proxy itself (an `https://` proxy: `curl --proxy https://…`, Chrome's HTTPS proxies,
/// `ProxyConfiguration(httpCONNECTProxy:tlsOptions:)`): a connection whose first bytes are a TLS record gets a
/// server handshake with a leaf the proxy's CA mints for the name the client asked for (SNI), or for the address it
/// reached when it sent none. HTTP/1.1 only in ALPN. Inside, the session runs exactly as on a cleartext connection
/// (absolute-form requests, CONNECT with interception, cleartext or raw tunnels), so the outer layer lives here only:
/// client bytes are decrypted before the session sees them, and everything the session writes to the client is
/// sealed, in order, before the driver sees it. An intercepted tunnel inside is TLS in TLS: its records are the
/// plaintext of this layer. Records carry `TLS+…` routes.
extension ProxySession {
    /// The engine for TLS to the proxy when `event` is the connection's first bytes and they start a TLS record;
    /// nil otherwise (and always after the first bytes).
    mutating func startProxyTLS(_ event: ProxyEvent) -> TLSConnection? {
        guard !sawFirstBytes, case .clientBytes(let bytes) = event, bytes.first == 0x16, case .http = phase,
            clientTLS == nil, let context = services.proxyTLS,
            let engine = try? context.makeConnection(connectHost: Self.proxyHostName(localAddress))
        else { return nil }
        // The plaintext inside is the HTTP proxy protocol; no second detection (SOCKS) runs on it.
        sawFirstBytes = true
        entry = .tlsConnect
        leg.route = .tlsAbsoluteForm
        proxyTransport = engine
        return engine
    }

    /// Handles `event` through TLS to the proxy: the handshake first, then the plaintext both ways.
    mutating func handleThroughProxyTLS(
        _ event: ProxyEvent, transport: TLSConnection, now: Date, into out: inout [ProxyCommand]
    ) {
        let layer = TLSLayer(transport)
        guard case .clientBytes(let ciphertext) = event else {
            return handleSealed(event, layer: layer, now: now, into: &out)
        }
        switch layer.state {
        case .handshaking:
            let step = layer.handshake(ciphertext)
            if layer.hasRecords { out.append(.writeToClient(layer.takeRecords())) }
            switch step {
            case .needsInput:
                return
            case .failed(let failure):
                return proxyTLSFailed(failure, now: now, into: &out)
            case .complete:
                deliver(layer.decrypt([]), layer: layer, now: now, into: &out)
            }
        case .established, .closed, .failed:
            deliver(layer.decrypt(ciphertext), layer: layer, now: now, into: &out)
        }
    }

    /// Hands the decrypted bytes (and the client's end, if it came) to the session.
    mutating func deliver(_ inbound: TLSLayer.Inbound, layer: TLSLayer, now: Date, into out: inout [ProxyCommand]) {
        if !inbound.plaintext.isEmpty {
            handleSealed(.clientBytes(inbound.plaintext), layer: layer, now: now, into: &out)
        }
        switch inbound.end {
        case nil: break
        case .closed?: handleSealed(.clientEOF, layer: layer, now: now, into: &out)
        case .failed?: handleSealed(.clientGone, layer: layer, now: now, into: &out)
        }
    }

    /// Runs `event` through the session and seals what it writes to the client; before the client connection is
    /// closed, this layer's close_notify follows the last sealed bytes.
    mutating func handleSealed(_ event: ProxyEvent, layer: TLSLayer, now: Date, into out: inout [ProxyCommand]) {
        let start = out.count
        handlePlain(event, now: now, into: &out)
        guard out.count > start else { return }
        let produced = Array(out[start...])
        out.removeSubrange(start...)
        for command in produced {
            switch command {
            case .writeToClient(let plaintext):
                switch layer.state {
                case .established:
                    layer.seal(plaintext)
                    if layer.hasRecords { out.append(.writeToClient(layer.takeRecords())) }
                case .handshaking, .closed, .failed:
                    // The client is gone (or ended its side of TLS): nothing more can reach it.
                    break
                }
            case .closeClient:
                layer.close()
                if layer.hasRecords { out.append(.writeToClient(layer.takeRecords())) }
                out.append(command)
            default:
                out.append(command)
            }
        }
    }

    /// The client refused the handshake with the proxy itself (it does not trust the CA for the proxy's own
    /// certificate, or speaks no TLS the proxy accepts): recorded, so the log says why the client failed, and closed.
    mutating func proxyTLSFailed(_ failure: TLSFailure, now: Date, into out: inout [ProxyCommand]) {
        let address = localAddress ?? "the proxy"
        swap(&leg.commands, &out)
        leg.now = now
        leg.commands.append(
            .log(
                leg.client.record(
                    task: 1, time: now, method: "CONNECT", url: "https://\(address)/",
                    host: Self.proxyHostName(localAddress), result: .clientUntrustedCA,
                    rule:
                        "the client rejected the TLS handshake with the proxy itself (TLS to the proxy: \(failure)); it must trust the ats-proxy CA for the proxy's own certificate",
                    fix:
                        "trust the proxy's CA for the proxy connection itself (curl: --proxy-cacert with the file ats-proxy ca show names; an app: the TLS options of its proxy configuration), or use an http:// proxy URL",
                    errorCode: NSURLErrorCode.serverCertificateUntrusted.rawValue, route: .tlsConnect)))
        close()
        swap(&leg.commands, &out)
    }

    /// The name a leaf for TLS to the proxy is minted for when the client sends no SNI: the host of the address it
    /// reached (`127.0.0.1` of `127.0.0.1:8080`, `::1` of `[::1]:8080`), or `localhost` when that is unknown.
    static func proxyHostName(_ localAddress: String?) -> String {
        guard let localAddress, let colon = localAddress.lastIndex(of: ":") else { return "localhost" }
        var host = localAddress[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return host.isEmpty ? "localhost" : String(host)
    }
}
