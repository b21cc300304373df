import ATSHTTP2
import Testing

/// A client and a server `HTTP2Session` wired back to back in memory. `pump()` moves bytes both ways until neither
/// side has anything to send, recording every event and handing it to the per-side reaction closures, which may
/// submit more commands. Single-threaded: one test owns one loopback.
public final class HTTP2Loopback {
    public let client: HTTP2Session
    public let server: HTTP2Session
    /// Every event each side reported, in order.
    public var clientEvents: [HTTP2Event] = []
    public var serverEvents: [HTTP2Event] = []
    /// Whether received DATA is acknowledged at once (`consume`); false models a slow reader.
    public var clientConsumes = true
    public var serverConsumes = true
    /// Reactions to each side's events (run after the event is recorded).
    public var onServerEvent: (HTTP2Event) throws -> Void = { _ in }
    public var onClientEvent: (HTTP2Event) throws -> Void = { _ in }

    public init(client: HTTP2Configuration = HTTP2Configuration(), server: HTTP2Configuration = HTTP2Configuration())
        throws
    {
        self.client = try HTTP2Session(role: .client, configuration: client)
        self.server = try HTTP2Session(role: .server, configuration: server)
    }

    /// Exchanges bytes until a round moves nothing and produces no event.
    public func pump(maxRounds: Int = 1_000_000) throws {
        for _ in 0..<maxRounds {
            var progressed = false
            let toServer = client.takeOutbound()
            progressed = try deliver(client.takeEvents(), client: true) || progressed
            if !toServer.isEmpty {
                progressed = true
                _ = try deliver(server.receive(toServer), client: false)
            }
            let toClient = server.takeOutbound()
            progressed = try deliver(server.takeEvents(), client: false) || progressed
            if !toClient.isEmpty {
                progressed = true
                _ = try deliver(client.receive(toClient), client: true)
            }
            if !progressed { return }
        }
        Issue.record("pump did not settle")
    }

    /// Records events, consumes DATA if configured, runs the reaction; returns whether there were any.
    private func deliver(_ events: [HTTP2Event], client isClient: Bool) throws -> Bool {
        for event in events {
            if isClient {
                clientEvents.append(event)
                if case .data(let stream, let bytes) = event, clientConsumes {
                    client.consume(stream: stream, bytes: bytes.count)
                }
                try onClientEvent(event)
            } else {
                serverEvents.append(event)
                if case .data(let stream, let bytes) = event, serverConsumes {
                    server.consume(stream: stream, bytes: bytes.count)
                }
                try onServerEvent(event)
            }
        }
        return !events.isEmpty
    }
}

extension HTTP2Event {
    /// Whether the event is part of a stream's message (head, body, trailers, end), as opposed to connection or
    /// lifecycle events. Total over the cases, so a new case has to be classified here.
    public var isMessagePart: Bool {
        switch self {
        case .headers, .data, .streamEnded:
            return true
        case .settings, .settingsAcknowledged, .streamReset, .streamResetSent, .streamClosed, .goAway, .goAwaySent,
            .pingAcknowledged, .sessionFailed:
            return false
        }
    }
}

/// Deterministic test bodies: byte `i` of body `seed` is a mix of both, so swapped or shifted chunks differ.
public func testBody(seed: Int, count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31) ^ ($0 >> 8) ^ (seed &* 131)) }
}

/// A plain GET request head for `path`.
public func getRequest(_ path: String = "/", method: String = "GET") -> [HTTP2Header] {
    [
        HTTP2Header(":method", method), HTTP2Header(":scheme", "https"),
        HTTP2Header(":authority", "example.com"), HTTP2Header(":path", path),
    ]
}

