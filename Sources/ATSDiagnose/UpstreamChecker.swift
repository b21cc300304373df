import ATSPolicy
import ATSTLS
import Foundation

/// Runs upstream checks over a blocking transport: the enforcement handshake, the verdict, the
/// explanation probe when the handshake itself is refused, and the smallest Info.plist change.
/// Used by `diagnose`, `verify` and the run's startup checks; the proxy's data path uses the same pieces (engine,
/// summary, `UpstreamVerdict.judging`) without this blocking helper, which is why it lives here and not in ATSTLS.
public struct UpstreamChecker: Sendable {
    public let client: UpstreamTLSClient
    public let clock: @Sendable () -> Date

    public init(client: UpstreamTLSClient, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.client = client
        self.clock = clock
    }

    /// One enforcement handshake for `requirements`, judged.
    public func attempt(
        requirements: TLSRequirements, host: String, url: String, transport: any HandshakeTransport
    ) -> UpstreamVerdict {
        guard requirements.isSatisfiable else {
            return .unsatisfiable(requirements: requirements, url: url, host: host)
        }
        let connection: TLSConnection
        do {
            connection = try client.makeConnection(requirements: requirements, host: host)
        } catch {
            return .failed(
                .handshake(TLSFailure(reason: .other, errors: [])), requirements: requirements, url: url, host: host)
        }
        let stream: any HandshakeStream
        do {
            stream = try transport.connect()
        } catch {
            return .failed(.transport(error), requirements: requirements, url: url, host: host)
        }
        if let failure = HandshakePump.run(connection, over: stream) {
            return .failed(failure, requirements: requirements, url: url, host: host)
        }
        let summary = client.summarize(connection, host: host, time: clock())
        return .judging(summary, requirements: requirements, url: url, host: host)
    }

    /// The full check for `target` under `policy`: attempt, explanation probe (protocol_version or
    /// handshake_failure), and the smallest Info.plist change when blocked.
    public func check(
        _ target: RequestTarget, policy: PolicyContext, transport: any HandshakeTransport
    ) -> UpstreamVerdict {
        let decision = policy.decide(target)
        var verdict = attempt(
            requirements: decision.requirements, host: target.host, url: target.url, transport: transport)
        guard verdict.isBlocked else { return verdict }
        if needsProbe(verdict) {
            verdict.serverOffer = explain(requirements: decision.requirements, host: target.host, transport: transport)
        }
        verdict.fix = SmallestFix(policy: policy).text(
            for: verdict, target: target,
            retry: { !attempt(requirements: $0, host: target.host, url: target.url, transport: transport).isBlocked })
        return verdict
    }

    /// Whether `verdict` failed in a way only a probe of the server's offer can explain (a
    /// handshake alert or no common version/cipher). Public for `ats-proxy diagnose` (ATSDiagnose).
    public func needsProbe(_ verdict: UpstreamVerdict) -> Bool {
        guard case .handshake(let failure) = verdict.attemptFailure else { return false }
        switch failure.reason {
        case .receivedAlert(40), .receivedAlert(70), .noCommonVersion, .noCommonCipher: return true
        case .receivedAlert, .notTLS, .closedWithoutAlert, .resetDuringHandshake, .badCertificate, .other: return false
        }
    }

    /// The permissive explanation probe: which versions does the server accept at all, and does
    /// it accept ECDHE at TLS ≤ 1.2.
    public func explain(
        requirements: TLSRequirements, host: String, transport: any HandshakeTransport
    ) -> ServerOffer {
        var offer = ServerOffer()
        for version in TLSProtocolVersion.allCases.reversed() {
            if let suite = probe(version: version, cipherList: nil, host: host, transport: transport) {
                offer.acceptedVersions[version] = suite
            }
        }
        let allowed = offer.acceptedVersions.keys.filter {
            $0 >= requirements.minimumVersion && $0 <= requirements.maximumVersion
        }
        if offer.acceptedVersions.isEmpty {
            offer.sentence = "the server completed no handshake even when offered every version and cipher suite"
            return offer
        }
        let accepted = offer.acceptedVersions.keys.sorted().map(\.displayName)
        if allowed.isEmpty {
            offer.sentence = "this server supports only \(englishList(accepted))"
            return offer
        }
        if let legacy = allowed.filter({ $0 <= .tls12 }).max(), let chosen = offer.acceptedVersions[legacy] {
            offer.ecdheProbed = true
            offer.ecdheChoice = probe(
                version: legacy, cipherList: "ECDHE:@SECLEVEL=0", host: host, transport: transport)
            if let ecdhe = offer.ecdheChoice {
                let listed = requirements.cipherSuites.contains { $0.ianaName == ecdhe }
                offer.sentence =
                    "at \(legacy.displayName) this server chooses \(chosen) when offered every suite and \(ecdhe) when offered only ECDHE suites"
                    + (listed ? "" : "; \(ecdhe) is not in the ATS cipher list of the emulated platform")
            } else if chosen.contains("_DHE_") {
                offer.sentence =
                    "this server offers only finite-field DHE key exchange at \(legacy.displayName) (it chose \(chosen)); ATS accepts only ECDHE"
            } else if chosen.hasPrefix("TLS_RSA_") {
                offer.sentence =
                    "this server offers only RSA key exchange at \(legacy.displayName) (it chose \(chosen) and refused every ECDHE suite)"
            } else {
                offer.sentence = "this server refused every ECDHE suite at \(legacy.displayName) (it chose \(chosen))"
            }
        } else {
            offer.sentence = "this server accepts \(englishList(accepted))"
        }
        return offer
    }

    private func probe(
        version: TLSProtocolVersion, cipherList: String?, host: String, transport: any HandshakeTransport
    ) -> String? {
        guard let connection = try? client.makeProbeConnection(version: version, cipherList: cipherList, host: host),
            let stream = try? transport.connect()
        else { return nil }
        guard HandshakePump.run(connection, over: stream) == nil else { return nil }
        return client.summarize(connection, host: host, time: clock()).cipher.ianaName
    }
}
