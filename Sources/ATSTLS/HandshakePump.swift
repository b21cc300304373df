/// Why the transport under a handshake failed (before or during TLS).
public enum TransportFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The host name did not resolve.
    case nameNotResolved(String)
    /// The server refused the TCP connection.
    case refused
    /// Connect, handshake or read did not finish in time.
    case timedOut
    /// The connection was open and the request complete, but no response head arrived in time.
    case noResponse
    /// The connection was open, but the request body stopped moving before it was complete: `bodyBytes` of it had
    /// arrived from the client (the client stopped sending, or the server stopped reading).
    case requestStalled(bodyBytes: Int)
    /// The server reset the connection.
    case reset
    /// Another socket error (errno text).
    case other(String)

    public var description: String {
        switch self {
        case .nameNotResolved(let detail): "the host name could not be resolved (\(detail))"
        case .refused: "the server refused the connection"
        case .timedOut: "the connection timed out"
        case .noResponse: "the server sent no response in time"
        case .requestStalled(let bytes): "the request body stopped after \(bytes) bytes"
        case .reset: "the server reset the connection"
        case .other(let text): text
        }
    }
}

/// A connected byte stream the blocking pump drives (a socket with a deadline, in `ATSProxyIO`
/// or in tests). Implementations own the file descriptor; ATSTLS never does.
public protocol HandshakeStream: AnyObject {
    /// Sends every byte or throws.
    func send(_ bytes: [UInt8]) throws(TransportFailure)
    /// Waits for bytes; an empty array means EOF.
    func receive() throws(TransportFailure) -> [UInt8]
}

/// Opens fresh connections to one upstream (host, port, optional address override).
public protocol HandshakeTransport: Sendable {
    func connect() throws(TransportFailure) -> any HandshakeStream
}

/// Why an upstream attempt failed before a summary could be judged.
public enum AttemptFailure: Error, Sendable, Hashable, CustomStringConvertible {
    case transport(TransportFailure)
    case handshake(TLSFailure)

    public var description: String {
        switch self {
        case .transport(let failure): failure.description
        case .handshake(let failure): failure.description
        }
    }
}

/// Drives an engine's handshake over a blocking stream (through its `TLSLayer`): send what the engine produced,
/// read when it needs input, until it completes or fails.
public enum HandshakePump {
    /// Runs the handshake of `connection` (not started yet) over `stream`; nil when it completed.
    public static func run(_ connection: TLSConnection, over stream: any HandshakeStream) -> AttemptFailure? {
        let layer = TLSLayer(connection)
        var received: [UInt8] = []
        while true {
            let progress = layer.handshake(received)
            received = []
            let outbound = layer.takeRecords()
            if !outbound.isEmpty {
                do {
                    try stream.send(outbound)
                } catch {
                    if case .failed(let failure) = progress { return .handshake(failure) }
                    if error == .reset { return .handshake(TLSFailure(reason: .resetDuringHandshake, errors: [])) }
                    return .transport(error)
                }
            }
            switch progress {
            case .complete:
                return nil
            case .failed(let failure):
                return .handshake(failure)
            case .needsInput:
                do {
                    received = try stream.receive()
                    if received.isEmpty { layer.receiveEnd() }
                } catch {
                    if error == .reset {
                        // Whatever arrived before the reset may hold an alert; otherwise it is an abort.
                        layer.receiveEnd()
                        if case .failed(let failure) = layer.handshake([]), failure.reason != .closedWithoutAlert {
                            return .handshake(failure)
                        }
                        return .handshake(TLSFailure(reason: .resetDuringHandshake, errors: []))
                    }
                    return .transport(error)
                }
            }
        }
    }
}
