import ATSDiagnose
import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSTLS

/// Key-exchange groups: run-time detection of what the linked OpenSSL provides, the offer an emulated
/// platform makes upstream, and the group a handshake reports.
@Suite("Key-exchange groups: detection, the platform's offer, the negotiated group")
struct KeyExchangeGroupTests {
    /// Whether the linked OpenSSL is 3.5 or later (the first with ML-KEM), read at run time.
    static var openSSLHasMLKEM: Bool {
        let words = OpenSSLLibrary.version.split(separator: " ")
        let numbers = words.count > 1 ? words[1].split(separator: ".").compactMap { Int($0) } : []
        guard numbers.count >= 2 else { return false }
        return numbers[0] > 3 || (numbers[0] == 3 && numbers[1] >= 5)
    }

    @Test func detectionAcceptsAGroupTheLinkedOpenSSLHas() {
        #expect(TLSContext.supportsGroup("X25519"))
        #expect(TLSContext.supportsGroup("P-256"))
    }

    @Test func detectionRefusesUnknownAndMalformedNames() {
        #expect(!TLSContext.supportsGroup("NOT-A-GROUP"))
        #expect(!TLSContext.supportsGroup(""))
        #expect(!TLSContext.supportsGroup("X25519:P-256"))
    }

    @Test func hybridGroupDetectionFollowsTheLinkedOpenSSL() {
        // OpenSSL 3.0 (Debian 12) has no ML-KEM; 3.5+ does. The answer must match the library actually loaded.
        #expect(TLSContext.supportsGroup("X25519MLKEM768") == Self.openSSLHasMLKEM)
    }

    @Test func theOfferKeepsThePlatformOrderLessTheUnavailableGroups() {
        let wanted = KeyExchangeGroup.offered(on: Platform(parsing: "ios:26.0")!)
        #expect(wanted == [.x25519MLKEM768, .x25519, .secp256r1, .secp384r1, .secp521r1])
        let without = GroupOffer(wanted: wanted, supports: { $0 != "X25519MLKEM768" })
        #expect(without.offered == [.x25519, .secp256r1, .secp384r1, .secp521r1])
        #expect(without.unavailable == [.x25519MLKEM768])
        #expect(without.openSSLList == "X25519:P-256:P-384:P-521")
        #expect(without.bannerLine.contains("X25519MLKEM768 not offered"))
        #expect(without.bannerLine.contains("never an ATS failure"))
        let with = GroupOffer(wanted: wanted, supports: { _ in true })
        #expect(with.openSSLList == "X25519MLKEM768:X25519:P-256:P-384:P-521")
        #expect(with.unavailable.isEmpty)
        #expect(!with.bannerLine.contains("not offered"))
        let none = GroupOffer(wanted: wanted, supports: { _ in false })
        #expect(none.offered == [.x25519, .secp256r1])
    }

    @Test func theRealOfferForTheDefaultPlatformMatchesTheLinkedOpenSSL() {
        let offer = GroupOffer(wanted: KeyExchangeGroup.offered(on: .default))
        #expect(offer.offered.first == (Self.openSSLHasMLKEM ? .x25519MLKEM768 : .x25519))
        #expect(offer.unavailable == (Self.openSSLHasMLKEM ? [] : [.x25519MLKEM768]))
    }

    @Test func platformsBefore26OfferOnlyClassicalGroups() {
        #expect(
            KeyExchangeGroup.offered(on: Platform(parsing: "ios:18.0")!) == [
                .x25519, .secp256r1, .secp384r1, .secp521r1,
            ])
        #expect(KeyExchangeGroup.offered(on: Platform(parsing: "macos:15")!).first == .x25519)
        #expect(KeyExchangeGroup.offered(on: Platform(parsing: "macos:26")!).first == .x25519MLKEM768)
    }

    @Test func namesAndCodePoints() {
        #expect(KeyExchangeGroup(name: "x25519") == .x25519)
        #expect(KeyExchangeGroup(name: "P-256") == .secp256r1)
        #expect(KeyExchangeGroup(name: "secp384r1") == .secp384r1)
        #expect(KeyExchangeGroup(name: "X25519MLKEM768")?.codepointText == "0x11EC")
        #expect(KeyExchangeGroup.secp256r1.codepointText == "0x0017")
        #expect(KeyExchangeGroup(name: "brainpool") == nil)
    }

    /// The group a completed handshake reports, against a fixture server limited to `groups`.
    static func negotiatedGroup(serverGroups: String, maximum: TLSProtocolVersion) throws -> String? {
        let context = TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), maximum: maximum)
        try context.setGroups(serverGroups)
        let server = try TestServer(.tls(context))
        defer { server.stop() }
        let checker = UpstreamChecker(client: TestPKI.client())
        let target = RequestTarget(scheme: .https, host: TestPKI.host, port: Int(server.port), url: "https://ats.test/")
        let verdict = checker.attempt(
            requirements: Policies.standard.decide(target).requirements, host: target.host, url: target.url,
            transport: server.transport)
        return verdict.summary?.group
    }

    @Test func aHandshakeReportsTheGroupTheServerChose() throws {
        #expect(try Self.negotiatedGroup(serverGroups: "X25519", maximum: .tls13) == "x25519")
        #expect(try Self.negotiatedGroup(serverGroups: "P-256", maximum: .tls13) == "secp256r1")
        #expect(try Self.negotiatedGroup(serverGroups: "P-384", maximum: .tls12) == "secp384r1")
    }
}
