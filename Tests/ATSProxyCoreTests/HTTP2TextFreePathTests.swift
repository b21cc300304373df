import ATSHTTP2
import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// The HTTP/2 client → HTTP/2 origin path carries no HTTP/1.1 text: a stream's request reaches a real
/// `UpstreamH2Link` as parts and goes out as HEADERS and DATA to an origin `HTTP2Session`; the origin's answer comes
/// back as parts and reaches the client as frames. Proved by counting the HTTP/1.1 heads the process writes and parses
/// while the request runs (`HTTP1TextCounter`, debug builds), not by timing.
@Suite("HTTP/2 path without HTTP/1.1 text")
struct HTTP2TextFreePathTests {
    typealias Harness = HTTP2FrontendTests.Harness

    /// A real link over cleartext HTTP/2 to an in-memory origin session, driven the way the pool drives it.
    final class LinkedOrigin {
        let link: UpstreamH2Link
        let origin: HTTP2Session
        let channel: UpstreamH2Link.ChannelID
        /// Request heads and DATA the origin received.
        var requests: [[HTTP2Header]] = []
        var requestBody: [UInt8] = []
        /// Response parts the link handed to the channel, not yet given to the lane.
        var partsForLane: [HTTPPart] = []

        init() throws {
            link = try UpstreamH2Link(tls: nil)
            origin = try HTTP2Session(role: .server)
            channel = link.openChannel()
            try carry(link.start())
        }

        /// Delivers the link's network bytes to the origin (and the origin's replies back) until nothing moves.
        func carry(_ outputs: [UpstreamH2Link.Output]) throws {
            var pending = outputs
            for _ in 0..<1_000 {
                var toOrigin: [UInt8] = []
                for output in pending {
                    switch output {
                    case .network(let bytes): toOrigin += bytes
                    case .channelParts(let id, let parts): if id == channel { partsForLane += parts }
                    case .channelReset(_, let code): Issue.record("channel reset: \(code)")
                    case .channelWritable, .closeConnection: break
                    }
                }
                pending = []
                for event in origin.receive(toOrigin) + origin.takeEvents() {
                    switch event {
                    case .headers(_, .request, let fields): requests.append(fields)
                    case .data(let stream, let bytes):
                        requestBody += bytes
                        origin.consume(stream: stream, bytes: bytes.count)
                    default: break
                    }
                }
                let reply = origin.takeOutbound()
                if reply.isEmpty && toOrigin.isEmpty { return }
                if !reply.isEmpty { pending = link.receive(reply) }
            }
            Issue.record("the link and the origin did not settle")
        }
    }

    /// Sends the lane's request parts to the link, the origin's response back to the lane; returns the commands.
    static func exchange(
        _ harness: Harness, through origin: LinkedOrigin, status: Int, body: String
    ) throws -> [ProxyCommand] {
        let sent = harness.upstream(1).sentParts
        harness.upstream(1).sentParts = []
        try origin.carry(origin.link.send(sent, channel: origin.channel))
        let stream = try #require(lastStream(origin), "the origin received no request")
        try origin.origin.submitResponse(
            stream: stream, headers: [HTTP2Header(":status", String(status)), HTTP2Header("x-origin", "h2")],
            endStream: false)
        try origin.origin.submitData(stream: stream, bytes: Array(body.utf8), endStream: true)
        try origin.carry(origin.link.receive(origin.origin.takeOutbound()))
        let parts = origin.partsForLane
        origin.partsForLane = []
        return harness.send(.stream(1, .upstreamParts(parts)))
    }

    /// The highest stream id the origin has seen a request on.
    static func lastStream(_ origin: LinkedOrigin) -> Int32? {
        origin.requests.isEmpty ? nil : Int32(origin.requests.count * 2 - 1)
    }

    @Test func anH2StreamToAnH2OriginWritesAndParsesNoHTTP1Head() throws {
        let harness = try Harness()
        let origin = try LinkedOrigin()
        let counter = HTTP1TextCounter()
        try HTTP1TextCounter.$current.withValue(counter) {
            let (stream, opened) = try harness.request("/typed", method: "POST", body: Array("ping".utf8))
            let key = try #require(Transcript(opened).laneConnects.first?.reuse)
            harness.upstream(1).writesDownParts = false
            harness.reuse(
                lane: 1, UpstreamLease(key: key, tls: nil, facts: ["alpn": "h2"], wire: .h2, shareable: true))
            let done = try Self.exchange(harness, through: origin, status: 201, body: "pong")
            let view = harness.stream(stream)
            #expect(view.shape == "HDE" && view.text == "pong")
            #expect((view.head ?? []).contains(HTTP2Header(":status", "201")))
            #expect((view.head ?? []).contains(HTTP2Header("x-origin", "h2")))
            #expect(Transcript(done).records.first?.status == 201)
            // The second request on the same lane and channel.
            let (next, _) = try harness.request("/again")
            _ = try Self.exchange(harness, through: origin, status: 200, body: "again")
            #expect(harness.stream(next).text == "again")
        }
        #expect(origin.requests.count == 2)
        #expect(origin.requests.first?.contains(HTTP2Header(":path", "/typed")) == true)
        #expect(origin.requestBody == Array("ping".utf8))
        #expect(counter.headsWritten == 0, "HTTP/1.1 heads written on the h2 → h2 path")
        #expect(counter.headsParsed == 0, "HTTP/1.1 heads parsed on the h2 → h2 path")
    }

    @Test func theCounterSeesTheHTTP1TextOfAnHTTP1Origin() throws {
        let harness = try Harness()
        let counter = HTTP1TextCounter()
        try HTTP1TextCounter.$current.withValue(counter) {
            let (stream, opened) = try harness.request("/classic")
            let key = try #require(Transcript(opened).laneConnects.first?.reuse)
            harness.reuse(
                lane: 1,
                UpstreamLease(
                    key: key, tls: nil, facts: ["alpn": "http/1.1"], wire: .http1, shareable: true))
            harness.respond(lane: 1, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            #expect(harness.stream(stream).text == "ok")
        }
        // The lane wrote its request head and parsed the origin's response head: the counter is not blind.
        #expect(counter.headsWritten == 1)
        #expect(counter.headsParsed == 1)
    }
}
