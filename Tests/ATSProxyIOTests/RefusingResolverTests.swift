import ATSPolicy
import ATSProxyCore
import Foundation
import Testing

@testable import ATSProxyIO

/// A resolver for clients on other machines drops the proxy host's own addresses: a name that resolves only
/// to them fails before any connection is tried (issue 17, finding 1: `--resolve`, hosts files and DNS names
/// such as `localtest.me` that point at loopback).
@Suite struct RefusingResolverTests {
    static func resolve(_ host: String, port: UInt16, with resolver: Resolver) -> Result<[SocketAddress], ConnectError>?
    {
        let loop = EventLoop()
        let outcome = Expectation<Result<[SocketAddress], ConnectError>>()
        loop.execute { resolver.resolve(host: host, port: port, on: loop) { outcome.fulfill($0) } }
        return outcome.wait(seconds: 10)
    }

    static func base() throws -> Resolver {
        var overrides = ResolverOverrides()
        try overrides.addResolve("db.test:5432:127.0.0.1")
        try overrides.addResolve("mixed.test:443:127.0.0.1")
        try overrides.addResolve("mixed.test:443:203.0.113.7")
        try overrides.addResolve("lan.test:80:192.168.77.1")
        try overrides.addResolve("far.test:443:203.0.113.9")
        return Resolver(overrides: overrides, useSystemResolver: false)
    }

    @Test func namesThatResolveToThisMachineFailAndOthersKeepTheirOtherAddresses() throws {
        let policy = LocalTargetPolicy(ownAddresses: [IPAddress(parsing: "192.168.77.1")!])
        let resolver = try Self.base().refusing(because: "this machine") { policy.isThisMachine($0) }
        for (host, port) in [("db.test", 5432), ("lan.test", 80), ("127.0.0.1", 22), ("::ffff:127.0.0.1", 22)] {
            let outcome = Self.resolve(host, port: UInt16(port), with: resolver)
            #expect(outcome == .failure(.dnsFailure(host: host, detail: "this machine")), "\(host)")
        }
        let mixed = Self.resolve("mixed.test", port: 443, with: resolver)
        #expect((try? mixed?.get())?.map(\.ip.description) == ["203.0.113.7"])
        let far = Self.resolve("far.test", port: 443, with: resolver)
        #expect((try? far?.get())?.map(\.ip.description) == ["203.0.113.9"])
    }

    @Test func theUnrefusingResolverStillAnswersWithLoopback() throws {
        let outcome = Self.resolve("db.test", port: 5432, with: try Self.base())
        #expect((try? outcome?.get())?.map(\.ip.description) == ["127.0.0.1"])
    }
}

/// The machine's own addresses, which clients on other machines may not target.
@Suite struct OwnAddressTests {
    @Test func everyInterfaceAddressIsListedLoopbackAndLANAlike() {
        let all = NetworkInterfaces.allAddresses()
        #expect(all.contains(IPAddress(parsing: "127.0.0.1")!), "\(all)")
        for lan in NetworkInterfaces.lanIPv4Addresses() { #expect(all.contains(lan), "\(lan) in \(all)") }
        let policy = LocalTargetPolicy(ownAddresses: Set(all))
        #expect(all.allSatisfy { policy.isThisMachine($0) })
    }
}
