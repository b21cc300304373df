import Foundation

/// Why a `TCPConnection` closed, delivered once through `TCPConnectionHandler.connectionDidClose`.
public enum TCPCloseReason: Sendable, Equatable, CustomStringConvertible {
    /// `close()` or `reset()` was called on this side.
    case local
    /// Both directions finished cleanly: the peer sent EOF and our write side was shut down.
    case finished
    /// The peer reset the connection (`ECONNRESET`) or vanished while we wrote (`EPIPE`).
    case reset
    /// Any other socket error.
    case error(IOError)

    public var description: String {
        switch self {
        case .local: return "closed locally"
        case .finished: return "finished"
        case .reset: return "reset by peer"
        case .error(let error): return "error: \(error)"
        }
    }
}

/// The events a `TCPConnection` delivers, always on the connection's loop.
///
/// The connection holds its handler strongly until it has delivered `connectionDidClose`, then
/// drops it, so a handler that also holds the connection forms no lasting cycle. Handlers may call
/// any command (`write`, `close`, `pauseReading`, ...) from within a callback.
public protocol TCPConnectionHandler: AnyObject {
    /// Bytes arrived. `bytes` points into the loop's shared read buffer and is valid only during
    /// the call: copy what must outlive it (or pass it straight to another connection's `write`).
    func connectionDidRead(_ connection: TCPConnection, bytes: UnsafeRawBufferPointer)
    /// The peer shut down its write side (read returned 0). Reading stops for good. Delivered even
    /// when our write side is already shut (the connection then closes with `.finished` right after).
    /// Default: finish our side too (`shutdownWrite()`, which closes once the write queue drained).
    func connectionDidReadEOF(_ connection: TCPConnection)
    /// The write queue crossed the high watermark (`false`) or fell back to the low one (`true`).
    /// A relay pauses the other side's reads on `false` and resumes them on `true`.
    func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool)
    /// Every queued byte has been handed to the kernel (the queue went from non-empty to empty).
    /// On the epoll backend this includes the end of a batch that held small writes, but not a
    /// large write sending held bytes ahead of itself.
    func connectionDidDrain(_ connection: TCPConnection)
    /// The connection is closed and its file descriptor released. Delivered exactly once.
    func connectionDidClose(_ connection: TCPConnection, reason: TCPCloseReason)
}

extension TCPConnectionHandler {
    public func connectionDidReadEOF(_ connection: TCPConnection) { connection.shutdownWrite() }
    public func connectionWritabilityChanged(_ connection: TCPConnection, isWritable: Bool) {}
    public func connectionDidDrain(_ connection: TCPConnection) {}
}
