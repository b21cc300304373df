/// The NSURLErrorDomain codes ats-proxy reports, with Apple's constant names and the
/// `NSLocalizedDescription` a device shows (reference §4.1).
public enum NSURLErrorCode: Int, Sendable, Codable, CaseIterable {
    /// The task was cancelled: the client went away before the response was complete.
    case cancelled = -999
    case timedOut = -1001
    /// A URL the loading system does not handle (a scheme other than http and https).
    case unsupportedURL = -1002
    case cannotFindHost = -1003
    case cannotConnectToHost = -1004
    case networkConnectionLost = -1005
    case badServerResponse = -1011
    case appTransportSecurityRequiresSecureConnection = -1022
    case secureConnectionFailed = -1200
    case serverCertificateHasBadDate = -1201
    case serverCertificateUntrusted = -1202
    case serverCertificateHasUnknownRoot = -1203
    case serverCertificateNotYetValid = -1204
    case clientCertificateRejected = -1205
    case clientCertificateRequired = -1206

    /// Apple's constant name, e.g. `NSURLErrorSecureConnectionFailed`.
    public var constantName: String {
        switch self {
        case .cancelled: "NSURLErrorCancelled"
        case .timedOut: "NSURLErrorTimedOut"
        case .unsupportedURL: "NSURLErrorUnsupportedURL"
        case .cannotFindHost: "NSURLErrorCannotFindHost"
        case .cannotConnectToHost: "NSURLErrorCannotConnectToHost"
        case .networkConnectionLost: "NSURLErrorNetworkConnectionLost"
        case .badServerResponse: "NSURLErrorBadServerResponse"
        case .appTransportSecurityRequiresSecureConnection: "NSURLErrorAppTransportSecurityRequiresSecureConnection"
        case .secureConnectionFailed: "NSURLErrorSecureConnectionFailed"
        case .serverCertificateHasBadDate: "NSURLErrorServerCertificateHasBadDate"
        case .serverCertificateUntrusted: "NSURLErrorServerCertificateUntrusted"
        case .serverCertificateHasUnknownRoot: "NSURLErrorServerCertificateHasUnknownRoot"
        case .serverCertificateNotYetValid: "NSURLErrorServerCertificateNotYetValid"
        case .clientCertificateRejected: "NSURLErrorClientCertificateRejected"
        case .clientCertificateRequired: "NSURLErrorClientCertificateRequired"
        }
    }

    /// The NSLocalizedDescription a device shows for this code on `platform`.
    public func localizedDescription(host: String, platform: Platform) -> String {
        let spoof =
            "You might be connecting to a server that is pretending to be “\(host)” which could put your confidential information at risk."
        switch self {
        case .cancelled: return "cancelled"
        case .timedOut: return "The request timed out."
        case .unsupportedURL: return "unsupported URL"
        case .cannotFindHost: return "A server with the specified hostname could not be found."
        case .cannotConnectToHost: return "Could not connect to the server."
        case .networkConnectionLost: return "The network connection was lost."
        case .badServerResponse: return "bad server response"
        case .appTransportSecurityRequiresSecureConnection:
            return
                "The resource could not be loaded because the App Transport Security policy requires the use of a secure connection."
        case .secureConnectionFailed:
            return platform.has(.modernSecureConnectionFailedText)
                ? "A TLS error caused the secure connection to fail."
                : "An SSL error has occurred and a secure connection to the server cannot be made."
        case .serverCertificateHasBadDate: return "The certificate for this server has expired. \(spoof)"
        case .serverCertificateUntrusted: return "The certificate for this server is invalid. \(spoof)"
        case .serverCertificateHasUnknownRoot:
            return "The certificate for this server was signed by an unknown certifying authority. \(spoof)"
        case .serverCertificateNotYetValid: return "The certificate for this server is not yet valid. \(spoof)"
        case .clientCertificateRejected: return "The server “\(host)” did not accept the certificate."
        case .clientCertificateRequired: return "The server “\(host)” requires a client certificate."
        }
    }
}
