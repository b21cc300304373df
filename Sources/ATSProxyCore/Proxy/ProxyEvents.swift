import ATSPolicy

/// Something that happened to one client connection or its upstream, fed to `ProxySession`.
public enum ProxyEvent: Sendable {
    /// Bytes from the client socket.
    case clientBytes([UInt8])
    /// The client closed its sending side.
    case clientEOF
    /// The upstream TCP connection that `connectUpstream` asked for is open.
    case upstreamConnected
    /// The IP address of the peer of the upstream connection about to be handed over (the origin, or the
    /// upstream proxy): sent right before `upstreamConnected` or `upstreamReused` (for an HTTP/2 channel, the
    /// link's connection), and recorded on the requests that connection carries (`RequestRecord.serverAddress`).
    case upstreamPeer(String)
    /// Instead of a new connection, the loop's pool handed over an established one for the requested key:
    /// a parked HTTP/1.1 connection (with its TLS engine), or a channel of a shared HTTP/2 link.
    case upstreamReused(UpstreamLease)
    /// The upstream connection could not be made (DNS -1003, refused -1004, timeout -1001, …).
    case upstreamConnectFailed(UpstreamConnectFailure)
    /// Bytes from the upstream socket.
    case upstreamBytes([UInt8])
    /// Response parts from the session's channel of a shared HTTP/2 link (`.response`, `.body`, `.trailers`,
    /// `.messageEnd`): what an HTTP/1.1 upstream's bytes would parse to, with no text in between.
    case upstreamParts([HTTPPart])
    /// The upstream closed its sending side.
    case upstreamEOF
    /// The upstream connection failed after it was open (reset).
    case upstreamReset
    /// The origin reset the HTTP/2 stream of the session's channel with HTTP_1_1_REQUIRED (RFC 9113 §8.7, §7:
    /// IIS does so for NTLM and renegotiation): it wants this request, and this origin, spoken to over HTTP/1.1.
    /// The channel is gone, as with `upstreamReset`; a request that can be replayed is sent once more on an
    /// HTTP/1.1-only upstream (`UpstreamKey.http1Only`), anything else fails like a reset.
    case upstreamRequiresHTTP11
    /// The timer the session armed fired.
    case timerFired
    /// The upstream stopped taking bytes (its write queue passed the high watermark: false) or drained (true).
    /// Sent only for HTTP/2 lanes (wrapped in `stream`): the frontend then holds back that stream's flow-control
    /// credit, so the client slows down on that stream alone. An HTTP/1.1 client is paused by the driver instead.
    case upstreamWritable(Bool)
    /// The client connection is gone (closed or reset by the peer): log what was in flight.
    case clientGone
    /// The proxy is shutting down: close when idle, otherwise finish the current exchange and close.
    case drain
    /// An event of lane `lane` (> 0): the upstream connection and timer of one HTTP/2 stream session. Only
    /// upstream events and `timerFired` are wrapped.
    indirect case stream(Int32, ProxyEvent)
}

/// What the driver must do for a session, in order.
///
/// The cases with large payloads (a request record, an upstream key with its TLS requirements) are
/// `indirect`: boxed, they keep every command a few words wide, so that the command arrays of every
/// event are cheap to build, copy and destroy.
public enum ProxyCommand: Sendable {
    /// Write bytes to the client socket.
    case writeToClient([UInt8])
    /// Close the client connection once everything written so far is sent.
    case closeClient
    /// Open a TCP connection to host:port (resolve with the proxy's resolver and overrides). With a `reuse`
    /// key the loop's pool may answer with `upstreamReused` instead (an idle connection or an HTTP/2 channel).
    indirect case connectUpstream(host: String, port: Int, reuse: UpstreamKey?)
    /// The session is done with an idle, reusable upstream: park it in the loop's pool (or, for an HTTP/2
    /// channel, just close the channel) instead of closing it.
    case releaseUpstream(UpstreamLease)
    /// The upstream handshake chose h2: move the connection and its TLS engine into a shared HTTP/2 link of
    /// the loop's pool and give the session a channel on it, through which it keeps speaking HTTP/1.1.
    case promoteUpstream(UpstreamLease)
    /// The upstream handshake of a new connection completed without h2: it will not become a shared HTTP/2 link,
    /// so requests the loop's pool held for the same key (in case it did) stop waiting and connect themselves.
    case upstreamSettled
    /// Write bytes to the upstream socket.
    case writeToUpstream([UInt8])
    /// Send request parts on the session's channel of a shared HTTP/2 link (only while the session has one: its
    /// upstream was handed over as an h2 channel or promoted to one).
    case sendToUpstreamChannel([HTTPPart])
    /// Response parts for the HTTP/2 stream a lane serves (lanes only; the frontend turns them into HEADERS and
    /// DATA frames, so no HTTP/1.1 text passes between a lane and its stream).
    case respond([HTTPPart])
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
    indirect case log(RequestRecord)
    /// Stop reading from the upstream until `resumeUpstreamReads` (the client is not taking its bytes).
    case pauseUpstreamReads
    /// Read from the upstream again.
    case resumeUpstreamReads
    /// A command for lane `lane` (> 0), the upstream connection and timer of one HTTP/2 stream session: only
    /// upstream commands, timer commands, the two upstream read commands and `closeClient` (the lane is finished:
    /// close its upstream and timer and forget it) are wrapped.
    indirect case stream(Int32, ProxyCommand)
}
