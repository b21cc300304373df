import ATSProxyCore
import Foundation

/// What the sans-io core asked its driver to do in one step (the commands `ProxySession.handle(_:now:)` returned
/// for one event, or those of several steps concatenated), read by kind.
///
/// Contract: every accessor reads `commands` in order and keeps that order; the session's own commands (lane 0)
/// are read at the top level, and the commands of an HTTP/2 lane (`ProxyCommand.stream`) are read only through
/// `lane(_:)`, `laneConnects`, `touchesALane` and `names`. Nothing is dropped from `commands`.
public struct Transcript: Sendable {
    /// A timer command, in the order the session gave it.
    public enum TimerCommand: Equatable, Sendable {
        /// `armTimer(seconds:)`.
        case arm(Double)
        /// `cancelTimer`.
        case cancel
    }

    /// One `connectUpstream` request: the lane it is for (0: the session's own upstream), where to, and the pool
    /// key it may be answered from.
    public struct UpstreamConnect: Equatable, Sendable {
        public let lane: Int32
        public let host: String
        public let port: Int
        public let reuse: UpstreamKey?

        public init(lane: Int32 = 0, host: String, port: Int, reuse: UpstreamKey?) {
            self.lane = lane
            self.host = host
            self.port = port
            self.reuse = reuse
        }

        /// `host:port`, as the tests write a target.
        public var authority: String { "\(host):\(port)" }
    }

    /// The commands, as the session gave them.
    public let commands: [ProxyCommand]

    public init(_ commands: [ProxyCommand]) { self.commands = commands }

    /// The bytes of every `writeToClient`, concatenated in order.
    public var clientBytes: [UInt8] {
        commands.reduce(into: []) { bytes, command in
            if case .writeToClient(let data) = command { bytes += data }
        }
    }

    /// `clientBytes` decoded as UTF-8 (invalid sequences become U+FFFD).
    public var clientText: String { String(decoding: clientBytes, as: UTF8.self) }

    /// The bytes of every `writeToUpstream`, concatenated in order.
    public var upstreamBytes: [UInt8] {
        commands.reduce(into: []) { bytes, command in
            if case .writeToUpstream(let data) = command { bytes += data }
        }
    }

    /// `upstreamBytes` decoded as UTF-8 (invalid sequences become U+FFFD).
    public var upstreamText: String { String(decoding: upstreamBytes, as: UTF8.self) }

    /// The records of every `log`, in order.
    public var records: [RequestRecord] {
        commands.compactMap { if case .log(let record) = $0 { record } else { nil } }
    }

    /// The session's own `connectUpstream` requests (lane 0), in order.
    public var connects: [UpstreamConnect] {
        commands.compactMap {
            if case .connectUpstream(let host, let port, let reuse) = $0 {
                UpstreamConnect(host: host, port: port, reuse: reuse)
            } else {
                nil
            }
        }
    }

    /// The `connectUpstream` requests of HTTP/2 lanes (`stream(lane, connectUpstream)`), each with its lane.
    public var laneConnects: [UpstreamConnect] {
        commands.compactMap {
            if case .stream(let lane, .connectUpstream(let host, let port, let reuse)) = $0 {
                UpstreamConnect(lane: lane, host: host, port: port, reuse: reuse)
            } else {
                nil
            }
        }
    }

    /// Whether a `closeClient` is among the commands (the client is closed once its writes are sent).
    public var closesClient: Bool { commands.contains { if case .closeClient = $0 { true } else { false } } }

    /// Whether a `closeUpstream` is among the commands.
    public var closesUpstream: Bool { commands.contains { if case .closeUpstream = $0 { true } else { false } } }

    /// The leases of every `releaseUpstream` (idle upstreams handed back to the pool), in order.
    public var releases: [UpstreamLease] {
        commands.compactMap { if case .releaseUpstream(let lease) = $0 { lease } else { nil } }
    }

    /// The leases of every `promoteUpstream` (connections that became shared HTTP/2 links), in order.
    public var promotions: [UpstreamLease] {
        commands.compactMap { if case .promoteUpstream(let lease) = $0 { lease } else { nil } }
    }

    /// The request parts of every `sendToUpstreamChannel`, concatenated in order.
    public var channelParts: [HTTPPart] {
        commands.reduce(into: []) { parts, command in
            if case .sendToUpstreamChannel(let more) = command { parts += more }
        }
    }

    /// The response parts of every `respond` (a lane answering its HTTP/2 stream), concatenated in order.
    public var responseParts: [HTTPPart] {
        commands.reduce(into: []) { parts, command in
            if case .respond(let more) = command { parts += more }
        }
    }

