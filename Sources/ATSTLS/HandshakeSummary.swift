import ATSPolicy
internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// Everything ATS judges about one certificate, read once with OpenSSL.
public struct CertificateDetails: Sendable, Hashable {
    public let subject: String
    public let issuer: String
    public let serialHex: String
    public let key: KeyAlgorithm
    /// Hash of the certificate's signature (nil when unknown, e.g. Ed25519).
    public let signatureHash: SignatureHash?
    public let signatureAlgorithm: String
    public let notBefore: Date
    public let notAfter: Date
    public let commonName: String?
    public let dnsNames: [String]
    public let ipAddresses: [String]
    public let hasExtendedKeyUsage: Bool
    public let allowsServerAuth: Bool
    public let isCA: Bool
    public let isSelfSigned: Bool
    /// SHA-256 of the SubjectPublicKeyInfo (what pins hold).
    public let spkiSHA256: Data
    public let sha256Fingerprint: [UInt8]

    /// Lifetime in days (notAfter − notBefore).
    public var validityDays: Double { notAfter.timeIntervalSince(notBefore) / 86400 }

    public init(_ certificate: Certificate) {
        subject = certificate.subjectText
        issuer = certificate.issuerText
        serialHex = certificate.serialHex
        key = certificate.keyAlgorithm
        signatureHash = certificate.signatureHash
        signatureAlgorithm = certificate.signatureAlgorithmName
        notBefore = certificate.notBefore
        notAfter = certificate.notAfter
        commonName = certificate.commonName
        let names = certificate.subjectAltNames
        dnsNames = names.dns
        ipAddresses = names.ip
        let eku = certificate.extendedKeyUsage
        hasExtendedKeyUsage = eku.present
        allowsServerAuth = eku.serverAuth
        isCA = certificate.isCA
        isSelfSigned = certificate.isSelfSigned
        spkiSHA256 = certificate.spkiSHA256
        sha256Fingerprint = certificate.sha256Fingerprint
    }

    /// `<cert s: SUBJECT i: ISSUER>` as NSErrorPeerCertificateChainKey prints it (CN only).
    public var appleDescription: String {
        func cn(_ name: String) -> String {
            name.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("CN=") }
                .map { String($0.dropFirst(3)) } ?? name
        }
        return "<cert s: \(cn(subject)) i: \(cn(issuer))>"
    }
}

/// The key exchange of the negotiated suite.
public enum KeyExchange: String, Sendable, Hashable {
    /// TLS 1.3 (always (EC)DHE).
    case tls13 = "TLS 1.3 (EC)DHE"
    /// Elliptic-curve Diffie-Hellman ephemeral.
    case ecdhe = "ECDHE"
    /// Finite-field Diffie-Hellman ephemeral (not in any ATS list).
    case dhe = "DHE"
    /// Static RSA key transport (no forward secrecy).
    case rsa = "RSA"
    /// Anything else (PSK, …).
    case other

    /// Forward secrecy.
    public var isForwardSecret: Bool {
        switch self {
        case .tls13, .ecdhe, .dhe: true
        case .rsa, .other: false
        }
    }
}

/// The negotiated cipher suite.
public struct NegotiatedCipher: Sendable, Hashable {
    /// IANA code point.
    public let code: UInt16
    public let ianaName: String
    public let openSSLName: String
    public let keyExchange: KeyExchange
    /// Authentication (OpenSSL's short name, e.g. "AuthECDSA").
    public let authentication: String
}

/// One signed certificate timestamp and its validation status against the CT log store.
public struct SCTDetails: Sendable, Hashable {
    /// How the SCT arrived.
    public enum Source: String, Sendable, Hashable {
        case embedded, tlsExtension = "tls-extension", ocspStaple = "ocsp", unknown
    }
    /// Validation status.
    public enum Status: String, Sendable, Hashable {
        case valid, invalid, unknownLog = "unknown-log", unverified, unknownVersion = "unknown-version", notSet =
            "not-set"
    }
    public let source: Source
    public let logIDHex: String
    public let timestamp: Date
    public let status: Status
    /// The log behind the SCT, from the log list (nil when the list does not know it).
    public var log: CTLogFacts? = nil
}

