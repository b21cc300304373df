import ATSPolicy
import ATSProxyCore
import ATSTLS
import Foundation

/// One distinct load the session saw, reduced to what the minimal dictionary and its round trip
/// need: where it went, how, what TLS it negotiated and what it needs from the empty dictionary.
struct ObservedLoad: Sendable, Hashable {
    let target: RequestTarget
    let source: RequestSource
    let kind: HostStatus
    let code: String?
    /// The version the server negotiated or (for a refused handshake) is known or assumed to support.
    let serverVersion: TLSProtocolVersion?
    /// The negotiated suite (IANA name), when the handshake completed.
    let cipher: String?
    let needs: HostNeeds
    let rule: String
    let fix: String?

    /// Classifies one record; nil when its URL is not an http(s) URL the policy engine can judge.
    init?(record: RequestRecord) {
        guard let target = try? RequestTarget(parsing: record.url) else { return nil }
        self.target = target
        source = record.source
        kind = Self.kind(of: record)
        code = Self.code(of: record)
        rule = record.rule
        fix = record.fix
        cipher = record.tls?["cipher"]
        // A raw tunnel (neither TLS nor HTTP inside a CONNECT) is no cleartext load: ATS does not govern it.
        var needs = HostNeeds(
            cleartext: target.scheme == .http && record.route?.isRawTunnel != true, minimumTLSVersion: nil,
            forwardSecrecyWaiver: false, assumptions: [],
            unfixable: [])
        var version = record.tls?["version"].flatMap(TLSProtocolVersion.init(plistString:))
        if target.scheme == .https {
            version = Self.deriveTLSNeeds(record, negotiated: version, needs: &needs)
            if record.tls?["ct"] == CTStatus.notEvaluatedText {
                needs.assumptions.append(
                    "\(CTStatus.notEvaluatedText) (the chain ends in a system root; a device would check its SCTs)")
            }
        }
        serverVersion = version
        self.needs = needs
    }

