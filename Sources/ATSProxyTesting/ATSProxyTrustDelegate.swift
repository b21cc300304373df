#if canImport(Security)
    import Foundation
    import Security

    /// A session delegate that trusts the proxy's CA for server-trust challenges, on Apple platforms: the
    /// presented chain is evaluated with the proxy CA added to the system anchors (tunnelled hosts keep their
    /// real certificates), the host name checked as
    /// usual. Any other challenge gets the default handling.
    public final class ATSProxyTrustDelegate: NSObject, URLSessionDelegate, @unchecked Sendable {
        /// The proxy CA; nil when the file could not be read (then challenges get the default handling).
        private let anchor: SecCertificate?

        public init(environment: ATSProxyEnvironment) {
            anchor = environment.caCertificateDER().flatMap { SecCertificateCreateWithData(nil, $0 as CFData) }
        }

        public func urlSession(
            _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
                let trust = challenge.protectionSpace.serverTrust, let anchor
            else {
                completionHandler(.performDefaultHandling, nil)
                return
            }
            SecTrustSetAnchorCertificates(trust, [anchor] as CFArray)
            SecTrustSetAnchorCertificatesOnly(trust, false)
            var error: CFError?
            if SecTrustEvaluateWithError(trust, &error) {
                completionHandler(.useCredential, URLCredential(trust: trust))
            } else {
                completionHandler(.cancelAuthenticationChallenge, nil)
            }
        }
    }
#endif
