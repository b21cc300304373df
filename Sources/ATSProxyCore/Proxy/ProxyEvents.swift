import ATSPolicy

/// Something that happened to one client connection or its upstream, fed to `ProxySession`.
public enum ProxyEvent: Sendable {
    /// Bytes from the client socket.
    case clientBytes([UInt8])
    /// The client closed its sending side.
    case clientEOF
    /// The upstream TCP connection that `connectUpstream` asked for is open.
    case upstreamConnected
    /// The upstream connection could not be made (DNS -1003, refused -1004, timeout -1001, …).
    case upstreamConnectFailed(NSURLErrorCode, detail: String)
    /// Bytes from the upstream socket.
    case upstreamBytes([UInt8])
    /// The upstream closed its sending side.
    case upstreamEOF
    /// The upstream connection failed after it was open (reset).
    case upstreamReset
    /// The timer the session armed fired.
    case timerFired
    /// The client connection is gone (closed or reset by the peer): log what was in flight.
    case clientGone
    /// The proxy is shutting down: close when idle, otherwise finish the current exchange and close.
    case drain
}

/// What the driver must do for a session, in order.
public enum ProxyCommand: Sendable {
    /// Write bytes to the client socket.
    case writeToClient([UInt8])
    /// Close the client connection once everything written so far is sent.
    case closeClient
    /// Open a TCP connection to host:port (resolve with the proxy's resolver and overrides).
    case connectUpstream(host: String, port: Int)
    /// Write bytes to the upstream socket.
    case writeToUpstream([UInt8])
    /// Close the upstream connection.
    case closeUpstream
    /// Arm the session's single timer (replacing any armed one) for this many seconds.
    case armTimer(seconds: Double)
    /// Disarm the session's timer.
    case cancelTimer
    /// Stop reading from the client until `resumeClientReads` (the upstream is not ready yet).
    case pauseClientReads
    /// Read from the client again.
    case resumeClientReads
    /// A finished request for the log sinks.
    case log(RequestRecord)
}
