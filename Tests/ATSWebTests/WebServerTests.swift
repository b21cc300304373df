import ATSProxyCore
import ATSProxyIO
import Foundation
import Testing

@testable import ATSWeb

/// The web server on a real loop, read with a plain socket: replay of the ring, live batches
/// capped per flush with a `skipped` event, and nothing armed while no page is open.
@Suite(.serialized) struct WebServerTests {
    static func server(store: FlowStore, liveFlowsPerFlush: Int = 100) throws -> (WebServer, SocketAddress) {
        var configuration = WebServer.Configuration(address: ListenAddress(parsing: "127.0.0.1:0")!)
        configuration.liveFlowsPerFlush = liveFlowsPerFlush
        configuration.flushInterval = .milliseconds(50)
        let content = WebContent(
            title: "test", har: { Data("{}".utf8) }, reportJSON: { Data("{}".utf8) }, reportHTML: { "<html>" },
            minimalDictionary: { "<key>NSAppTransportSecurity</key><dict/>" }, caPEM: Array("PEM".utf8))
        let server = WebServer(configuration: configuration, store: store, content: content, backend: .epoll)
        return (server, try server.start())
    }

    /// Opens `/events` and returns a function that reads what arrived within `seconds`.
    static func openStream(_ address: SocketAddress) throws -> (Int32, (Double) -> String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = address.port.bigEndian
        sin.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(connected == 0)
        let request = Array("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var received: [UInt8] = []
        let read: (Double) -> String = { seconds in
            var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 65536)
            while Date() < deadline {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 { received += buffer[0..<count] }
            }
            return String(decoding: received, as: UTF8.self)
        }
        return (fd, read)
    }

    static func ids(_ text: String) -> [Int] {
        text.components(separatedBy: "\n").filter { $0.hasPrefix("id: ") }.compactMap { Int($0.dropFirst(4)) }
    }

    @Test func replaysTheRingThenCapsLiveFlowsAndSaysHowManyItSkipped() throws {
        let store = FlowStore(capacity: 500)
        for index in 0..<300 { store.record(sampleRecord("http://old\(index).example/")) }
        let (server, address) = try Self.server(store: store, liveFlowsPerFlush: 20)
        defer { server.stop() }
        let (fd, read) = try Self.openStream(address)
        defer { close(fd) }
        var text = read(1.0)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"))
        #expect(Self.ids(text) == Array(1...300), "the whole ring is replayed in order")
        #expect(text.contains("event: dictionary"))
        #expect(server.subscriberCount == 1)

        // A burst far above the live cap: the page gets the newest 20 and a count of the rest.
        for index in 0..<1000 { store.record(sampleRecord("http://new\(index).example/")) }
        text = read(1.0)
        let live = Self.ids(text).filter { $0 > 300 }
        #expect(live == Array(1281...1300), "\(live.prefix(5))…")
        #expect(text.contains("event: skipped\ndata: {\"count\":980}"), "\(text.suffix(300))")

        // A trickle below the cap arrives whole.
        for index in 0..<5 { store.record(sampleRecord("http://trickle\(index).example/")) }
        text = read(0.6)
        #expect(Self.ids(text).filter { $0 > 1300 } == Array(1301...1305))
    }

    @Test func aPageOpenedLaterGetsEarlierFlowsThenLiveOnes() throws {
        let store = FlowStore(capacity: 10)
        let (server, address) = try Self.server(store: store)
        defer { server.stop() }
        store.record(sampleRecord("http://a.example/"))
        #expect(server.subscriberCount == 0)
        let (fd, read) = try Self.openStream(address)
        defer { close(fd) }
        #expect(Self.ids(read(0.5)) == [1])
        store.record(sampleRecord("http://b.example/"))
        #expect(Self.ids(read(0.5)) == [1, 2])
    }

    @Test func ringStaysWithinItsCapacityAfterManyFlows() {
        let store = FlowStore(capacity: 1000)
        for index in 0..<50_000 { store.record(sampleRecord("http://h\(index % 97).example/")) }
        #expect(store.count == 1000)
        #expect(store.newestID == 50_000)
        #expect(store.flows().first?.id == 49_001)
    }
}
