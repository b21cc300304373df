import ATSHTTP2
import ATSPolicy
import ATSTLS
import Foundation
import FuzzSupport

@testable import ATSProxyCore

/// libFuzzer entry point: the input is a control byte, an optional upstream response, then the raw HTTP/2 bytes a
/// client sends inside an intercepted tunnel after the connection preface (see `HTTP2FrontendFuzz.Script`).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2Frontend(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzCheck.withInput(data, size, HTTP2FrontendFuzz.run)
}

/// The executable's entry point under SwiftPM's renaming (see `FuzzDriver`).
@_cdecl("fuzz_http2_frontend_main")
public func fuzzHTTP2FrontendMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?)
    -> Int32
{
    FuzzDriver.run(argc, argv, fuzzHTTP2Frontend)
}

/// `HTTP2Frontend` (the proxy's own code around nghttp2: streams to lanes, :authority checks, request re-framing as
/// HTTP/1.1, response re-framing as HTTP/2, flow-control credit, lane reuse) fed raw client bytes, with every lane's
/// upstream played in memory: a connect is answered with a plaintext channel (or a failure), and each request that
/// reaches an origin is answered with one scripted HTTP/1.1 response. Invariants:
/// 1. no trap anywhere in the frontend or its `ProxySession` lanes, and every call returns (bounded work);
/// 2. a lane only ever connects to the tunnel's origin, and every request it writes upstream parses as HTTP/1.1
///    with exactly one Host naming the tunnel's authority (what the minted leaf covers);
/// 3. a lane that is parked for reuse has its upstream at a message boundary (no half-sent request that the next
///    stream's request would continue: a desync between streams);
/// 4. no command for a lane after the command that closed it; the frontend's books agree (paused-stream count,
///    lane ↔ stream maps, idle lanes); after the client is gone no lane or stream is left.
enum HTTP2FrontendFuzz {
    static let host = "api.example.com"

    /// What the proxy is made of: one CA and policy for the whole run (minting per input would dominate).
    static let services: ProxyServices = {
        do {
            let authority = try CertificateAuthority.generate()
            let evaluator = ATSEvaluator(
                configuration: ATSConfigurationParser().parse(.dictionary([:])),
                options: EvaluationOptions(platform: Platform(parsing: "ios:18.0")!))
            return ProxyServices(
                policy: PolicyStore(.init(evaluator: evaluator, sourceSummary: "fuzz", processName: "Fuzz")),
                settings: ProxySettings(),
                serverTLS: try ServerTLSContext(leaves: try LeafCertificateCache(authority: authority)),
                upstreamTLS: UpstreamTLSClient(
                    trust: try TrustStore(systemRoots: false, extraAnchors: []), alpn: ["h2", "http/1.1"], sessions: nil
                ),
                processID: 1)
        } catch {
            FuzzCheck.fail("cannot set up the proxy services: \(error)")
        }
    }()

