import ATSPolicy
import Foundation
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

@Suite("TCPListener")
struct TCPListenerTests {
    @Test(
        "listen addresses parse for IPv4, bracketed IPv6, wildcard and localhost",
        arguments: [
            ("127.0.0.1:8080", "127.0.0.1:8080"), ("[::1]:8080", "[::1]:8080"), ("0.0.0.0:8080", "0.0.0.0:8080"),
            ("[::]:0", "[::]:0"), ("localhost:9", "127.0.0.1:9"),
        ])
    func listenAddressParses(text: String, expected: String) throws {
        let parsed = try #require(ListenAddress(parsing: text))
        #expect(parsed.description == expected)
    }

    @Test(
        "malformed listen addresses are rejected",
        arguments: ["127.0.0.1", "::1:8080", "[::1]8080", "127.0.0.1:70000", "host.example:80", ":80", "[::1]:"])
    func listenAddressRejects(text: String) {
        #expect(ListenAddress(parsing: text) == nil)
    }

    @Test("port 0 binds a kernel-chosen port and reports it")
    func portZeroReportsBoundPort() throws {
        let group = EventLoopGroup(loopCount: 1)
        let listener = try startEchoServer(group: group)
        defer { stopAndWait(listener) }
        #expect(listener.boundAddress.port != 0)
        #expect(listener.boundAddress.ip == IPAddress(bytes: [127, 0, 0, 1]))
        #expect(listener.effectiveAllowList == nil)
    }

    @Test("a listener on ::1 accepts IPv6 clients")
    func ipv6Listener() throws {
        let group = EventLoopGroup(loopCount: 2)
        let listener = try startEchoServer(group: group, address: "[::1]:0")
        defer { stopAndWait(listener) }
        #expect(listener.boundAddress.family == AF_INET6)
        let client = try BlockingClient(connectingTo: listener.boundAddress)
        defer { client.close() }
        client.send("over IPv6")
        client.shutdownWrite()
        #expect(String(decoding: client.readToEnd(), as: UTF8.self) == "over IPv6")
    }