/// Hand-written HTTP/2 frames for hostile-input tests (test-only: the product never writes frames itself), and a
/// parser for what a session sends back.
public enum RawH2 {
    /// The client connection preface.
    public static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// One frame: 9-byte header + payload.
    public static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, payload: [UInt8] = []) -> [UInt8] {
        let length = UInt32(payload.count)
        return [
            UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags,
            UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff),
        ] + payload
    }

    /// SETTINGS with `entries`.
    public static func settings(_ entries: [(UInt16, UInt32)] = []) -> [UInt8] {
        var payload: [UInt8] = []
        for (id, value) in entries {
            payload += [UInt8(id >> 8), UInt8(id & 0xff)] + be32(value)
        }
        return frame(type: 0x4, stream: 0, payload: payload)
    }

    /// SETTINGS ACK.
    public static let settingsAck = frame(type: 0x4, flags: 0x1, stream: 0)

    /// The preface and an empty SETTINGS: what a well-behaved client opens with.
    public static let clientStart = preface + settings() + settingsAck

    /// HEADERS carrying `block`.
    public static func headers(stream: UInt32, block: [UInt8], endStream: Bool = true, endHeaders: Bool = true)
        -> [UInt8]
    {
        frame(type: 0x1, flags: (endStream ? 0x1 : 0) | (endHeaders ? 0x4 : 0), stream: stream, payload: block)
    }

    /// CONTINUATION carrying `block`.
    public static func continuation(stream: UInt32, block: [UInt8], endHeaders: Bool = false) -> [UInt8] {
        frame(type: 0x9, flags: endHeaders ? 0x4 : 0, stream: stream, payload: block)
    }

    /// DATA.
    public static func data(stream: UInt32, _ bytes: [UInt8], endStream: Bool = false) -> [UInt8] {
        frame(type: 0x0, flags: endStream ? 0x1 : 0, stream: stream, payload: bytes)
    }

    /// RST_STREAM with `code`.
    public static func rst(stream: UInt32, code: UInt32 = 0x8) -> [UInt8] {
        frame(type: 0x3, stream: stream, payload: be32(code))
    }

    /// WINDOW_UPDATE on `stream` (0: the connection) granting `increment` bytes.
    public static func windowUpdate(stream: UInt32, increment: UInt32) -> [UInt8] {
        frame(type: 0x8, stream: stream, payload: be32(increment & 0x7fff_ffff))
    }

    /// PING with an 8-byte `payload` (an ACK when `ack`).
    public static func ping(_ payload: UInt64, ack: Bool = false) -> [UInt8] {
        frame(
            type: 0x6, flags: ack ? 0x1 : 0, stream: 0, payload: (0..<8).map { UInt8(payload >> (56 - 8 * $0) & 0xff) })
    }

    /// PUSH_PROMISE on `stream` promising `promised` with `block`.
    public static func pushPromise(stream: UInt32, promised: UInt32, block: [UInt8]) -> [UInt8] {
        frame(type: 0x5, flags: 0x4, stream: stream, payload: be32(promised) + block)
    }

    /// HPACK block of a GET for https://`authority`/ (static-table indices), plus literal `extra` fields.
    public static func requestBlock(authority: String = "example.com", extra: [(String, String)] = []) -> [UInt8] {
        var block: [UInt8] = [0x82, 0x87, 0x84]  // :method GET, :scheme https, :path /
        block += [0x41] + hpackString(authority)  // :authority, literal value, incremental indexing
        for (name, value) in extra { block += literal(name, value) }
        return block
    }

    /// HPACK literal field without indexing, new name, no Huffman.
    public static func literal(_ name: String, _ value: String) -> [UInt8] {
        [0x00] + hpackString(name) + hpackString(value)
    }

    /// HPACK string: 7-bit-prefix length (H = 0) then the bytes.
    public static func hpackString(_ string: String) -> [UInt8] {
        let bytes = Array(string.utf8)
        var out: [UInt8] = []
        var length = bytes.count
        if length < 127 {
            out.append(UInt8(length))
        } else {
            out.append(127)
            length -= 127
            while length >= 128 {
                out.append(UInt8(length & 0x7f | 0x80))
                length >>= 7
            }
            out.append(UInt8(length))
        }
        return out + bytes
    }

    /// Big-endian 32-bit.
    public static func be32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    /// A frame a session sent, as parsed by `RawH2.frames(in:)`.
    public struct Frame: Equatable {
        public let type: UInt8
        public let flags: UInt8
        public let stream: UInt32
        public let payload: [UInt8]

        /// The error code of a GOAWAY or RST_STREAM frame.
        public var errorCode: UInt32? {
            switch type {
            case 0x3 where payload.count >= 4: return word(at: 0)
            case 0x7 where payload.count >= 8: return word(at: 4)
            default: return nil
            }
        }

        private func word(at index: Int) -> UInt32 {
            payload[index..<index + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
    }

    /// Splits a server's output (no preface) into frames.
    public static func frames(in bytes: [UInt8]) -> [Frame] {
        var result: [Frame] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            guard index + 9 + length <= bytes.count else { break }
            let stream = bytes[index + 5..<index + 9].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7fff_ffff
            result.append(
                Frame(
                    type: bytes[index + 3], flags: bytes[index + 4], stream: stream,
                    payload: Array(bytes[index + 9..<index + 9 + length])))
            index += 9 + length
        }
        return result
    }

    /// GOAWAY error codes in a server's output.
    public static func goAwayCodes(in bytes: [UInt8]) -> [UInt32] {
        frames(in: bytes).filter { $0.type == 0x7 }.compactMap(\.errorCode)
    }

    /// (stream, code) of each RST_STREAM in a server's output.
    public static func resets(in bytes: [UInt8]) -> [RawReset] {
        frames(in: bytes).filter { $0.type == 0x3 }.map { RawReset(stream: $0.stream, code: $0.errorCode ?? 0) }
    }

    /// One RST_STREAM seen on the wire.
    public struct RawReset: Equatable {
        public let stream: UInt32
        public let code: UInt32

        public init(stream: UInt32, code: UInt32) {
            self.stream = stream
            self.code = code
        }
    }
}
