import ATSTLS

/// Pumps two engines back to back in memory until both finish their handshakes or one fails.
/// Returns the failure of each side (nil = completed).
@discardableResult
public func pumpHandshake(client: TLSConnection, server: TLSConnection, rounds: Int = 20) -> (
    client: TLSFailure?, server: TLSFailure?
) {
    var clientDone: TLSFailure?? = nil
    var serverDone: TLSFailure?? = nil
    for _ in 0..<rounds {
        if clientDone == nil {
            switch client.handshake() {
            case .complete: clientDone = .some(nil)
            case .failed(let failure): clientDone = .some(failure)
            case .needsInput: break
            }
        }
        server.receive(client.takeOutbound())
        if serverDone == nil {
            switch server.handshake() {
            case .complete: serverDone = .some(nil)
            case .failed(let failure): serverDone = .some(failure)
            case .needsInput: break
            }
        }
        client.receive(server.takeOutbound())
        if let clientResult = clientDone, let serverResult = serverDone { return (clientResult, serverResult) }
        if case .some(.some) = clientDone, serverDone == nil {
            server.receiveEOF()
        }
        if case .some(.some) = serverDone, clientDone == nil {
            client.receiveEOF()
        }
    }
    return (clientDone ?? TLSFailure(reason: .other, errors: []), serverDone ?? TLSFailure(reason: .other, errors: []))
}
