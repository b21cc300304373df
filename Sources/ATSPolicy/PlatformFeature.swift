/// Every ATS or trust rule that changed between OS releases, as one table of thresholds.
///
/// A rule applies when the emulated OS version is at or above the threshold for its family; rules
/// marked linked-on-or-after also require the app's SDK to be at or above it. Evaluator, TLS layer
/// and diagnostics ask `Platform.has(_:)` instead of comparing versions themselves.
public enum PlatformFeature: String, Sendable, CaseIterable, Codable {
    /// ATS exists (apps linked with the iOS 9 / macOS 10.11 SDK or later).
    case appTransportSecurity
    /// The fine-grained global keys (ForMedia, InWebContent, LocalNetworking) are honoured, their
    /// presence cancels NSAllowsArbitraryLoads, and local hosts and IP literals are exempt.
    case fineGrainedGlobalKeys
    /// SHA-1 signatures and RSA keys below 2048 bits are rejected platform-wide.
    case platformRejectsSHA1AndSmallRSA
    /// Certificate Transparency is required for certificates chaining to system roots.
    case platformCertificateTransparency
    /// TLS 1.3 is offered and its three suites belong to the ATS group.
    case tls13
    /// Server certificates need SAN names, serverAuth EKU, SHA-2 and at most 825 days.
    case strictServerCertificates
    /// The ATS group contains the ChaCha20 and ECDHE_RSA_AES_256_CBC_SHA suites.
    case chachaAndRSA256CBCSuites
    /// The CBC-SHA256/SHA384 suites have left the ATS lists.
    case cbcSHA2SuitesRemoved
    /// Console lines name the task (`Cannot start load of Task <UUID>.<N>…`).
    case taskIdentifierConsoleLines
    /// The newer console wording for blocked cleartext loads ("…cleartext HTTP connection to HOST…").
    case modernCleartextConsoleWording
    /// External (non-local) IP literals require ATS; IP and CIDR exception keys are honoured.
    case externalIPAddressesRequireATS
    /// NSLocalizedDescription of -1200 reads "A TLS error caused the secure connection to fail."
    case modernSecureConnectionFailedText
    /// TLS 1.2 is an absolute minimum: exceptions below TLS 1.2 are no longer honoured.
    case tls12AbsoluteFloor
    /// The NIAP FCP TLS package keys are honoured.
    case niapTLSPackage
    /// Every ClientHello offers the hybrid post-quantum group X25519MLKEM768 first (with a key share),
    /// then the classical groups; a server may answer with any of them (Apple support article 122756).
    case postQuantumKeyExchange
    /// System processes (device management, enrolment, profile and app installation, software update)
    /// require TLS 1.2+, ATS cipher suites and ATS certificates (Apple support article 126655: "as early as
    /// the next major release", so the threshold is uncertain). Apps are not affected.
    case systemServicesRequireATS

    /// The thresholds as messages name them: `iOS 13 / macOS 10.15`. Every message that says since when a rule
    /// holds takes it from here, so the table above is the one place a release is written down.
    public var since: String {
        "iOS \(threshold(for: .iOS)) / macOS \(threshold(for: .macOS))"
    }

    /// The first OS version, per family, that has the feature.
    public func threshold(for family: PlatformFamily) -> OSVersion {
        switch (self, family) {
        case (.appTransportSecurity, .iOS): OSVersion(9)
        case (.appTransportSecurity, .macOS): OSVersion(10, 11)
        case (.fineGrainedGlobalKeys, .iOS): OSVersion(10)
        case (.fineGrainedGlobalKeys, .macOS): OSVersion(10, 12)
        case (.platformRejectsSHA1AndSmallRSA, .iOS): OSVersion(11)
        case (.platformRejectsSHA1AndSmallRSA, .macOS): OSVersion(10, 13)
        case (.platformCertificateTransparency, .iOS): OSVersion(12, 1, 1)
        case (.platformCertificateTransparency, .macOS): OSVersion(10, 14, 3)
        case (.tls13, .iOS): OSVersion(12, 2)
        case (.tls13, .macOS): OSVersion(10, 14, 4)
        case (.strictServerCertificates, .iOS): OSVersion(13)
        case (.strictServerCertificates, .macOS): OSVersion(10, 15)
        case (.chachaAndRSA256CBCSuites, .iOS): OSVersion(13)
        case (.chachaAndRSA256CBCSuites, .macOS): OSVersion(10, 15)
        case (.cbcSHA2SuitesRemoved, .iOS): OSVersion(15, 4)
        case (.cbcSHA2SuitesRemoved, .macOS): OSVersion(12, 3)
        case (.taskIdentifierConsoleLines, .iOS): OSVersion(12)
        case (.taskIdentifierConsoleLines, .macOS): OSVersion(10, 14)
        case (.modernCleartextConsoleWording, .iOS): OSVersion(15)
        case (.modernCleartextConsoleWording, .macOS): OSVersion(12)
        case (.externalIPAddressesRequireATS, .iOS): OSVersion(17)
        case (.externalIPAddressesRequireATS, .macOS): OSVersion(14)
        case (.modernSecureConnectionFailedText, .iOS): OSVersion(18)
        case (.modernSecureConnectionFailedText, .macOS): OSVersion(15)
        case (.tls12AbsoluteFloor, .iOS): OSVersion(26)
        case (.tls12AbsoluteFloor, .macOS): OSVersion(26)
        case (.niapTLSPackage, .iOS): OSVersion(26, 4)
        case (.niapTLSPackage, .macOS): OSVersion(26, 4)
        case (.postQuantumKeyExchange, .iOS): OSVersion(26)
        case (.postQuantumKeyExchange, .macOS): OSVersion(26)
        case (.systemServicesRequireATS, .iOS): OSVersion(27)
        case (.systemServicesRequireATS, .macOS): OSVersion(27)
        }
    }

    /// Whether the app must also be linked against an SDK at or above the threshold.
    public var isLinkedOnOrAfter: Bool {
        switch self {
        case .appTransportSecurity, .externalIPAddressesRequireATS: true
        case .fineGrainedGlobalKeys, .platformRejectsSHA1AndSmallRSA, .taskIdentifierConsoleLines,
            .platformCertificateTransparency, .tls13,
            .strictServerCertificates, .chachaAndRSA256CBCSuites, .cbcSHA2SuitesRemoved,
            .modernCleartextConsoleWording, .modernSecureConnectionFailedText, .tls12AbsoluteFloor,
            .niapTLSPackage, .postQuantumKeyExchange, .systemServicesRequireATS:
            false
        }
    }

    /// Whether the reference marks the threshold itself as uncertain (reported by `explain`).
    public var isUncertain: Bool {
        switch self {
        case .chachaAndRSA256CBCSuites, .cbcSHA2SuitesRemoved, .modernCleartextConsoleWording,
            .taskIdentifierConsoleLines,
            .modernSecureConnectionFailedText, .tls12AbsoluteFloor, .systemServicesRequireATS:
            true
        case .appTransportSecurity, .fineGrainedGlobalKeys, .platformRejectsSHA1AndSmallRSA,
            .platformCertificateTransparency, .tls13, .strictServerCertificates, .externalIPAddressesRequireATS,
            .niapTLSPackage, .postQuantumKeyExchange:
            false
        }
    }
}
