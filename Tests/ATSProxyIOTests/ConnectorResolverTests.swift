import ATSPolicy
import Foundation
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a `TCPConnector.connect` on a fresh loop and waits for its outcome.
func connectOutcome(
    host: String, port: UInt16, resolver: Resolver, timeout: Duration = .seconds(5)
) -> Result<SocketAddress?, ConnectError>? {
    let loop = EventLoop()
    let outcome = Expectation<Result<SocketAddress?, ConnectError>>()
    loop.execute {
        TCPConnector.connect(host: host, port: port, on: loop, resolver: resolver, timeout: timeout) { result in
            switch result {
            case .success(let connection):
                outcome.fulfill(.success(connection.remoteAddress))
                connection.close()
            case .failure(let error):
                outcome.fulfill(.failure(error))
            }
        }
    }
    return outcome.wait(seconds: 10)
}

@Suite("TCPConnector and Resolver")
struct ConnectorResolverTests {
    @Test("a closed port is .refused (NSURLError -1004)")
    func refused() throws {
        let group = EventLoopGroup(loopCount: 1)
        let listener = try startEchoServer(group: group)
        let port = listener.boundAddress.port
        stopAndWait(listener)
        let outcome = connectOutcome(host: "127.0.0.1", port: port, resolver: Resolver())
        #expect(outcome == .failure(.refused))
        #expect(ConnectError.refused.failure.code == .cannotConnectToHost)
    }

    @Test("a listener whose accept queue is full never answers: .timedOut (-1001)")
    func timeout() throws {
        let group = EventLoopGroup(loopCount: 1)
        // Bound and listening with backlog 0, but never accepting: the kernel queues one
        // handshake and drops further SYNs.
        let listener = try TCPListener(
            configuration: .init(address: ListenAddress(parsing: "127.0.0.1:0")!, backlog: 0), group: group,
            onAccept: { _ in })
        defer { stopAndWait(listener) }
        var fillers: [Int32] = []
        defer { fillers.forEach { Glibc.close($0) } }
        for _ in 0..<3 {
            let fd = try Socket.makeTCP(family: AF_INET)
            _ = listener.boundAddress.withSockAddr { Glibc.connect(fd, $0, $1) }
            fillers.append(fd)
        }
        usleep(50_000)
        let started = Date()
        let outcome = connectOutcome(
            host: "127.0.0.1", port: listener.boundAddress.port, resolver: Resolver(), timeout: .milliseconds(300))
        #expect(outcome == .failure(.timedOut))
        #expect(Date().timeIntervalSince(started) < 3)
        #expect(ConnectError.timedOut.failure.code == .timedOut)
    }

    @Test("an unresolvable name is .dnsFailure (-1003)")
    func dnsFailure() {
        let outcome = connectOutcome(host: "nonexistent.invalid", port: 443, resolver: Resolver())
        guard case .failure(.dnsFailure(let host, _)) = outcome else {
            Issue.record("expected a DNS failure, got \(String(describing: outcome))")
            return
        }
        #expect(host == "nonexistent.invalid")
        #expect(ConnectError.dnsFailure(host: host, detail: "").failure.code == .cannotFindHost)
    }

    @Test("with the system resolver off, a name without an override fails without any lookup")
    func hermeticResolverFails() {
        let outcome = connectOutcome(
            host: "api.example.com", port: 443, resolver: Resolver(useSystemResolver: false))
        guard case .failure(.dnsFailure) = outcome else {
            Issue.record("expected a DNS failure, got \(String(describing: outcome))")
            return
        }
    }

