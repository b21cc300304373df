import ATSPolicy
import ATSTLS
import Foundation

/// One request and its response as a leg carries it: what was asked and decided (fixed at the start),
/// where it stands (`state`, one `ExchangeState` value over both halves, whose transitions trap when illegal),
/// and what the record will say (result, codes, rule, fix, facts, sizes, timings).
///
/// A class, so the leg mutates the one it holds in place: a struct of this size was copied (and its
/// parser's buffer retained twice, then copied on write) on every event. The state that decides what may
/// happen next is a value (`ExchangeState`), tested on its own; the class only holds it. Owned by the leg
/// that created it; never shared with another leg.
final class Exchange {
    let number: Int
    let start: Date
    let method: String
    let url: String
    let target: RequestTarget
    let decision: ATSDecision
    /// The policy that made `decision`: fixes and console lines come from it even after a reload.
    let policy: PolicyStore.Snapshot
    let source: RequestSource
    let requestHeaders: HTTPFields
    /// Where the exchange stands (both halves): the only record of its progress.
    var state: ExchangeState
    var clientKeepAlive: Bool
    /// Writes the request as HTTP/1.1 text for an HTTP/1.1 upstream (a fresh one for each upstream the request is
    /// sent to; unused when the upstream is an HTTP/2 channel).
    var requestEncoder: HTTP1RequestEncoder
    /// How the client framed the request body: the framing of the request head part sent upstream.
    var requestFraming: HTTPBodyFraming = .none
    /// Request body bytes passed on so far (checked against a declared Content-Length).
    var requestBodyForwarded = 0
    /// The response side: its parser, its encoder for an HTTP/1.1 client, and what came back.
    var response = ExchangeResponse()
    var bytesFromClient = 0
    var bytesToClient = 0
    /// What the record will say about how the exchange ended.
    var outcome: ExchangeOutcome
    var isUpgradeRequest = false
    /// An HTTP/1.0 client cannot read chunked bodies: they are de-chunked and end with close.
    var clientIsHTTP10 = false
    /// Whether the request carries a body (one not yet received blocks keep-alive after a local answer).
    var requestHasBody = false
    /// The upstream the request went to, and whether it may be sent once more.
    var attempt = UpstreamAttempt()
    /// Traffic to a host the host filter leaves alone: forwarded, never logged as a request.
    var unrecorded = false
    /// The request's Authorization names NTLM or Negotiate (`namesConnectionAuthentication`).
    var authenticatesConnection = false
    /// When the upstream phases ended (reported only with `ProxySettings.detailedRecords`).
    var timings = PhaseTimes()
    /// The first bytes of each body (`ProxySettings.captureBodyLimit`; empty otherwise).
    var bodies = CapturedBodies()

    init(
        number: Int, start: Date, method: String, url: String, target: RequestTarget, decision: ATSDecision,
        policy: PolicyStore.Snapshot, source: RequestSource, requestHeaders: HTTPFields, state: ExchangeState,
        clientKeepAlive: Bool,
        requestEncoder: HTTP1RequestEncoder, rule: String
    ) {
        self.number = number
        self.start = start
        self.method = method
        self.url = url
        self.target = target
        self.decision = decision
        self.policy = policy
        self.source = source
        self.requestHeaders = requestHeaders
        self.state = state
        self.clientKeepAlive = clientKeepAlive
        self.requestEncoder = requestEncoder
        outcome = ExchangeOutcome(rule: rule)
    }

    /// Notes that response bytes arrived from the origin: the first ones set the first-byte time.
    func responseBytesArrived(at now: Date) {
        if state.responseBytesArrived() { timings.firstByte = now }
    }
}

/// What an exchange's record will say about how it ended: the result, the codes a device would report, the rule
/// that decided and the smallest fix, the console lines, and the facts of the upstream it used. Filled in as the
/// exchange goes; read once, by the record builder.
struct ExchangeOutcome {
    var result: RequestRecord.Result = .completed
    /// The NSURLError code a device would report (nil when the load succeeded).
    var errorCode: Int?
    /// The stream error beside it (kCFStreamErrorDomainSSL and the Secure Transport code, or a POSIX error).
    var streamError: StreamError?
    /// The rule that decided, in words.
    var rule: String
    /// The smallest Info.plist change that would let the load through (nil when none applies).
    var fix: String?
    /// The lines a device's console would show (`CFNETWORK_DIAGNOSTICS`).
    var consoleLines: [String] = []
    /// TLS facts of the upstream connection the exchange used.
    var tls: [String: String]?
    /// `--af-policy`'s verdicts for the upstream connection this exchange opened (nil otherwise).
    var appTrust: AppTrustRecord?
    /// The system-services verdict when no handshake completed for a `--system-services-hosts` host (a
    /// completed handshake's verdict travels with the TLS facts, see `SystemServicesSetting`).
    var systemServices: SystemServicesVerdict?
}

/// The response side of an exchange: the upstream's HTTP/1.1 parser (unused when the upstream is an HTTP/2
/// channel), the encoder for an HTTP/1.1 client (unused for an HTTP/2 stream), and what the record keeps.
struct ExchangeResponse {
    var parser = HTTP1Parser(role: .response)
    /// Writes the response as HTTP/1.1 text for an HTTP/1.1 client.
    var encoder = HTTP1ResponseEncoder()
    var status: Int?
    var headers = HTTPFields()
    /// Whether the upstream connection may carry another request after this response.
    var upstreamKeepAlive = true
}

/// Where an exchange's request went upstream, and whether it may go once more.
struct UpstreamAttempt {
    /// The requirements the upstream is judged against (nil for cleartext).
    var requirements: TLSRequirements?
    /// The upstream the request was sent for.
    var key: UpstreamKey?
    /// The request head as sent upstream, kept while the request may be retried once on another
    /// connection (a fresh one after a lost reused one, or an HTTP/1.1 one after HTTP_1_1_REQUIRED): an
    /// idempotent request without a body that is not an upgrade (RFC 9110 §9.2.2). Nil otherwise, and
    /// once it was retried.
    var retryHead: HTTPRequestHead?
    /// The upstream carrying the request was reused (kept alive, or from the pool), not opened for it.
    var onReusedUpstream = false
    /// The request was sent again on another connection (logged with the record).
    var retried = false
}