    /// The timer commands, in order.
    public var timers: [TimerCommand] {
        commands.compactMap { command -> TimerCommand? in
            switch command {
            case .armTimer(let seconds): .arm(seconds)
            case .cancelTimer: .cancel
            case .writeToClient, .closeClient, .connectUpstream, .releaseUpstream, .promoteUpstream, .upstreamSettled,
                .writeToUpstream, .sendToUpstreamChannel, .respond, .closeUpstream, .pauseClientReads,
                .resumeClientReads, .log, .pauseUpstreamReads, .resumeUpstreamReads, .stream:
                nil
            }
        }
    }

    /// The delays of every `armTimer`, in order.
    public var armedTimers: [Double] {
        timers.compactMap { if case .arm(let seconds) = $0 { seconds } else { nil } }
    }

    /// Whether the session asked to stop reading the client (`pauseClientReads`).
    public var pausesClientReads: Bool {
        commands.contains { if case .pauseClientReads = $0 { true } else { false } }
    }

    /// Whether the session asked to read the client again (`resumeClientReads`).
    public var resumesClientReads: Bool {
        commands.contains { if case .resumeClientReads = $0 { true } else { false } }
    }

    /// Whether the session asked to stop reading its own upstream (`pauseUpstreamReads` at lane 0).
    public var pausesUpstreamReads: Bool {
        commands.contains { if case .pauseUpstreamReads = $0 { true } else { false } }
    }

    /// Whether the session asked to read its own upstream again (`resumeUpstreamReads` at lane 0).
    public var resumesUpstreamReads: Bool {
        commands.contains { if case .resumeUpstreamReads = $0 { true } else { false } }
    }

    /// The commands of HTTP/2 lane `lane`, unwrapped from `stream(lane, …)`, as a transcript of their own.
    public func lane(_ lane: Int32) -> Transcript {
        Transcript(commands.compactMap { if case .stream(lane, let inner) = $0 { inner } else { nil } })
    }

    /// Whether any command is for an HTTP/2 lane.
    public var touchesALane: Bool { commands.contains { if case .stream = $0 { true } else { false } } }

    /// A compact name per command (`closeClient`, `1:releaseUpstream`, `armTimer(30)`, …) for assertions about
    /// order; see `name(_:)`.
    public var names: [String] { commands.map(Self.name) }

    /// The compact name of one command: the case name; `connectUpstream(host:port)`; `armTimer(seconds)` with whole
    /// seconds written without a fraction; a lane's command as `lane:name`. Payloads other than those are left out.
    public static func name(_ command: ProxyCommand) -> String {
        switch command {
        case .writeToClient: "writeToClient"
        case .closeClient: "closeClient"
        case .connectUpstream(let host, let port, _): "connectUpstream(\(host):\(port))"
        case .releaseUpstream: "releaseUpstream"
        case .promoteUpstream: "promoteUpstream"
        case .upstreamSettled: "upstreamSettled"
        case .writeToUpstream: "writeToUpstream"
        case .sendToUpstreamChannel: "sendToUpstreamChannel"
        case .respond: "respond"
        case .closeUpstream: "closeUpstream"
        case .armTimer(let seconds): "armTimer(\(seconds == seconds.rounded() ? "\(Int(seconds))" : "\(seconds)"))"
        case .cancelTimer: "cancelTimer"
        case .pauseClientReads: "pauseClientReads"
        case .resumeClientReads: "resumeClientReads"
        case .log: "log"
        case .pauseUpstreamReads: "pauseUpstreamReads"
        case .resumeUpstreamReads: "resumeUpstreamReads"
        case .stream(let lane, let inner): "\(lane):\(name(inner))"
        }
    }
}

/// A scripted run of one `ProxySession`: events go in one at a time, at a clock the test sets, and the commands of
/// each step are kept as a `Transcript`.
///
/// Contract: `play` hands each event to `session.handle(_:now:)` exactly once, in the order given, and appends one
/// transcript per event to `steps`; the session is the playbook's own copy (a value), so the caller's copy is not
/// advanced.
public struct Playbook {
    /// The session being played, after every step so far.
    public private(set) var session: ProxySession
    /// The time passed to the session with the next event.
    public var now: Date
    /// One transcript per event played so far, in order.
    public private(set) var steps: [Transcript] = []

    /// Plays `session` from its current state; `now` is the clock of the first event.
    public init(_ session: ProxySession, now: Date = Date()) {
        self.session = session
        self.now = now
    }

    /// Hands `event` to the session and returns the commands it answered with (also appended to `steps`).
    @discardableResult
    public mutating func play(_ event: ProxyEvent) -> Transcript {
        let step = Transcript(session.handle(event, now: now))
        steps.append(step)
        return step
    }

    /// Plays `events` in order and returns the transcript of them all, concatenated (each is also in `steps`).
    @discardableResult
    public mutating func play(_ events: [ProxyEvent]) -> Transcript {
        var commands: [ProxyCommand] = []
        for event in events { commands += play(event).commands }
        return Transcript(commands)
    }

    /// Every step played so far, concatenated in order.
    public var transcript: Transcript { Transcript(steps.flatMap(\.commands)) }
}
