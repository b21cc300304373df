import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore

/// TLS to the proxy itself, in the session: a first TLS record starts the proxy's own handshake (HTTP/1.1 in
/// ALPN), everything inside is the HTTP proxy protocol with `TLS+…` routes, every byte the session writes is
/// sealed, and close_notify precedes the close; a refused handshake is recorded.
@Suite struct ProxyTLSTests {
    typealias Harness = ProxySessionTests.Harness
    typealias S = ProxySessionTests

    /// Completes a client handshake with the session (SNI `localhost`, offering h2 and http/1.1).
    static func handshake(_ harness: Harness) throws -> TLSConnection {
        let context = try TLSContext(role: .client)
        try context.setVersions(minimum: .tls12, maximum: .tls13)
        try context.setClientALPN(["h2", "http/1.1"])
        let client = try TLSConnection(context: context, serverName: "localhost")
        for _ in 0..<10 {
            let progress = client.handshake()
            if progress == .complete && !client.hasOutbound { break }
            if case .failed(let failure) = progress { Issue.record("client handshake failed: \(failure)") }
            client.receive(Transcript(harness.send(.clientBytes(client.takeOutbound()))).clientBytes)
        }
        return client
    }

    /// Seals `text` with `client` and hands it to the session.
    static func send(_ harness: Harness, _ client: TLSConnection, _ text: String) -> [ProxyCommand] {
        _ = client.write(Array(text.utf8))
        return harness.send(.clientBytes(client.takeOutbound()))
    }

    @Test func anAbsoluteFormRequestInsideTLSToTheProxyIsDecidedAndAnsweredSealed() throws {
        let harness = try Harness()
        let client = try Self.handshake(harness)
        #expect(client.state == .established)
        #expect(client.negotiatedALPN == "http/1.1", "the proxy protocol inside is HTTP/1.1")
        let commands = Self.send(harness, client, "GET http://example.com/feed HTTP/1.1\r\nHost: example.com\r\n\r\n")
        let written = Transcript(commands).clientBytes
        #expect(written.first == 0x17, "application data records, not plaintext: \(written.prefix(5))")
        client.receive(written)
        let response = S.text(S.readAll(client))
        #expect(response.hasPrefix("HTTP/1.1 403 Forbidden\r\n"), "\(response)")
        #expect(response.contains("X-ATS-Error: -1022\r\n"))
        let record = try #require(Transcript(commands).records.first)
        #expect(record.route == .tlsAbsoluteForm)
        #expect(record.result == .blockedCleartext)
    }

    @Test func aCONNECTInsideTLSToTheProxyIsGrantedSealedAndReadAsCleartextOrTLS() throws {
        let harness = try Harness(ats: TunnelDetectionTests.allowing)
        let client = try Self.handshake(harness)
        let granted = Self.send(harness, client, "CONNECT plain.test:80 HTTP/1.1\r\nHost: plain.test:80\r\n\r\n")
        client.receive(Transcript(granted).clientBytes)
        #expect(S.text(S.readAll(client)) == "HTTP/1.1 200 Connection established\r\n\r\n")
        let commands = Self.send(harness, client, "GET /x HTTP/1.1\r\nHost: plain.test\r\n\r\n")
        client.receive(Transcript(commands).clientBytes)
        #expect(S.text(S.readAll(client)).hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        #expect(Transcript(commands).records.map(\.route) == [.tlsConnectHTTP])
    }

    @Test func theCloseIsPrecededByCloseNotify() throws {
        let harness = try Harness()
        let client = try Self.handshake(harness)
        let commands = Self.send(
            harness, client, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
        let closeIndex = try #require(commands.firstIndex { if case .closeClient = $0 { true } else { false } })
        client.receive(Transcript(Array(commands[..<closeIndex])).clientBytes)
        #expect(S.text(S.readAll(client)).hasPrefix("HTTP/1.1 403"))
        #expect(client.read() == .closed, "the client read close_notify after the response")
    }

    @Test func aRefusedHandshakeIsRecordedAndClosed() throws {
        let harness = try Harness()
        // A TLS record header whose handshake message is garbage.
        let commands = harness.send(.clientBytes([0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00]))
        #expect(Transcript(commands).closesClient)
        let record = try #require(Transcript(commands).records.first)
        #expect(record.route == .tlsConnect)
        #expect(record.result == .clientUntrustedCA)
        #expect(record.rule.contains("TLS handshake with the proxy itself"), "\(record.rule)")
    }

    @Test func theLeafWithoutSNIIsForTheAddressTheClientReached() {
        #expect(ProxySession.proxyHostName("127.0.0.1:8080") == "127.0.0.1")
        #expect(ProxySession.proxyHostName("[::1]:8080") == "::1")
        #expect(ProxySession.proxyHostName(nil) == "localhost")
    }
}