    @Test("--resolve overrides send a name to a local echo server; a refused first address falls through")
    func overrideConnects() throws {
        let group = EventLoopGroup(loopCount: 1)
        let listener = try startEchoServer(group: group)
        defer { stopAndWait(listener) }
        let closed = try startEchoServer(group: group, address: "[::1]:0")
        let closedPort = closed.boundAddress.port
        stopAndWait(closed)
        var overrides = ResolverOverrides()
        try overrides.addResolve("upstream.test:\(listener.boundAddress.port):127.0.0.1")
        try overrides.addResolve("fallback.test:\(closedPort):[::1]")
        try overrides.addResolve("fallback.test:\(listener.boundAddress.port):[::1],127.0.0.1")
        let resolver = Resolver(overrides: overrides, useSystemResolver: false)
        let direct = connectOutcome(host: "UPSTREAM.test", port: listener.boundAddress.port, resolver: resolver)
        #expect(direct == .success(listener.boundAddress))
        let fallback = connectOutcome(host: "fallback.test", port: listener.boundAddress.port, resolver: resolver)
        #expect(fallback == .success(listener.boundAddress))
        let refused = connectOutcome(host: "fallback.test", port: closedPort, resolver: resolver)
        #expect(refused == .failure(.refused))
    }

    @Test("--resolve syntax: brackets, address lists, '+' prefix, wildcard host; errors name the entry")
    func resolveSyntax() throws {
        var overrides = ResolverOverrides()
        try overrides.addResolve("example.com:443:127.0.0.1")
        try overrides.addResolve("+v6.example:8443:[::1],[2001:db8::2]")
        try overrides.addResolve("*:80:10.0.0.1")
        #expect(overrides.lookup(host: "Example.COM", port: 443) == [IPAddress(parsing: "127.0.0.1")!])
        #expect(overrides.lookup(host: "example.com", port: 80) == [IPAddress(parsing: "10.0.0.1")!])
        #expect(overrides.lookup(host: "example.com", port: 8080) == nil)
        #expect(
            overrides.lookup(host: "v6.example", port: 8443) == [
                IPAddress(parsing: "::1")!, IPAddress(parsing: "2001:db8::2")!,
            ])
        for bad in [
            "example.com", "example.com:443", "example.com:0:127.0.0.1", "example.com:443:not-an-ip", ":443:127.0.0.1",
        ] {
            var scratch = ResolverOverrides()
            #expect(throws: ResolverOverrides.ParseError.self, "\(bad)") { try scratch.addResolve(bad) }
        }
    }

    @Test("hosts files: comments, several names per line, tabs, IPv6; --resolve wins over the file")
    func hostsFile() throws {
        var overrides = ResolverOverrides()
        try overrides.addHostsFile(
            contents: """
                # test hosts
                127.0.0.1\tlocalhost   api.test  # trailing comment

                ::1  v6.test  api.test
                10.9.8.7 pinned.test
                """)
        #expect(
            overrides.lookup(host: "api.test", port: 1) == [
                IPAddress(parsing: "127.0.0.1")!, IPAddress(parsing: "::1")!,
            ])
        #expect(overrides.lookup(host: "V6.TEST", port: 443) == [IPAddress(parsing: "::1")!])
        try overrides.addResolve("pinned.test:443:127.0.0.2")
        #expect(overrides.lookup(host: "pinned.test", port: 443) == [IPAddress(parsing: "127.0.0.2")!])
        #expect(overrides.lookup(host: "pinned.test", port: 80) == [IPAddress(parsing: "10.9.8.7")!])
        var bad = ResolverOverrides()
        #expect(throws: ResolverOverrides.ParseError(entry: "h:2", reason: "invalid address '300.1.1.1'")) {
            try bad.addHostsFile(contents: "127.0.0.1 ok\n300.1.1.1 broken\n", name: "h")
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ats-io-hosts-\(getpid())").path
        try "127.0.0.3 file.test\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var fromFile = ResolverOverrides()
        try fromFile.addHostsFile(path: path)
        #expect(fromFile.lookup(host: "file.test", port: 80) == [IPAddress(parsing: "127.0.0.3")!])
    }

    @Test("literal IPs (bracketed or not) skip every lookup")
    func literals() {
        let resolver = Resolver(useSystemResolver: false)
        #expect(
            resolver.resolveWithoutSystem(host: "[::1]", port: 80)
                == .success([SocketAddress(ipLiteral: "::1", port: 80)!]))
        #expect(
            resolver.resolveWithoutSystem(host: "127.0.0.1", port: 81)
                == .success([SocketAddress(ipLiteral: "127.0.0.1", port: 81)!]))
    }
}