    /// The client connection preface (RFC 9113 §3.4) that every input follows.
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Scripted origin answers, picked per lane by the control byte.
    static let cannedResponses: [String] = [
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
        "HTTP/1.1 204 No Content\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close",
        "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    ]

    /// How one input is read.
    struct Script {
        /// Bit 0-2: first canned response; bit 3: one lane's connect fails; bit 4: upstream resets instead of
        /// answering on odd lanes; bit 5: lanes report their upstream backed up, then drained; bit 6: drain
        /// (GOAWAY) half-way; bit 7: a custom response follows (length byte, then bytes) and replaces the canned ones.
        var control: UInt8 = 0
        var customResponse: [UInt8]?
        var client: [UInt8] = []

        init(_ input: [UInt8]) {
            var rest = input[...]
            control = rest.popFirst() ?? 0
            if control & 0x80 != 0 {
                let length = Int(rest.popFirst() ?? 0)
                customResponse = Array(rest.prefix(length))
                rest = rest.dropFirst(length)
            }
            client = Array(rest)
        }

        func response(lane: Int32) -> [UInt8] {
            if let customResponse { return customResponse }
            let index = (Int(control & 0x07) + Int(lane)) % HTTP2FrontendFuzz.cannedResponses.count
            return Array(HTTP2FrontendFuzz.cannedResponses[index].utf8)
        }
    }

    /// One lane's upstream as the fuzz origin sees it.
    struct Origin {
        var parser = HTTP1Parser(role: .request)
        /// Requests whose head reached the origin, and how many of them were answered.
        var requests = 0
        var answered = 0
        /// Inside a request (head seen, end not yet).
        var midRequest = false
        /// A fresh connection (no reuse key, e.g. a retry): the lane runs TLS on it, which this origin does not
        /// play; it resets the connection at the first bytes.
        var speaksTLS = false
    }

    final class World {
        let script: Script
        let frontend: HTTP2Frontend
        var origins: [Int32: Origin] = [:]
        var closedLanes: Set<Int32> = []
        var now = Date(timeIntervalSince1970: 1_700_000_000)
        var pending: [(lane: Int32, event: ProxyEvent)] = []
        var steps = 0

        init(script: Script) throws {
            self.script = script
            var parent = ProxySession(
                services: HTTP2FrontendFuzz.services, clientAddress: "127.0.0.1:1", connectionNumber: 1)
            parent.role = .intercepted(
                InterceptedTunnel(
                    host: HTTP2FrontendFuzz.host, port: 443,
                    target: try RequestTarget(parsing: "https://\(HTTP2FrontendFuzz.host)/"),
                    origin: "https://\(HTTP2FrontendFuzz.host)"))
            frontend = try HTTP2Frontend(parent: parent)
        }

        func apply(_ output: HTTP2Frontend.Output) {
            for command in output.commands {
                guard case .stream(let lane, let inner) = command else { continue }
                FuzzCheck.require(!closedLanes.contains(lane), "command \(inner) for lane \(lane) after it was closed")
                laneCommand(lane, inner)
            }
            checkBooks()
        }

        func laneCommand(_ lane: Int32, _ command: ProxyCommand) {
            switch command {
            case .connectUpstream(let host, let port, let reuse):
                FuzzCheck.require(
                    host == HTTP2FrontendFuzz.host && port == 443, "lane \(lane) connects to \(host):\(port)")
                origins[lane] = Origin(speaksTLS: reuse == nil)
                if script.control & 0x08 != 0 && lane == 2 {
                    pending.append((lane, .upstreamConnectFailed(.refused)))
                } else if let reuse {
                    // A parked cleartext HTTP/1.1 connection: the lane writes its request as text, which the scripted
                    // origin parses (invariant 2). Lanes on HTTP/2 channels send parts instead (below).
                    let lease = UpstreamLease(
                        key: reuse, tls: nil, facts: [:], wire: .http1, shareable: true)
                    pending.append((lane, .upstreamReused(lease)))
                } else {
                    pending.append((lane, .upstreamConnected))
                }
            case .writeToUpstream(let bytes):
                originReceives(lane, bytes)
            case .sendToUpstreamChannel:
                FuzzCheck.fail("lane \(lane) sent request parts without an HTTP/2 channel")
            case .respond:
                FuzzCheck.fail("lane \(lane)'s response parts escaped the frontend")
            case .closeUpstream, .releaseUpstream, .promoteUpstream:
                origins[lane] = nil
            case .closeClient:
                closedLanes.insert(lane)
                origins[lane] = nil
            case .armTimer, .cancelTimer, .pauseUpstreamReads, .resumeUpstreamReads, .pauseClientReads,
                .resumeClientReads, .log, .writeToClient, .upstreamSettled:
                break
            case .stream:
                FuzzCheck.fail("a nested lane command")
            }
        }

        /// Invariant 2 and the origin's answers.
        func originReceives(_ lane: Int32, _ bytes: [UInt8]) {
            var origin = origins[lane] ?? Origin()
            if origin.speaksTLS {
                if origin.requests == 0 { pending.append((lane, .upstreamReset)) }
                origin.requests = 1
                origins[lane] = origin
                return
            }
            var events = origin.parser.feed(bytes)
            var index = 0
            while index < events.count {
                switch events[index] {
                case .request(let head, _):
                    origin.requests += 1
                    origin.midRequest = true
                    let hosts = head.headers.values("Host")
                    let tunnel = HTTP1Authority(host: HTTP2FrontendFuzz.host, port: 443)
                    FuzzCheck.require(
                        hosts.count == 1
                            && HTTP1Authority(bytes: hosts[0].utf8)?.matches(tunnel, defaultPort: 443) == true,
                        "lane \(lane) sent Host \(hosts) upstream inside the tunnel to \(tunnel)")
                    FuzzCheck.require(head.method != "CONNECT", "a CONNECT went upstream")
                case .messageEnd:
                    origin.midRequest = false
                    events += origin.parser.resume()
                case .failed(let error):
                    FuzzCheck.fail(
                        "lane \(lane) wrote an unparsable request upstream (\(error)): \(FuzzCheck.describe(bytes))")
                case .upgraded:
                    FuzzCheck.fail("lane \(lane) wrote a tunnel request upstream")
                case .body, .trailers, .response:
                    break
                }
                index += 1
            }
            while origin.answered < origin.requests {
                origin.answered += 1
                if script.control & 0x10 != 0 && lane % 2 == 1 {
                    pending.append((lane, .upstreamReset))
                    continue
                }
                let response = script.response(lane: lane)
                if script.control & 0x20 != 0 {
                    pending.append((lane, .upstreamWritable(false)))
                }
                // Delivered in two pieces, so the lane sees a response split across reads.
                let cut = response.count / 2
                pending.append((lane, .upstreamBytes(Array(response[..<cut]))))
                pending.append((lane, .upstreamBytes(Array(response[cut...]))))
                if script.control & 0x20 != 0 {
                    pending.append((lane, .upstreamWritable(true)))
                }
                if response.starts(with: Array("HTTP/1.1 200 OK\r\nConnection: close".utf8))
                    || script.customResponse != nil
                {
                    pending.append((lane, .upstreamEOF))
                }
            }
            origins[lane] = origin
        }

        /// Delivers scripted upstream events until none is left (bounded).
        func settle() {
            while !pending.isEmpty {
                steps += 1
                FuzzCheck.require(steps < 20_000, "the frontend does not settle (endless upstream/lane ping-pong)")
                let (lane, event) = pending.removeFirst()
                guard !closedLanes.contains(lane) else { continue }
                now += 0.001
                apply(frontend.handle(lane: lane, event: event, now: now))
            }
        }

        /// Invariants 3 and 4 (books).
        func checkBooks() {
            let paused = frontend.streams.values.filter(\.upstreamPaused).count
            FuzzCheck.require(
                paused == frontend.pausedStreams, "pausedStreams \(frontend.pausedStreams) but \(paused) paused")
            for (lane, stream) in frontend.laneStream {
                FuzzCheck.require(frontend.lanes[lane] != nil, "laneStream names a lane \(lane) that is gone")
                if let owner = frontend.streams[stream] {
                    FuzzCheck.require(
                        owner.lane == lane,
                        "stream \(stream) is served by \(String(describing: owner.lane)), not \(lane)")
                }
            }
            for lane in frontend.idleLanes where frontend.lanes[lane] != nil {
                FuzzCheck.require(frontend.laneStream[lane] == nil, "idle lane \(lane) still serves a stream")
                if let origin = origins[lane] {
                    FuzzCheck.require(
                        !origin.midRequest && origin.parser.isIdle,
                        "lane \(lane) parked with its upstream inside a request")
                }
            }
        }
    }

    static func run(_ input: [UInt8]) {
        let script = Script(input)
        let world: World
        do {
            world = try World(script: script)
        } catch {
            FuzzCheck.fail("cannot make a frontend: \(error)")
        }
        world.apply(world.frontend.start())
        var random = FuzzRandom(seed: input)
        let pieces = script.client.pieces(at: random.cuts(count: script.client.count, limit: 6))
        var first = true
        for (index, piece) in pieces.enumerated() {
            let bytes = first ? HTTP2FrontendFuzz.preface + piece : Array(piece)
            first = false
            world.now += 0.01
            let output = world.frontend.receive(bytes, now: world.now)
            world.apply(output)
            world.settle()
            if script.control & 0x40 != 0 && index == pieces.count / 2 {
                world.apply(world.frontend.drain(now: world.now))
                world.settle()
            }
            if output.finished { break }
        }
        world.apply(world.frontend.clientGone(now: world.now))
        world.settle()
        FuzzCheck.require(
            world.frontend.lanes.isEmpty, "lanes left after the client is gone: \(world.frontend.lanes.keys)")
        FuzzCheck.require(world.frontend.streams.isEmpty, "streams left after the client is gone")
    }
}
