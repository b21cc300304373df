import ATSPolicy
import ATSTLS

/// Fetches the chain a server presents, whatever it is: one permissive handshake per protocol version, newest
/// first, until one completes (the verifier accepts anything; the chain is judged afterwards); a failed connect
/// ends the attempts. Blocking.
public enum AFChainFetcher {
    /// The chain `host` presents over `transport` (leaf first, as sent), or why none was obtained.
    public static func presentedChain(
        host: String, client: UpstreamTLSClient, transport: any HandshakeTransport
    ) -> Result<[Certificate], AFChainUnavailable> {
        var lastFailure = "no handshake was attempted"
        for version in [TLSProtocolVersion.tls13, .tls12, .tls11, .tls10] {
            let connection: TLSConnection
            do {
                connection = try client.makeProbeConnection(version: version, host: host)
            } catch {
                lastFailure = "\(error)"
                continue
            }
            let stream: any HandshakeStream
            do {
                stream = try transport.connect()
            } catch {
                // Unreachable: another protocol version will not help.
                return .failure(AFChainUnavailable("cannot connect to \(host): \(error)"))
            }
            if let failure = HandshakePump.run(connection, over: stream) {
                lastFailure = "\(failure)"
                continue
            }
            let chain = connection.peerCertificates
            if chain.isEmpty {
                lastFailure = "the server sent no certificate"
                continue
            }
            return .success(chain)
        }
        return .failure(AFChainUnavailable("no handshake with \(host) completed (\(lastFailure))"))
    }
}
