import ATSPolicy
import ATSTLS
import Foundation
import FuzzSupport

@testable import ATSProxyCore

/// libFuzzer entry point: the input is a configuration byte, then a sequence of events for one cleartext proxy
/// client's `ProxySession` (see `ProxySessionFuzz.Script`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxySession(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzCheck.withInput(data, size, ProxySessionFuzz.run)
}

/// The executable's entry point under SwiftPM's renaming (see `FuzzDriver`).
@_cdecl("fuzz_proxy_session_main")
public func fuzzProxySessionMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzDriver.run(argc, argv, fuzzProxySession)
}

/// `ProxySession` (the sans-io core of one client connection, with its `ExchangeState` that traps on an illegal
/// transition) fed a fuzzed sequence of events, in the order a driver could deliver them: the fuzz input plays
/// the client, the origin (bytes, EOF, reset, a failed connect, a pooled connection or HTTP/2 channel handed over)
/// and the clock (timers firing, shutdown). Invariants, checked after every event:
/// 1. no trap anywhere in the session (an illegal exchange transition would crash the whole proxy);
/// 2. nothing after `.closeClient`, neither later in the same command list nor in answer to any later event;
/// 3. every `.log` record has a task ID of this connection naming a request it read, and each task ID is logged
///    at most once (one record per exchange);
/// 4. upstream commands fit the upstream the driver holds: bytes only to an attached connection, parts only to
///    an HTTP/2 channel, a release or promotion only of an attached connection; no lane commands;
/// 5. the session's wish to pause client reads is the one its commands told the driver;
/// 6. once the client is gone, the session has closed and nothing of its exchange is left unrecorded.
enum ProxySessionFuzz {
    /// The proxy's collaborators: one CA for all runs (minting per input would dominate), one services value
    /// per configuration the first input byte picks.
    static let authority: CertificateAuthority = {
        do { return try CertificateAuthority.generate() } catch { FuzzCheck.fail("cannot make a CA: \(error)") }
    }()

    /// ATS: cleartext blocked except for local hosts and `allowed.test` (an exception domain).
    static let ats: PlistValue = .dictionary([
        "NSExceptionDomains": .dictionary([
            "allowed.test": .dictionary(["NSExceptionAllowsInsecureHTTPLoads": .bool(true)])
        ])
    ])

    /// The configurations: 0 enforce with the onboarding site and a self address; 1 report mode; 2 cleartext
    /// upgraded to https (pooled HTTP/2 channels become reachable); 3 `--ignore-hosts example.com`;
    /// 4 `--allow-hosts localhost`; 5 no linger, detailed records, captured bodies, a passthrough host, raw relay of
    /// tunnels that are neither TLS nor HTTP (`--tunnel-unknown relay`).
    static let configurations: [ProxyServices] = (0..<6).map { index in
        var settings = ProxySettings()
        settings.selfAuthorities = ["127.0.0.1:8080"]
        do {
            switch index {
            case 1: settings.mode = .report
            case 2: settings.cleartext = .upgrade
            case 3: settings.hostFilter = try HostFilter(mode: .ignore, patterns: ["example\\.com"])
            case 4: settings.hostFilter = try HostFilter(mode: .allow, patterns: ["^localhost$"])
            case 5:
                settings.upstreamLinger = 0
                settings.bufferLinger = 0
                settings.detailedRecords = true
                settings.captureBodyLimit = 16
                settings.passthroughHosts = [".pass.test"]
                settings.tunnelUnknown = .relay
            default: break
            }
            let evaluator = ATSEvaluator(
                configuration: ATSConfigurationParser().parse(ats),
                options: EvaluationOptions(platform: Platform(parsing: "ios:18.0")!))
            return ProxyServices(
                policy: PolicyStore(.init(evaluator: evaluator, sourceSummary: "fuzz", processName: "Fuzz")),
                settings: settings,
                serverTLS: try ServerTLSContext(leaves: try LeafCertificateCache(authority: authority)),
                upstreamTLS: UpstreamTLSClient(
                    trust: try TrustStore(systemRoots: false, extraAnchors: []), alpn: ["h2", "http/1.1"], sessions: nil
                ),
                processID: 1,
                onboarding: index == 0
                    ? try OnboardingSite(certificate: authority.certificate, proxyAddresses: ["127.0.0.1:8080"]) : nil)
        } catch {
            FuzzCheck.fail("cannot set up the proxy services: \(error)")
        }
    }