    /// Fills `needs` for an https load; returns the server version the round trip must accept.
    private static func deriveTLSNeeds(
        _ record: RequestRecord, negotiated: TLSProtocolVersion?, needs: inout HostNeeds
    ) -> TLSProtocolVersion? {
        let stream = record.streamError
        let fix = record.fix ?? ""
        let noChange = fix.contains("no Info.plist change")
        var version = negotiated
        if let negotiated {
            if negotiated < .tls12 { needs.minimumTLSVersion = negotiated.rawValue }
        } else if stream == .secureTransport(-9836) {
            if let fromFix = Self.versions(in: fix).filter({ $0 < .tls12 }).max() {
                version = fromFix
            } else if let fromRule = Self.versions(in: record.rule).filter({ $0 < .tls12 }).max() {
                version = fromRule
            } else if Self.versions(in: record.rule).min() == .tls13 {
                version = .tls12
                needs.assumptions.append(
                    "the loaded policy required TLS 1.3 and the server refused it; TLS 1.2 (the default) is assumed to work"
                )
            } else {
                version = .tls10
                needs.assumptions.append(
                    "the server refused TLS 1.2 and later, but the session did not learn which version it supports; TLSv1.0 is assumed (run with --mode report, or ats-proxy diagnose, to narrow it)"
                )
            }
            if let version, version < .tls12 { needs.minimumTLSVersion = version.rawValue }
        }
        let keyExchange = record.tls?["keyExchange"]
        if let keyExchange, record.tls?["cipher"] != nil {
            if keyExchange == "RSA" {
                needs.forwardSecrecyWaiver = true
            } else if keyExchange == "DHE" {
                needs.unfixable.append(
                    "the server chose \(record.tls?["cipher"] ?? "a DHE suite") (finite-field DHE); ATS accepts only ECDHE or static RSA"
                )
            } else if let cipher = record.tls?["cipher"], CipherSuite.byIANAName(cipher) == nil,
                keyExchange != KeyExchangeName.tls13
            {
                needs.unfixable.append("the server chose \(cipher), which is in no ATS cipher-suite list")
            }
        } else if stream == .secureTransport(-9824) {
            if fix.contains("\(ATSKey.exceptionRequiresForwardSecrecy) = NO") {
                needs.forwardSecrecyWaiver = true
            } else if noChange || record.rule.contains("finite-field DHE") {
                needs.unfixable.append(
                    record.rule.isEmpty ? "the server accepts no cipher suite ATS allows" : record.rule)
            } else {
                needs.forwardSecrecyWaiver = true
                needs.assumptions.append(
                    "the server refused every forward-secret suite; static-RSA key exchange is assumed to work (NSExceptionRequiresForwardSecrecy = NO)"
                )
            }
        }
        let broken = Self.kind(of: record) == .violation || Self.kind(of: record) == .trustFailure
        let handshakeLevel = stream == .secureTransport(-9836) || stream == .secureTransport(-9824)
        guard broken, !handshakeLevel, record.errorCode != nil else { return version }
        if record.rule.contains(ATSKey.pinnedDomains) {
            needs.unfixable.append(
                "identity pinning: \(record.rule) (an exception cannot relax a pin; update \(ATSKey.pinnedDomains))")
        } else if stream == .secureTransport(-9800) && record.rule.contains("no TLS version satisfies") {
            // The loaded policy asked for a version the platform lacks; the empty dictionary does not.
        } else if !noChange, fix.contains(ATSKey.exceptionMinimumTLSVersion),
            let fromFix = Self.versions(in: fix).filter({ $0 < .tls12 }).max()
        {
            needs.minimumTLSVersion = fromFix.rawValue
        } else if !noChange, fix.contains("\(ATSKey.exceptionRequiresForwardSecrecy) = NO") {
            needs.forwardSecrecyWaiver = true
        } else {
            needs.unfixable.append(record.rule.isEmpty ? "the secure connection failed" : record.rule)
        }
        return version
    }

    /// Spellings of `ATSTLS.KeyExchange` as the proxy writes them into the TLS facts.
    enum KeyExchangeName {
        static let tls13 = "TLS 1.3 (EC)DHE"
    }

    /// Every TLS version named in `text`, as `TLSv1.1` or `TLS 1.1`.
    static func versions(in text: String) -> [TLSProtocolVersion] {
        TLSProtocolVersion.allCases.filter { text.contains($0.rawValue) || text.contains($0.displayName) }
    }

    /// `-1022`, `-1200 [3:-9836]`; nil for completed loads without an error.
    static func code(of record: RequestRecord) -> String? {
        guard let error = record.errorCode else { return nil }
        return "\(error)" + (record.streamError.map { " [\($0)]" } ?? "")
    }

    /// Violation, trust failure, transport failure or ok.
    static func kind(of record: RequestRecord) -> HostStatus {
        switch record.result {
        case .completed: return .ok
        case .blockedCleartext, .reported: return .violation
        case .clientUntrustedCA: return .clientUntrustedCA
        // The proxy's own refusal (a target it does not serve): not the app's policy, nothing an Info.plist fixes.
        case .refused: return .transportFailure
        // A challenge is the app's trust on trial, not an ATS verdict (SessionReport routes these records to the
        // App trust section before any ATS figure).
        case .challengeRefused, .challengeAccepted: return .ok
        case .failed:
            guard let code = record.errorCode else { return .transportFailure }
            switch code {
            case NSURLErrorCode.appTransportSecurityRequiresSecureConnection.rawValue:
                return .violation
            case NSURLErrorCode.secureConnectionFailed.rawValue:
                return record.streamError?.isSecureTransport ?? true ? .violation : .transportFailure
            case (-1206)...(-1201):
                return record.atsRequired ? .violation : .trustFailure
            default:
                return .transportFailure
            }
        }
    }
}
