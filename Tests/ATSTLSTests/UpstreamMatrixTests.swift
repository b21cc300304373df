import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSTLS

/// Tests for: Upstream verdicts against loopback fixture servers.
@Suite("Upstream verdicts against loopback fixture servers")
struct UpstreamMatrixTests {
    @Test("default ATS policy", arguments: Fixture.allCases)
    func defaultPolicy(_ fixture: Fixture) throws {
        let server = try TestServer(.tls(fixture.makeContext()))
        defer { server.stop() }
        let verdict = check(server, Policies.standard)
        #expect(Expectation.of(verdict) == fixture.underDefaultPolicy, "\(verdict.rule)")
        if verdict.isBlocked {
            #expect(!verdict.reasons.isEmpty)
            #expect(verdict.fix != nil)
            #expect(verdict.streamDomain == 3)
        }
    }

    @Test("NSAllowsArbitraryLoads: default trust codes", arguments: Fixture.allCases)
    func arbitraryLoads(_ fixture: Fixture) throws {
        let server = try TestServer(.tls(fixture.makeContext()))
        defer { server.stop() }
        let verdict = check(server, Policies.arbitraryLoads)
        #expect(Expectation.of(verdict) == fixture.underArbitraryLoads, "\(verdict.rule)")
    }

    @Test("the exception that should let it through does", arguments: Fixture.allCases)
    func relaxation(_ fixture: Fixture) throws {
        let server = try TestServer(.tls(fixture.makeContext()))
        defer { server.stop() }
        let (policy, expected) = fixture.relaxation
        let verdict = check(server, policy)
        #expect(Expectation.of(verdict) == expected, "\(verdict.rule)")
    }
}