    /// Requests a client may send whole (an event picks one by index), so that short inputs reach deep states.
    static let cannedRequests: [String] = [
        "GET http://localhost:8000/ HTTP/1.1\r\nHost: localhost:8000\r\n\r\n",
        "HEAD http://localhost:8000/h HTTP/1.1\r\nHost: localhost:8000\r\n\r\n",
        "POST http://localhost:8000/p HTTP/1.1\r\nHost: localhost:8000\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
        "PUT http://localhost:8000/u HTTP/1.1\r\nHost: localhost:8000\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
        "abcd",
        "GET http://localhost:8000/ws HTTP/1.1\r\nHost: localhost:8000\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
        "GET http://ats-proxy.invalid/ HTTP/1.1\r\nHost: ats-proxy.invalid\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
        "GET http://allowed.test/a HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n",
        "GET http://localhost:8000/old HTTP/1.0\r\n\r\n",
        "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        "POST http://localhost:8000/cl HTTP/1.1\r\nHost: localhost:8000\r\nContent-Length: 10\r\n\r\nhalf",
        "GET http://localhost:8000/a HTTP/1.1\r\nHost: localhost:8000\r\n\r\nGET http://localhost:8000/b HTTP/1.1\r\n"
            + "Host: localhost:8000\r\n\r\n",
        "GET http://127.0.0.1:8080/ HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
        "GET http://localhost:8000/auth HTTP/1.1\r\nHost: localhost:8000\r\nAuthorization: NTLM abc\r\n\r\n",
        // Protocol detection after CONNECT (`TunnelSniffer`): cleartext HTTP allowed and blocked, a misdirected
        // Host, h2 prior knowledge, the start of a TLS hello, and neither.
        "CONNECT allowed.test:80 HTTP/1.1\r\n\r\nGET /in HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "CONNECT example.com:8081 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: example.com:8081\r\n\r\n",
        "CONNECT allowed.test:80 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n",
        "CONNECT allowed.test:80 HTTP/1.1\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "CONNECT example.com:443 HTTP/1.1\r\n\r\n\u{16}\u{03}\u{01}\u{00}",
        "CONNECT allowed.test:22 HTTP/1.1\r\n\r\nSSH-2.0-x\r\n",
    ]

    /// Origin answers an event may deliver whole.
    static let cannedResponses: [String] = [
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nraw",
        "HTTP/1.1 204 No Content\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
        "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close",
        "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: NTLM\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.0 200 OK\r\n\r\nold",
        "garbage\r\n\r\n",
    ]

    /// What each event byte (modulo the count) delivers.
    enum Kind: Int, CaseIterable {
        case clientBytes, cannedRequest, upstreamConnected, upstreamReused, connectFailed, upstreamBytes
        case cannedResponse, upstreamEOF, upstreamReset, requiresHTTP11, upstreamParts, timerFired, drain
        case clientEOF, clientGone, upstreamPeer
    }

    /// The fuzz input as a reader: one configuration byte, then events, each a kind byte and its operands
    /// (a length byte and that many payload bytes, or an index byte).
    struct Script {
        var rest: ArraySlice<UInt8>

        mutating func byte() -> UInt8 { rest.popFirst() ?? 0 }

        mutating func payload() -> [UInt8] {
            let length = Int(byte())
            defer { rest = rest.dropFirst(length) }
            return Array(rest.prefix(length))
        }
    }

    /// The upstream the driver holds for the session's lane 0.
    enum Link {
        case none
        /// `connectUpstream` asked for it (with this reuse key).
        case connecting(UpstreamKey?)
        /// A TCP connection; `eof` once the origin's EOF was read (only its close may follow).
        case tcp(eof: Bool)
        /// A channel of a shared HTTP/2 link, and where the response on it stands.
        case channel(ChannelResponse)
        /// The peer closed or reset it and the driver dropped it: a write the session makes before it hears of
        /// it (a TLS alert on the way out) is dropped harmlessly; no more events come from it.
        case lost
    }

