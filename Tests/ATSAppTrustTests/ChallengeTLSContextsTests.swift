import ATSPolicy
import ATSTestSupport
import COpenSSL
import COpenSSLShims
import Foundation
import Testing

@testable import ATSAppTrust
@testable import ATSTLS

/// Tests for: what each challenge context negotiates, pumped in memory against OpenSSL clients.
@Suite("Challenge TLS contexts")
struct ChallengeTLSContextsTests {
    static let authority = try! CertificateAuthority.generate(hostName: "challenge-contexts")
    static let contexts = try! ChallengeTLSContexts(certificates: try! ChallengeCertificates(authority: authority))
    static let host = "api.challenge.test"

    /// A client that takes anything: every version, every suite, security level 0, no verification.
    static func permissiveClient(serverName: String? = host) throws -> TLSConnection {
        let context = try TLSContext(role: .client)
        context.setSecurityLevel(0)
        try context.setVersions(minimum: .tls10, maximum: .tls13)
        try context.setCipherList("ALL:@SECLEVEL=0")
        try context.setClientALPN(["h2", "http/1.1"])
        return try TLSConnection(context: context, serverName: serverName)
    }

    @Test(arguments: ChallengeKind.allCases)
    func aPermissiveClientGetsTheKindsLeafAndHandshake(_ kind: ChallengeKind) throws {
        let client = try Self.permissiveClient()
        let server = try Self.contexts.makeConnection(connectHost: "ignored.test", kind: kind)
        let result = pumpHandshake(client: client, server: server)
        #expect(result.client == nil && result.server == nil, "\(String(describing: result))")
        let served = try Self.contexts.certificates.leaf(for: Self.host, kind: kind)
        #expect(
            client.peerCertificates.map(\.sha256Fingerprint)
                == ([served.certificate] + served.chain).map(\.sha256Fingerprint))
        let summary = TestPKI.client().summarize(client, host: Self.host, time: Date())
        switch kind {
        case .tls10Only: #expect(summary.version == .tls10)
        case .tls11Only: #expect(summary.version == .tls11)
        case .staticRSAOnly:
            #expect(summary.version == .tls12)
            #expect(summary.cipher.keyExchange == .rsa, "\(summary.cipher.openSSLName)")
        case .wrongHost, .selfSigned, .untrustedCA, .expired, .notYetValid, .sha1Signature, .rsa1024, .noSAN,
            .overlongValidity:
            #expect(summary.version == .tls13)
        }
        // The ALPN choice is the normal server's, without h2 where HTTP/2 forbids the handshake.
        #expect(client.negotiatedALPN == (kind.category == .certificate ? "h2" : "http/1.1"))
    }

    @Test(arguments: [ChallengeKind.rsa1024, .sha1Signature, .staticRSAOnly])
    func theCertificateKindsAlsoSpeakTLS12WithTheirKey(_ kind: ChallengeKind) throws {
        let context = try TLSContext(role: .client)
        context.setSecurityLevel(0)
        try context.setVersions(minimum: .tls12, maximum: .tls12)
        let client = try TLSConnection(context: context, serverName: Self.host)
        let server = try Self.contexts.makeConnection(connectHost: Self.host, kind: kind)
        let result = pumpHandshake(client: client, server: server)
        #expect(result.client == nil && result.server == nil, "\(String(describing: result))")
        #expect(client.negotiatedVersion == .tls12)
    }

    /// Why the sha1 and rsa1024 contexts run at a lower security level: one level higher, OpenSSL
    /// refuses to install the leaf and the servername callback ends the handshake (internal_error).
    @Test(arguments: zip([ChallengeKind.sha1Signature, .rsa1024], [1, 2]))
    func openSSLWillNotServeTheWeakLeavesOneLevelHigher(_ kind: ChallengeKind, level: Int) throws {
        let context = try TLSContext(role: .server)
        context.setSecurityLevel(level)
        try context.setVersions(minimum: .tls12, maximum: .tls13)
        try context.setCipherList(ChallengeTLSContexts.certificateKindCiphers)
        context.setSNIProvider(ChallengeLeafProvider(kind: kind, certificates: Self.contexts.certificates))
        let server = try TLSConnection(context: context, serverName: nil, fallbackServerName: Self.host)
        let result = pumpHandshake(client: try Self.permissiveClient(), server: server)
        #expect(result.client?.reason == .receivedAlert(80), "\(String(describing: result))")
    }

    @Test func withoutSNITheConnectHostNamesTheLeaf() throws {
        let client = try Self.permissiveClient(serverName: nil)
        let server = try Self.contexts.makeConnection(connectHost: "192.0.2.9", kind: .expired)
        let result = pumpHandshake(client: client, server: server)
        #expect(result.client == nil && result.server == nil)
        #expect(client.peerCertificates.first?.subjectAltNames.ip == ["192.0.2.9"])
        #expect(server.servedName == "192.0.2.9")
    }

    /// OpenSSL at its default security level (2, compiled into Debian's OpenSSL 3) cannot speak TLS 1.0
    /// or 1.1 at all, whatever version range the client allows: it has no signature algorithm left
    /// that is strong enough.
    @Test(arguments: [ChallengeKind.tls10Only, .tls11Only])
    func aDefaultLevelOpenSSLClientCannotSpeakTheOldVersions(_ kind: ChallengeKind) throws {
        let context = try TLSContext(role: .client)
        try context.setVersions(minimum: .tls10, maximum: .tls13)
        let client = try TLSConnection(context: context, serverName: Self.host)
        let server = try Self.contexts.makeConnection(connectHost: Self.host, kind: kind)
        let result = pumpHandshake(client: client, server: server)
        #expect(result.client != nil)
        #expect(result.server != nil)
    }

    @Test func aClientOfferingOnlyForwardSecretSuitesFindsNoSuiteInCommonWithStaticRSA() throws {
        let context = try TLSContext(role: .client)
        try context.setVersions(minimum: .tls12, maximum: .tls13)
        try context.setCipherList("ECDHE+AESGCM:ECDHE+CHACHA20:ECDHE+AES")
        let client = try TLSConnection(context: context, serverName: Self.host)
        let server = try Self.contexts.makeConnection(connectHost: Self.host, kind: .staticRSAOnly)
        let result = pumpHandshake(client: client, server: server)
        #expect(result.client?.reason == .receivedAlert(40), "\(String(describing: result.client))")
        #expect(result.server?.reason == .noCommonCipher || result.server?.reason == .noCommonVersion)
    }

    /// Handshakes twice with `make`, offering the first connection's session in the second; whether the
    /// second resumed it.
    static func resumes(_ make: () throws -> TLSConnection) throws -> Bool {
        let context = try TLSContext(role: .client)
        context.setSecurityLevel(0)
        try context.setVersions(minimum: .tls10, maximum: .tls13)
        try context.setCipherList("ALL:@SECLEVEL=0")
        // A client keeps the sessions it is issued (TLS 1.3 tickets replace the handshake's session).
        _ = ats_SSL_CTX_set_session_cache_mode(context.pointer, Int(SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL))
        var session: OpaquePointer?
        defer { if let session { SSL_SESSION_free(session) } }
        for round in 0..<2 {
            let engine = try TLSConnection(context: context, serverName: host)
            if let session { #expect(SSL_set_session(engine.ssl, session) == 1) }
            let server = try make()
            let result = pumpHandshake(client: engine, server: server)
            #expect(result.client == nil && result.server == nil)
            // Application bytes from the server flush any ticket it holds back; the client reads both.
            server.write(Array("hello".utf8))
            engine.receive(server.takeOutbound())
            #expect(engine.read() == .data(Array("hello".utf8)))
            if round == 0 {
                // A copy: the engine's own session is marked not resumable when it is freed without close_notify.
                session = SSL_get_session(engine.ssl).flatMap { SSL_SESSION_dup($0) }
            } else {
                #expect(!engine.peerCertificates.isEmpty || engine.resumedSession)
                return engine.resumedSession
            }
        }
        return false
    }

    /// A resumed handshake presents no certificate, so a challenge must never be one.
    @Test(arguments: ChallengeKind.allCases)
    func aChallengeIsNeverResumedFromAnEarlierSession(_ kind: ChallengeKind) throws {
        #expect(try !Self.resumes { try Self.contexts.makeConnection(connectHost: Self.host, kind: kind) })
    }

    /// The control: the same client does resume with the proxy's normal context.
    @Test func theNormalContextDoesResume() throws {
        let normal = try ServerTLSContext(leaves: try LeafCertificateCache(authority: Self.authority))
        #expect(try Self.resumes { try normal.makeConnection(connectHost: Self.host) })
    }
}
