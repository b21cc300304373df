import ATSPolicy
import Testing

@testable import ATSTLS

/// Tests for: the verdict of one challenged connection, the run's ledger, and each kind's texts.
@Suite("Challenge outcomes")
struct ChallengeOutcomeTests {
    static let alert = TLSFailure(reason: .receivedAlert(48), errors: [])

    @Test func anAbortedHandshakeIsAPassNamingTheAlert() {
        var probe = ChallengeProbe(host: "a.test", kind: .untrustedCA)
        let outcome = probe.handshakeFailed(Self.alert)
        #expect(outcome.result == .refusedHandshake(.receivedAlert(48)))
        #expect(!outcome.isFinding)
        #expect(outcome.meaning.contains("it sent the alert unknown_ca"))
        #expect(outcome.meaning.contains("NSURLErrorDomain -1200 [3:-9802]"))
        #expect(probe.outcome == outcome)
        // The close that follows changes nothing.
        #expect(probe.clientClosed() == outcome)
    }

    @Test func aCloseAfterTheHandshakeWithoutARequestIsAPass() {
        var probe = ChallengeProbe(host: "a.test", kind: .wrongHost)
        probe.handshakeCompleted()
        #expect(probe.state == .established)
        #expect(probe.outcome == nil)
        let outcome = probe.clientClosed()
        #expect(outcome.result == .closedWithoutRequest)
        #expect(!outcome.isFinding)
    }

    @Test func aCloseDuringTheHandshakeIsARefusal() {
        var probe = ChallengeProbe(host: "a.test", kind: .tls10Only)
        #expect(probe.clientClosed().result == .refusedHandshake(.closedWithoutAlert))
    }

    @Test func aRequestThroughTheChallengeIsAFindingWithTheKindsMeaning() {
        var probe = ChallengeProbe(host: "a.test", kind: .wrongHost)
        probe.handshakeCompleted()
        let outcome = probe.requestReceived()
        #expect(outcome.isFinding)
        #expect(
            outcome.meaning
                == "the client accepted a certificate for another host: its trust evaluation is disabled or overridden (for example AFSecurityPolicy allowInvalidCertificates = YES, validatesDomainName = NO, or a delegate that accepts any server trust)"
        )
        // More requests on the same connection, then the close, keep the one verdict.
        #expect(probe.requestReceived() == outcome)
        #expect(probe.clientClosed() == outcome)
        #expect(outcome.description.hasPrefix("a.test wrong-host: FINDING — the client accepted"))
    }

    @Test func theLedgerKeepsOneVerdictPerHostAndKindAndAFindingWins() {
        var ledger = ChallengeLedger()
        ledger.record(ChallengeOutcome(host: "b.test", kind: .expired, result: .refusedHandshake(.receivedAlert(45))))
        ledger.record(ChallengeOutcome(host: "a.test", kind: .tls10Only, result: .refusedHandshake(.receivedAlert(70))))
        ledger.record(ChallengeOutcome(host: "a.test", kind: .wrongHost, result: .closedWithoutRequest))
        ledger.record(ChallengeOutcome(host: "a.test", kind: .wrongHost, result: .sentRequest))
        ledger.record(ChallengeOutcome(host: "a.test", kind: .wrongHost, result: .closedWithoutRequest))
        let results = ledger.results
        #expect(results.map { "\($0.host) \($0.kind)" } == ["a.test wrong-host", "a.test tls1.0", "b.test expired"])
        #expect(results[0].isFinding && results[0].findings == 1 && results[0].passes == 2)
        #expect(results[0].meaning == ChallengeKind.wrongHost.acceptanceMeaning)
        #expect(!results[1].isFinding && !results[2].isFinding)
        #expect(ledger.findings.map(\.kind) == [.wrongHost])
    }

    @Test(arguments: ChallengeKind.allCases)
    func everyKindHasItsTexts(_ kind: ChallengeKind) {
        #expect(kind.acceptanceMeaning.hasPrefix("the client "))
        #expect(!kind.acceptanceMeaning.contains("\n"))
        #expect(!kind.presents.isEmpty)
        #expect(kind.atsRefusal.code == .secureConnectionFailed)
        switch kind.category {
        case .certificate:
            #expect(kind.atsRefusal.streamCode == -9802)
            #expect(kind.defaultTrustRefusal != nil)
        case .handshake:
            #expect(kind.atsRefusal.streamCode == (kind == .staticRSAOnly ? -9824 : -9836))
            #expect(kind.defaultTrustRefusal == nil)
        }
        #expect(kind.atsRefusal.description.hasPrefix("NSURLErrorDomain -1200 [3:"))
    }

    @Test func theCategoriesSplitTheKindsNineToThree() {
        #expect(ChallengeKind.all(.certificate).count == 9)
        #expect(ChallengeKind.all(.handshake) == [.tls10Only, .tls11Only, .staticRSAOnly])
        #expect(
            ChallengeKind.expired.defaultTrustRefusal?.description
                == "NSURLErrorDomain -1201 [3:-9814] (NSURLErrorServerCertificateHasBadDate, errSSLCertExpired)")
    }
}
