/// AFNetworking's `AFSSLPinningMode`: what `AFSecurityPolicy` compares beyond the trust evaluation.
public enum AFPinningMode: String, Sendable, Hashable, CaseIterable {
    /// `AFSSLPinningModeNone`: only the Security framework's trust evaluation decides.
    case none
    /// `AFSSLPinningModePublicKey`: a public key of the server's chain must equal a pinned certificate's key.
    case publicKey = "public-key"
    /// `AFSSLPinningModeCertificate`: the chain must evaluate with the pinned certificates as its only anchors
    /// and contain one of them byte for byte.
    case certificate

    /// AFNetworking's name of the mode.
    public var afName: String {
        switch self {
        case .none: "AFSSLPinningModeNone"
        case .publicKey: "AFSSLPinningModePublicKey"
        case .certificate: "AFSSLPinningModeCertificate"
        }
    }
}
