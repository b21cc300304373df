import ATSPolicy
import ATSTLS
import Foundation

/// Writing: plaintext to the client through its TLS engine, and the HTTP/2 frontend's input and output.
extension ProxySession {
    // MARK: - Writing

    /// Plaintext for the client: sealed by the client TLS engine after this event, or written as it is.
    mutating func sendToClient(_ plain: [UInt8]) {
        leg.sendToClient(plain)
    }

    /// Encrypts the plaintext gathered for the client (by the leg and the session) and queues every record the
    /// engine holds.
    mutating func flushClientTLS(_ tls: TLSConnection) {
        let layer = TLSLayer(tls)
        let plain = leg.takeClientPlain()
        if !plain.isEmpty { layer.seal(plain) }
        if layer.hasRecords { leg.commands.append(.writeToClient(layer.takeRecords())) }
    }

    // MARK: - HTTP/2 clients

    /// The client chose h2 in ALPN: from now on `HTTP2Frontend` turns its streams into requests.
    mutating func startHTTP2() {
        do {
            let frontend = try HTTP2Frontend(parent: self)
            h2 = frontend
            phase = .h2
            apply(frontend.start())
        } catch {
            close()
        }
    }

    mutating func http2Bytes(_ plain: [UInt8]) {
        guard let h2 else { return close() }
        apply(h2.receive(plain, now: now))
    }

    mutating func streamEvent(lane: Int32, _ event: ProxyEvent) {
        guard case .h2 = phase, let h2 else { return }
        apply(h2.handle(lane: lane, event: event, now: now))
    }

    mutating func apply(_ output: HTTP2Frontend.Output) {
        leg.commands.append(contentsOf: output.commands)
        if !output.toClient.isEmpty { sendToClient(output.toClient) }
        if output.finished { close() }
    }
}
