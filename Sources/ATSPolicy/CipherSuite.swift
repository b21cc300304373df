/// One TLS cipher suite that an Apple client may offer, with both IANA and OpenSSL names.
public struct CipherSuite: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Which ATS list the suite belongs to.
    public enum Group: String, Sendable, Codable {
        /// TLS 1.3 suites (always forward secret).
        case tls13
        /// ECDHE suites: the ATS forward-secrecy list.
        case forwardSecret
        /// Static-RSA key exchange, offered only when forward secrecy is waived.
        case staticRSA
    }

    /// The IANA code point, e.g. 0xC02F.
    public let code: UInt16
    /// The IANA name, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256.
    public let ianaName: String
    /// OpenSSL's name, e.g. ECDHE-RSA-AES128-GCM-SHA256 (TLS 1.3 suites use the IANA name).
    public let openSSLName: String
    public let group: Group

    /// "0xC02F".
    public var hexCode: String {
        let digits = String(code, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// CBC suites with SHA-256/384 MACs (dropped from the ATS lists around iOS 15.4).
    public let isCBCSHA2: Bool

    /// ChaCha20 suites and ECDHE_RSA_AES_256_CBC_SHA, present in code from the iOS 13 era only.
    let isLateAddition: Bool

    /// AES-GCM ECDHE suites, the only TLS 1.2 suites NIAP FCP mode keeps.
    public let isECDHEAESGCM: Bool

    public var description: String { "\(ianaName) (\(hexCode))" }

    init(_ code: UInt16, _ iana: String, _ openSSL: String, _ group: Group) {
        self.code = code
        ianaName = iana
        openSSLName = openSSL
        self.group = group
        // Computed once: evaluation filters the catalogue for every decision.
        isCBCSHA2 = iana.contains("_CBC_SHA256") || iana.contains("_CBC_SHA384")
        isLateAddition = (group == .forwardSecret && iana.contains("CHACHA20")) || code == 0xC014
        isECDHEAESGCM = group == .forwardSecret && iana.contains("_GCM_")
    }

    /// Every suite any Apple ATS list has contained, in Apple's preference order.
    public static let catalogue: [CipherSuite] = [
        CipherSuite(0x1301, "TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", .tls13),
        CipherSuite(0x1302, "TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384", .tls13),
        CipherSuite(0x1303, "TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256", .tls13),
        CipherSuite(0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384", .forwardSecret),
        CipherSuite(0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256", .forwardSecret),
        CipherSuite(0xC024, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "ECDHE-ECDSA-AES256-SHA384", .forwardSecret),
        CipherSuite(0xC023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256", .forwardSecret),
        CipherSuite(0xC00A, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA", .forwardSecret),
        CipherSuite(0xC009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA", .forwardSecret),
        CipherSuite(
            0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305", .forwardSecret),
        CipherSuite(0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384", .forwardSecret),
        CipherSuite(0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256", .forwardSecret),
        CipherSuite(0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "ECDHE-RSA-AES256-SHA384", .forwardSecret),
        CipherSuite(0xC027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256", .forwardSecret),
        CipherSuite(0xC014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA", .forwardSecret),
        CipherSuite(0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA", .forwardSecret),
        CipherSuite(
            0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305", .forwardSecret),
        CipherSuite(0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384", .staticRSA),
        CipherSuite(0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256", .staticRSA),
        CipherSuite(0x003D, "TLS_RSA_WITH_AES_256_CBC_SHA256", "AES256-SHA256", .staticRSA),
        CipherSuite(0x003C, "TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256", .staticRSA),
        CipherSuite(0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA", .staticRSA),
        CipherSuite(0x002F, "TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA", .staticRSA),
    ]

    /// Looks a suite up by IANA code point.
    public static func byCode(_ code: UInt16) -> CipherSuite? { catalogue.first { $0.code == code } }

    /// Looks a suite up by IANA name.
    public static func byIANAName(_ name: String) -> CipherSuite? { catalogue.first { $0.ianaName == name } }

    /// The suites of `groups` that the emulated platform's lists contain, in preference order.
    public static func suites(_ groups: Set<Group>, on platform: Platform) -> [CipherSuite] {
        catalogue.filter { suite in
            guard groups.contains(suite.group) else { return false }
            switch suite.group {
            case .tls13:
                return platform.has(.tls13)
            case .forwardSecret, .staticRSA:
                if suite.isCBCSHA2 && platform.has(.cbcSHA2SuitesRemoved) { return false }
                if suite.isLateAddition && !platform.has(.chachaAndRSA256CBCSuites) { return false }
                return true
            }
        }
    }
}