    @Test("binding a port in use fails with EADDRINUSE")
    func addressInUse() throws {
        let group = EventLoopGroup(loopCount: 1)
        let first = try startEchoServer(group: group)
        defer { stopAndWait(first) }
        #expect(throws: IOError.self) {
            _ = try startEchoServer(group: group, address: first.boundAddress.description)
        }
    }

    @Test("beyond maxConnections the over-limit hook answers 503; a slot frees up when a client leaves")
    func maxConnectionsHook() throws {
        let group = EventLoopGroup(loopCount: 2)
        let rejected = Tally(target: 1)
        let listener = try startEchoServer(group: group, maxConnections: 2) { connection in
            connection.write("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            connection.closeAfterFlush()
            rejected.succeed()
        }
        defer { stopAndWait(listener) }
        let first = try BlockingClient(connectingTo: listener.boundAddress)
        let second = try BlockingClient(connectingTo: listener.boundAddress)
        defer { second.close() }
        #expect(eventually { listener.liveConnections == 2 })
        let third = try BlockingClient(connectingTo: listener.boundAddress)
        defer { third.close() }
        let answer = String(decoding: third.readToEnd(), as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 503"))
        #expect(rejected.wait(seconds: 5))
        #expect(listener.liveConnections == 2)
        first.close()
        #expect(eventually { listener.liveConnections == 1 })
        let fourth = try BlockingClient(connectingTo: listener.boundAddress)
        defer { fourth.close() }
        fourth.send("admitted")
        fourth.shutdownWrite()
        #expect(String(decoding: fourth.readToEnd(), as: UTF8.self) == "admitted")
    }

    @Test("a ConnectionLimit shared by two listeners caps their sum")
    func sharedLimit() throws {
        let group = EventLoopGroup(loopCount: 1)
        let limit = ConnectionLimit(maximum: 1)
        func make(_ address: String) throws -> TCPListener {
            let listener = try TCPListener(
                configuration: .init(address: ListenAddress(parsing: address)!), group: group, limit: limit,
                onAccept: { $0.handler = EchoHandler() },
                onOverLimit: { connection in
                    connection.write("503")
                    connection.closeAfterFlush()
                })
            listener.start()
            return listener
        }
        let v4 = try make("127.0.0.1:0")
        defer { stopAndWait(v4) }
        let v6 = try make("[::1]:0")
        defer { stopAndWait(v6) }
        let admitted = try BlockingClient(connectingTo: v4.boundAddress)
        #expect(eventually { limit.liveConnections == 1 })
        let refused = try BlockingClient(connectingTo: v6.boundAddress)
        defer { refused.close() }
        #expect(String(decoding: refused.readToEnd(), as: UTF8.self) == "503")
        #expect(v6.liveConnections == 1)
        admitted.close()
        #expect(eventually { limit.liveConnections == 0 })
    }

    @Test("stop() closes the listening socket: later connects are refused")
    func stopRefusesNewClients() throws {
        let group = EventLoopGroup(loopCount: 1)
        let listener = try startEchoServer(group: group)
        let address = listener.boundAddress
        stopAndWait(listener)
        #expect(throws: IOError.self) { _ = try BlockingClient(connectingTo: address) }
    }

    @Test("connections are spread round-robin over the group's loops")
    func roundRobin() throws {
        let group = EventLoopGroup(loopCount: 3)
        let seen = Tally(target: 6)
        final class LoopIndices: @unchecked Sendable {
            let lock = NSLock()
            var indices: [Int] = []
        }
        let indices = LoopIndices()
        let listener = try TCPListener(
            configuration: .init(address: ListenAddress(parsing: "127.0.0.1:0")!), group: group,
            onAccept: { connection in
                connection.loop.assertInLoop()
                indices.lock.withLock { indices.indices.append(connection.loop.index) }
                connection.handler = EchoHandler()
                seen.succeed()
            })
        listener.start()
        defer { stopAndWait(listener) }
        var clients: [BlockingClient] = []
        for _ in 0..<6 { clients.append(try BlockingClient(connectingTo: listener.boundAddress)) }
        defer { clients.forEach { $0.close() } }
        #expect(seen.wait(seconds: 5))
        let counts = indices.lock.withLock { Dictionary(grouping: indices.indices, by: { $0 }).mapValues(\.count) }
        #expect(counts == [0: 2, 1: 2, 2: 2])
    }

    @Test("the client allow-list matches CIDR blocks and IPv4-mapped peers")
    func allowList() throws {
        let defaults = ClientAllowList.privateAndLinkLocal
        #expect(defaults.allows(IPAddress(parsing: "10.1.2.3")!))
        #expect(defaults.allows(IPAddress(parsing: "192.168.7.1")!))
        #expect(defaults.allows(IPAddress(parsing: "::ffff:172.16.0.9")!))
        #expect(defaults.allows(IPAddress(parsing: "fe80::1")!))
        #expect(defaults.allows(IPAddress(parsing: "127.0.0.1")!))
        #expect(!defaults.allows(IPAddress(parsing: "8.8.8.8")!))
        #expect(!defaults.allows(IPAddress(parsing: "2001:db8::1")!))
        let custom = try #require(ClientAllowList(parsing: ["203.0.113.0/24", "2001:db8::7"]))
        #expect(custom.allows(IPAddress(parsing: "203.0.113.77")!))
        #expect(custom.allows(IPAddress(parsing: "2001:db8::7")!))
        #expect(!custom.allows(IPAddress(parsing: "2001:db8::8")!))
        var bad: String?
        #expect(ClientAllowList(parsing: ["10.0.0.0/33"], invalid: { bad = $0 }) == nil)
        #expect(bad == "10.0.0.0/33")
    }
}