    /// What an HTTP/2 link has reported of the response on a channel: it follows the grammar the link keeps.
    enum ChannelResponse {
        case awaitingHead
        /// The final head came; `remaining` bytes of a Content-Length body are left (nil: until the stream ends).
        case body(remaining: Int?, trailersSent: Bool)
        case ended
    }

    /// The driver side of one session: it delivers only events a real driver could, and checks the commands.
    final class World {
        var session: ProxySession
        var now = Date(timeIntervalSince1970: 1_700_000_000)
        var timer: Double?
        var link = Link.none
        var clientPaused = false
        var upstreamPaused = false
        var clientEnded = false
        /// `.closeClient` came.
        var closed = false
        /// The driver reported the client gone and finished.
        var finished = false
        var lastKey: UpstreamKey?
        var loggedTasks: Set<String> = []

        init(services: ProxyServices) {
            session = ProxySession(services: services, clientAddress: "127.0.0.1:5000", connectionNumber: 1)
            check(session.start())
        }

        /// Delivers `event` to the session and checks what it answered (invariants 2–5).
        func deliver(_ event: ProxyEvent) {
            now += 0.001
            let commands = session.handle(event, now: now)
            if ProxySessionFuzz.trace {
                var text = "event \(Self.brief(event)) (link \(link))\n"
                for command in commands { text += "    \(Self.brief(command))\n" }
                FileHandle.standardError.write(Data(text.utf8))
            }
            FuzzCheck.require(
                !closed || commands.isEmpty, "commands after .closeClient in answer to \(event): \(commands)")
            check(commands)
            FuzzCheck.require(
                session.wantsClientReadsPaused == clientPaused,
                "the session wants client reads paused: \(session.wantsClientReadsPaused), its commands said \(clientPaused)"
            )
        }

        /// An event for the trace, with its bytes as text.
        static func brief(_ event: ProxyEvent) -> String {
            switch event {
            case .clientBytes(let bytes): "clientBytes \"\(FuzzCheck.describe(bytes, limit: 160))\""
            case .upstreamBytes(let bytes): "upstreamBytes \"\(FuzzCheck.describe(bytes, limit: 160))\""
            default: "\(event)"
            }
        }

        /// A command for the trace, with its bytes as text and a record by its task and result.
        static func brief(_ command: ProxyCommand) -> String {
            switch command {
            case .writeToClient(let bytes): "writeToClient \"\(FuzzCheck.describe(bytes, limit: 160))\""
            case .writeToUpstream(let bytes): "writeToUpstream \"\(FuzzCheck.describe(bytes, limit: 160))\""
            case .log(let record):
                "log \(record.taskID) \(record.result) status \(String(describing: record.status)) \(record.rule)"
            default: "\(command)"
            }
        }

        func check(_ commands: [ProxyCommand]) {
            for (index, command) in commands.enumerated() {
                FuzzCheck.require(!closed, "\(command) after .closeClient (command \(index) of \(commands))")
                switch command {
                case .writeToClient:
                    break
                case .closeClient:
                    closed = true
                    timer = nil
                    link = .none
                case .connectUpstream(_, _, let reuse):
                    link = .connecting(reuse)
                    upstreamPaused = false
                    if let reuse { lastKey = reuse }
                case .releaseUpstream:
                    // A connection is parked; a channel is closed (its link stays pooled).
                    switch link {
                    case .tcp, .channel: break
                    case .none, .connecting, .lost: FuzzCheck.fail("release of upstream \(link)")
                    }
                    link = .none
                    upstreamPaused = false
                case .promoteUpstream:
                    guard case .tcp = link else { FuzzCheck.fail("promotion of upstream \(link)") }
                    link = .channel(.awaitingHead)
                case .upstreamSettled:
                    // Only a connection of the session's own, whose handshake just completed, settles.
                    guard case .tcp = link else { FuzzCheck.fail("settling of upstream \(link)") }
                case .writeToUpstream(let bytes):
                    if case .lost = link { break }
                    guard case .tcp = link else {
                        FuzzCheck.fail("bytes for upstream \(link), lost by the driver: \(FuzzCheck.describe(bytes))")
                    }
                case .sendToUpstreamChannel(let parts):
                    if case .lost = link { break }
                    guard case .channel = link else { FuzzCheck.fail("parts for upstream \(link): \(parts)") }
                case .closeUpstream:
                    link = .none
                    upstreamPaused = false
                case .armTimer(let seconds):
                    FuzzCheck.require(seconds >= 0 && seconds.isFinite, "a timer of \(seconds) s")
                    timer = seconds
                case .cancelTimer:
                    timer = nil
                case .pauseClientReads: clientPaused = true
                case .resumeClientReads: clientPaused = false
                case .pauseUpstreamReads: upstreamPaused = true
                case .resumeUpstreamReads: upstreamPaused = false
                case .log(let record):
                    let prefix = session.taskIDPrefix
                    FuzzCheck.require(record.taskID.hasPrefix(prefix), "a record with task ID '\(record.taskID)'")
                    let number = Int(record.taskID.dropFirst(prefix.count))
                    // A CONNECT is no task of its own: its record takes the next task's number.
                    FuzzCheck.require(
                        number.map { $0 >= 1 && $0 <= session.requestCount + 1 } == true,
                        "record \(record.taskID) names no request read so far (\(session.requestCount))")
                    FuzzCheck.require(
                        loggedTasks.insert(record.taskID).inserted, "task \(record.taskID) logged twice")
                case .respond, .stream:
                    FuzzCheck.fail("a lane command from a client's session: \(command)")
                }
            }
        }