/// What one upstream handshake produced: protocol, cipher, chain, verification, SCTs, OCSP and
/// ALPN. Built from a completed `TLSConnection`; judged by `UpstreamJudge` against `TLSRequirements`.
public struct HandshakeSummary: Sendable {
    public let host: String
    public let version: TLSProtocolVersion
    public let cipher: NegotiatedCipher
    /// The key-exchange group, e.g. "x25519" (nil for static RSA).
    public let group: String?
    /// The digest of the server's handshake signature, e.g. "SHA256".
    public let peerSignatureDigest: String?
    /// The chain as the server sent it, leaf first.
    public let presentedChain: [CertificateDetails]
    /// The chain verification built, leaf first.
    public let builtChain: [CertificateDetails]
    public let verificationIssues: [VerificationIssue]
    public let anchor: TrustAnchorKind?
    public let scts: [SCTDetails]
    /// Whether CT could be evaluated (false when the log store is empty).
    public let ctLogsAvailable: Bool
    public let ocspStapleBytes: Int
    public let alpn: String?
    /// The time the summary was judged at (for a resumed session: the time of the full handshake
    /// whose certificate facts it carries).
    public let time: Date
    /// Whether the handshake resumed a session; the certificate facts then come from the full
    /// handshake that created it (see `UpstreamSessionCache`).
    public internal(set) var resumedSession = false
    /// Whether the handshake used the extended master secret (RFC 7627): nil for TLS 1.3, where the key
    /// schedule always binds the transcript and the extension does not exist.
    public internal(set) var extendedMasterSecret: Bool? = nil

    public var leaf: CertificateDetails? { presentedChain.first }
    public var forwardSecret: Bool { cipher.keyExchange.isForwardSecret }
    public var validSCTCount: Int { scts.filter { $0.status == .valid }.count }
}

extension HandshakeSummary {
    /// Reads the summary of an established client connection, verifying the chain with `trust`
    /// and validating SCTs with `ctLogs` at `time`.
    static func read(
        from connection: TLSConnection, host: String, trust: TrustStore, ctLogs: CTLogStore?, time: Date
    ) -> HandshakeSummary {
        let ssl = connection.ssl
        let (version, cipher, group) = negotiatedParameters(connection)
        var signatureNID: Int32 = 0
        let peerDigest =
            ats_SSL_get_peer_signature_nid(ssl, &signatureNID) == 1
            ? OBJ_nid2sn(signatureNID).map { String(cString: $0) } : nil

        let presented = connection.peerCertificates
        let verification = trust.verify(chain: presented, host: host, at: time)
        let scts = validatedSCTs(ssl, presented: presented, verification: verification, ctLogs: ctLogs, time: time)
        let presentedDetails = presented.map(CertificateDetails.init)
        let known = Dictionary(
            presentedDetails.map { ($0.sha256Fingerprint, $0) }, uniquingKeysWith: { first, _ in first })
        let builtDetails = verification.builtChain.map { certificate in
            known[certificate.sha256Fingerprint] ?? CertificateDetails(certificate)
        }
        var ocsp: UnsafePointer<UInt8>?
        let ocspLength = ats_SSL_get_tlsext_status_ocsp_resp(ssl, &ocsp)

        return HandshakeSummary(
            host: host, version: version, cipher: cipher, group: group, peerSignatureDigest: peerDigest,
            presentedChain: presentedDetails, builtChain: builtDetails,
            verificationIssues: verification.issues, anchor: verification.anchor, scts: scts,
            ctLogsAvailable: (ctLogs?.logCount ?? 0) > 0, ocspStapleBytes: max(0, ocspLength),
            alpn: connection.negotiatedALPN,
            time: time
        ).withExtendedMasterSecret(of: connection)
    }

    /// The summary with `extendedMasterSecret` read from `connection` (TLS 1.2 and below only).
    func withExtendedMasterSecret(of connection: TLSConnection) -> HandshakeSummary {
        var copy = self
        copy.extendedMasterSecret =
            version == .tls13 ? nil : ats_SSL_get_extms_support(connection.ssl) == 1
        return copy
    }

    /// The summary of a resumed handshake: version, cipher, group and ALPN from `connection`;
    /// everything about the certificates (and the time they were verified at) from `facts`, the
    /// summary of the full handshake that created the session.
    static func resumed(from connection: TLSConnection, facts: HandshakeSummary) -> HandshakeSummary {
        let (version, cipher, group) = negotiatedParameters(connection)
        var summary = HandshakeSummary(
            host: facts.host, version: version, cipher: cipher, group: group,
            peerSignatureDigest: facts.peerSignatureDigest, presentedChain: facts.presentedChain,
            builtChain: facts.builtChain, verificationIssues: facts.verificationIssues, anchor: facts.anchor,
            scts: facts.scts, ctLogsAvailable: facts.ctLogsAvailable, ocspStapleBytes: facts.ocspStapleBytes,
            alpn: connection.negotiatedALPN, time: facts.time)
        summary.resumedSession = true
        return summary.withExtendedMasterSecret(of: connection)
    }

