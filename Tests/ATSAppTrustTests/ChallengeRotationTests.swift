import Dispatch
import Synchronization
import Testing

@testable import ATSAppTrust
@testable import ATSTLS

/// Tests for: which client connections are challenged, with which kind.
@Suite("Challenge rotation")
struct ChallengeRotationTests {
    @Test func byDefaultEveryOtherConnectionIsChallengedStartingWithTheSecond() throws {
        let rotation = ChallengeRotation(specs: [try ChallengeSpec(parsing: "api.test=expired,wrong-host,tls1.0")])
        #expect(rotation.every == 2)
        let got = (1...8).map { _ in rotation.assign(host: "api.test") }
        #expect(
            got == [
                .normal, .challenge(.expired), .normal, .challenge(.wrongHost), .normal, .challenge(.tls10Only),
                .normal, .challenge(.expired),
            ])
        #expect(rotation.connectionCount(host: "API.test.") == 8)
    }

    @Test func everyOneChallengesEveryConnectionAndWrapsAround() throws {
        let rotation = ChallengeRotation(specs: [try ChallengeSpec(parsing: ".*=sha1,rsa1024")], every: 1)
        let got = (1...5).map { _ in rotation.assign(host: "h.test") }
        #expect(
            got == [
                .challenge(.sha1Signature), .challenge(.rsa1024), .challenge(.sha1Signature), .challenge(.rsa1024),
                .challenge(.sha1Signature),
            ])
    }

    @Test func everyThreeLeavesTwoNormalConnectionsBetweenChallenges() throws {
        let rotation = ChallengeRotation(specs: [try ChallengeSpec(parsing: ".*")], every: 3)
        let got = (1...9).map { _ in rotation.assign(host: "h.test") }
        #expect(
            got == [
                .normal, .normal, .challenge(.wrongHost), .normal, .normal, .challenge(.selfSigned), .normal, .normal,
                .challenge(.untrustedCA),
            ])
    }

    @Test func withTheDefaultEveryKindIsPutToTheTestWithinTwiceTheKindCount() throws {
        let rotation = ChallengeRotation(specs: [try ChallengeSpec(parsing: ".*")])
        var seen: [ChallengeKind] = []
        for _ in 0..<(2 * ChallengeKind.allCases.count) {
            if case .challenge(let kind) = rotation.assign(host: "app.test") { seen.append(kind) }
        }
        #expect(seen == ChallengeKind.allCases)
    }

    @Test func hostsNoSpecMatchesAreNeverChallengedNorCounted() throws {
        let rotation = ChallengeRotation(specs: [try ChallengeSpec(parsing: #".*\.example\.com"#)], every: 1)
        for _ in 0..<5 { #expect(rotation.assign(host: "example.com") == .normal) }
        #expect(rotation.connectionCount(host: "example.com") == 0)
        #expect(rotation.kinds(for: "example.com") == nil)
        #expect(ChallengeRotation(specs: []).assign(host: "a.test") == .normal)
    }

    @Test func eachHostHasItsOwnCounterAndTheFirstMatchingSpecGivesItsKinds() throws {
        let rotation = ChallengeRotation(
            specs: [try ChallengeSpec(parsing: "api.test=tls1.1"), try ChallengeSpec(parsing: ".*=expired")], every: 1)
        #expect(rotation.kinds(for: "api.test") == [.tls11Only])
        #expect(rotation.assign(host: "api.test") == .challenge(.tls11Only))
        #expect(rotation.assign(host: "cdn.test") == .challenge(.expired))
        #expect(rotation.assign(host: "api.test") == .challenge(.tls11Only))
        #expect(rotation.connectionCount(host: "api.test") == 2)
        #expect(rotation.connectionCount(host: "cdn.test") == 1)
    }

    @Test func theRuleIsAPureFunctionOfTheConnectionNumber() {
        let kinds: [ChallengeKind] = [.expired, .noSAN]
        #expect(ChallengeRotation.assignment(connection: 0, every: 2, kinds: kinds) == .normal)
        #expect(ChallengeRotation.assignment(connection: 2, every: 2, kinds: kinds) == .challenge(.expired))
        #expect(ChallengeRotation.assignment(connection: 4, every: 2, kinds: kinds) == .challenge(.noSAN))
        #expect(ChallengeRotation.assignment(connection: 6, every: 2, kinds: kinds) == .challenge(.expired))
        #expect(ChallengeRotation.assignment(connection: 6, every: 2, kinds: []) == .normal)
    }

    @Test func concurrentConnectionsGetEachChallengeExactlyOnce() throws {
        let rotation = ChallengeRotation(specs: [try ChallengeSpec(parsing: ".*")], every: 2)
        let total = 2 * ChallengeKind.allCases.count * 50
        let assignments = Mutex<[ChallengeAssignment]>([])
        DispatchQueue.concurrentPerform(iterations: total) { _ in
            let assignment = rotation.assign(host: "busy.test")
            assignments.withLock { $0.append(assignment) }
        }
        let all = assignments.withLock { $0 }
        #expect(all.count == total)
        #expect(all.filter { $0 == .normal }.count == total / 2)
        for kind in ChallengeKind.allCases {
            #expect(all.filter { $0 == .challenge(kind) }.count == 50, "\(kind)")
        }
    }
}