        /// Reads one event from `script` and delivers it if the driver could (operands are read either way).
        func step(_ script: inout Script) {
            let kind = Kind.allCases[Int(script.byte()) % Kind.allCases.count]
            switch kind {
            case .clientBytes, .cannedRequest:
                let bytes =
                    kind == .clientBytes
                    ? script.payload()
                    : Array(cannedRequests[Int(script.byte()) % cannedRequests.count].utf8)
                guard !clientPaused, !clientEnded, !bytes.isEmpty else { return }
                deliver(.clientBytes(bytes))
            case .upstreamConnected:
                guard case .connecting = link else { return }
                link = .tcp(eof: false)
                deliver(.upstreamConnected)
            case .upstreamReused:
                let choice = script.byte()
                guard case .connecting(let wanted?) = link, let key = lastKey, key == wanted else { return }
                let channel = choice & 1 != 0
                if channel {
                    // A shared HTTP/2 link exists only for TLS origins that chose h2 (never for HTTP/1.1-only keys).
                    guard key.requirements != nil, !key.http1Only else { return }
                    link = .channel(.awaitingHead)
                } else {
                    // A parked cleartext connection carries no TLS engine; a parked TLS one is not played here.
                    guard key.requirements == nil else { return }
                    link = .tcp(eof: false)
                }
                deliver(
                    .upstreamReused(
                        UpstreamLease(
                            key: key, tls: nil, facts: key.requirements == nil ? nil : [:],
                            wire: channel ? .h2 : .http1, shareable: choice & 2 == 0)))
            case .connectFailed:
                let failures: [UpstreamConnectFailure] = [
                    .nameNotResolved, .refused, .timedOut, .reset, .unreachable, .proxyResources(detail: "fuzz"),
                    .other(detail: "fuzz"), .upstreamProxy(.cannotConnectToHost, detail: "fuzz"),
                    .upstreamProxy(.timedOut, detail: "fuzz"),
                ]
                let failure = failures[Int(script.byte()) % failures.count]
                guard case .connecting = link else { return }
                link = .lost
                deliver(.upstreamConnectFailed(failure))
            case .upstreamBytes, .cannedResponse:
                let bytes =
                    kind == .upstreamBytes
                    ? script.payload()
                    : Array(cannedResponses[Int(script.byte()) % cannedResponses.count].utf8)
                guard case .tcp(eof: false) = link, !upstreamPaused, !bytes.isEmpty else { return }
                deliver(.upstreamBytes(bytes))
            case .upstreamEOF:
                // The read EOF, then (or instead) the connection's orderly close: both arrive as upstreamEOF.
                guard case .tcp(let eof) = link else { return }
                if eof {
                    link = .lost
                } else {
                    guard !upstreamPaused else { return }
                    link = .tcp(eof: true)
                }
                deliver(.upstreamEOF)
            case .upstreamReset:
                switch link {
                case .tcp, .channel: link = .lost
                case .none, .connecting, .lost: return
                }
                deliver(.upstreamReset)
            case .requiresHTTP11:
                guard case .channel = link else { return }
                link = .lost
                deliver(.upstreamRequiresHTTP11)
            case .upstreamParts:
                let plan = script.payload()
                guard case .channel(let response) = link, !upstreamPaused else { return }
                let (parts, next) = Self.channelParts(plan, after: response)
                guard !parts.isEmpty else { return }
                link = .channel(next)
                deliver(.upstreamParts(parts))
            case .timerFired:
                guard let seconds = timer else { return }
                timer = nil
                now += seconds
                deliver(.timerFired)
            case .drain:
                deliver(.drain)
            case .clientEOF:
                guard !clientPaused, !clientEnded else { return }
                clientEnded = true
                deliver(.clientEOF)
            case .clientGone:
                deliver(.clientGone)
                finished = true
            case .upstreamPeer:
                let octet = script.byte()
                guard case .connecting = link else { return }
                deliver(.upstreamPeer("192.0.2.\(octet)"))
            }
        }

