import ATSTLS

/// An app's `AFSecurityPolicy` as a value: pinning mode, pinned certificates (the `.cer` files it bundles),
/// `allowInvalidCertificates` and `validatesDomainName`. Pinned certificates are kept once each, in the
/// order given (AFNetworking stores them as a set of DER blobs, so a duplicate counts once).
public struct AFSecurityPolicy: Sendable {
    /// `SSLPinningMode`.
    public let mode: AFPinningMode
    /// `pinnedCertificates`, parsed; unique by DER.
    public let pinnedCertificates: [Certificate]
    /// `allowInvalidCertificates` (AFNetworking's default: NO).
    public let allowInvalidCertificates: Bool
    /// `validatesDomainName` (AFNetworking's default: YES).
    public let validatesDomainName: Bool

    /// A policy; `pinnedCertificates` is reduced to one certificate per distinct DER encoding.
    public init(
        mode: AFPinningMode, pinnedCertificates: [Certificate] = [], allowInvalidCertificates: Bool = false,
        validatesDomainName: Bool = true
    ) {
        self.mode = mode
        var seen: Set<[UInt8]> = []
        self.pinnedCertificates = pinnedCertificates.filter { seen.insert($0.derBytes).inserted }
        self.allowInvalidCertificates = allowInvalidCertificates
        self.validatesDomainName = validatesDomainName
    }

    /// `+[AFSecurityPolicy defaultPolicy]`: mode None, nothing pinned, AC = NO, VD = YES.
    public static let `default` = AFSecurityPolicy(mode: .none)

    /// The DER encodings of the pinned certificates (what `containsObject:` compares).
    public var pinnedDER: Set<[UInt8]> { Set(pinnedCertificates.map(\.derBytes)) }

    /// Which of the ten scenarios this policy is.
    public var scenario: AFScenario { AFScenario(self) }

    /// The policy in Objective-C terms, e.g. `AFSSLPinningModeCertificate, allowInvalidCertificates = NO,
    /// validatesDomainName = YES, 2 pinned certificates`.
    public var summary: String {
        let count = pinnedCertificates.count
        return
            "\(mode.afName), allowInvalidCertificates = \(allowInvalidCertificates ? "YES" : "NO"), validatesDomainName = \(validatesDomainName ? "YES" : "NO"), \(count) pinned certificate\(count == 1 ? "" : "s")"
    }
}