    /// Version, cipher suite and key-exchange group of an established connection.
    static func negotiatedParameters(_ connection: TLSConnection) -> (TLSProtocolVersion, NegotiatedCipher, String?) {
        let ssl = connection.ssl
        let version = connection.negotiatedVersion ?? .tls12
        let cipherPointer = SSL_get_current_cipher(ssl)
        let cipher: NegotiatedCipher
        if let cipherPointer {
            let kx: KeyExchange
            switch SSL_CIPHER_get_kx_nid(cipherPointer) {
            case NID_kx_any: kx = .tls13
            case NID_kx_ecdhe: kx = .ecdhe
            case NID_kx_dhe: kx = .dhe
            case NID_kx_rsa: kx = .rsa
            default: kx = .other
            }
            let auth = OBJ_nid2sn(SSL_CIPHER_get_auth_nid(cipherPointer)).map { String(cString: $0) } ?? "?"
            cipher = NegotiatedCipher(
                code: SSL_CIPHER_get_protocol_id(cipherPointer),
                ianaName: SSL_CIPHER_standard_name(cipherPointer).map { String(cString: $0) } ?? "?",
                openSSLName: SSL_CIPHER_get_name(cipherPointer).map { String(cString: $0) } ?? "?", keyExchange: kx,
                authentication: auth)
        } else {
            cipher = NegotiatedCipher(
                code: 0, ianaName: "?", openSSLName: "?", keyExchange: .other, authentication: "?")
        }
        let groupID = ats_SSL_get_negotiated_group(ssl)
        let group =
            groupID > 0 && cipher.keyExchange != .rsa
            ? SSL_group_to_name(ssl, groupID).map { String(cString: $0) } : nil
        return (version, cipher, group)
    }

    /// The peer's SCTs, validated against `ctLogs` with the verified chain's issuer.
    static func validatedSCTs(
        _ ssl: OpaquePointer, presented: [Certificate], verification: ChainVerification, ctLogs: CTLogStore?,
        time: Date
    ) -> [SCTDetails] {
        var scts: [SCTDetails] = []
        if let stack = SSL_get0_peer_scts(ssl), ats_sk_SCT_num(stack) > 0, let leaf = presented.first {
            if let ctLogs, ctLogs.logCount > 0, let policy = CT_POLICY_EVAL_CTX_new() {
                _ = CT_POLICY_EVAL_CTX_set1_cert(policy, leaf.pointer)
                let issuer =
                    verification.builtChain.count > 1 ? verification.builtChain[1] : presented.dropFirst().first
                if let issuer { _ = CT_POLICY_EVAL_CTX_set1_issuer(policy, issuer.pointer) }
                CT_POLICY_EVAL_CTX_set_shared_CTLOG_STORE(policy, ctLogs.store)
                CT_POLICY_EVAL_CTX_set_time(policy, UInt64(max(0, time.timeIntervalSince1970 * 1000)))
                _ = SCT_LIST_validate(stack, policy)
                CT_POLICY_EVAL_CTX_free(policy)
            }
            ERR_clear_error()
            for index in 0..<ats_sk_SCT_num(stack) {
                guard let sct = ats_sk_SCT_value(stack, index) else { continue }
                var logID: UnsafeMutablePointer<UInt8>?
                let length = SCT_get0_log_id(sct, &logID)
                let idBytes = logID.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
                let source: SCTDetails.Source
                switch SCT_get_source(sct) {
                case SCT_SOURCE_X509V3_EXTENSION: source = .embedded
                case SCT_SOURCE_TLS_EXTENSION: source = .tlsExtension
                case SCT_SOURCE_OCSP_STAPLED_RESPONSE: source = .ocspStaple
                default: source = .unknown
                }
                let status: SCTDetails.Status
                switch SCT_get_validation_status(sct) {
                case SCT_VALIDATION_STATUS_VALID: status = .valid
                case SCT_VALIDATION_STATUS_INVALID: status = .invalid
                case SCT_VALIDATION_STATUS_UNKNOWN_LOG: status = .unknownLog
                case SCT_VALIDATION_STATUS_UNVERIFIED: status = .unverified
                case SCT_VALIDATION_STATUS_UNKNOWN_VERSION: status = .unknownVersion
                default: status = .notSet
                }
                scts.append(
                    SCTDetails(
                        source: source, logIDHex: hexString(idBytes),
                        timestamp: Date(timeIntervalSince1970: TimeInterval(SCT_get_timestamp(sct)) / 1000),
                        status: status, log: ctLogs?.facts(forLogID: idBytes)))
            }
        }
        ERR_clear_error()
        return scts
    }
}