        /// Response parts an HTTP/2 link could report next, as `plan` describes them: each plan byte adds one part
        /// the grammar allows (an interim or final head, a body piece, trailers, the end), so any plan is valid.
        static func channelParts(_ plan: [UInt8], after start: ChannelResponse) -> ([HTTPPart], ChannelResponse) {
            var parts: [HTTPPart] = []
            var state = start
            for byte in plan.prefix(8) {
                switch state {
                case .awaitingHead:
                    let statuses = [200, 100, 103, 204, 304, 404, 500, 200]
                    let status = statuses[Int(byte & 0x07)]
                    let head = HTTPResponseHead(status: status, reason: "", headers: ["server": "fuzz"])
                    if status < 200 {
                        parts.append(.response(head, body: .none))
                    } else if status == 204 || status == 304 || byte & 0x40 != 0 {
                        parts.append(.response(head, body: .none))
                        parts.append(.messageEnd)
                        state = .ended
                    } else {
                        let length = byte & 0x08 != 0 ? nil : Int(byte >> 4)
                        var headers = head.headers
                        if let length { headers.append(name: "content-length", value: String(length)) }
                        parts.append(
                            .response(
                                HTTPResponseHead(status: status, reason: "", headers: headers),
                                body: length.map { .contentLength($0) } ?? .untilClose))
                        state = .body(remaining: length, trailersSent: false)
                    }
                case .body(let remaining, let trailersSent):
                    switch byte & 0x03 {
                    case 0, 1:
                        let size = min(Int(byte >> 2) + 1, remaining ?? Int.max)
                        guard size > 0, !trailersSent else { continue }
                        parts.append(.body(ArraySlice(repeating: UInt8(ascii: "x"), count: size)))
                        state = .body(remaining: remaining.map { $0 - size }, trailersSent: false)
                    case 2:
                        guard remaining == nil, !trailersSent else { continue }
                        parts.append(.trailers(["x-trailer": "t"]))
                        state = .body(remaining: nil, trailersSent: true)
                    default:
                        guard remaining ?? 0 == 0 else { continue }
                        parts.append(.messageEnd)
                        state = .ended
                    }
                case .ended:
                    return (parts, state)
                }
            }
            return (parts, state)
        }
    }

    /// `FUZZ_TRACE=1` prints every event and the commands it produced (for reading a seed or a finding).
    static let trace = ProcessInfo.processInfo.environment["FUZZ_TRACE"] == "1"

    /// At most this many events per input (bounded work).
    static let maxEvents = 200

    static func run(_ input: [UInt8]) {
        var script = Script(rest: input[...])
        let services = configurations[Int(script.byte()) % configurations.count]
        let world = World(services: services)
        var events = 0
        while !script.rest.isEmpty, events < maxEvents, !world.closed, !world.finished {
            world.step(&script)
            events += 1
        }
        if !world.finished {
            // The connection ends one way or another: a driver always reports the client gone at the end.
            world.deliver(.clientGone)
        }
        FuzzCheck.require(world.closed, "the client is gone but the session never closed")
        if let exchange = world.session.exchange {
            FuzzCheck.require(
                exchange.state.isRecorded || exchange.unrecorded,
                "the session closed with an exchange in state \(exchange.state) unrecorded")
        }
    }
}
