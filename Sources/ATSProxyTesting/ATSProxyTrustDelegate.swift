#if canImport(Security)
    import Foundation
    import Security

    /// A session delegate that trusts the proxy's CA for server-trust challenges, on Apple platforms: the
    /// presented chain is evaluated with the proxy CA added to the system anchors (tunnelled hosts keep
    /// their real certificates), the host name checked as usual. Any other challenge gets the default
    /// handling.
    public final class ATSProxyTrustDelegate: NSObject, URLSessionDelegate, @unchecked Sendable {
        /// The proxy CA; nil when the file could not be read (then challenges get the default handling).
        private let anchor: SecCertificate?

        public init(environment: ATSProxyEnvironment) {
            anchor = environment.caCertificateDER().flatMap { SecCertificateCreateWithData(nil, $0 as CFData) }
        }

        public func urlSession(
            _ session: URLSession, didReceive challenge: URLAuthenticationChallenge
        ) async -> (URLSession.AuthChallengeDisposition, URLCredential?) {
            guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
                let trust = challenge.protectionSpace.serverTrust, let anchor
            else { return (.performDefaultHandling, nil) }
            SecTrustSetAnchorCertificates(trust, [anchor] as CFArray)
            SecTrustSetAnchorCertificatesOnly(trust, false)
            var error: CFError?
            guard SecTrustEvaluateWithError(trust, &error) else { return (.cancelAuthenticationChallenge, nil) }
            return (.useCredential, URLCredential(trust: trust))
        }
    }
#endif
