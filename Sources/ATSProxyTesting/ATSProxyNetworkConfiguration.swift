#if canImport(Network)
    import Foundation
    import Network
    import Security

    /// Network.framework's `ProxyConfiguration` for an `ATSProxyRoute` (iOS 17+, macOS 14+): what
    /// `URLSessionConfiguration.proxyConfigurations` and `WKWebsiteDataStore.proxyConfigurations` take.
    ///
    /// Apple platforms only. Written against Apple's documented API; not compiled or run on Linux, where this
    /// package is tested.
    @available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
    public enum ATSProxyNetworkConfiguration {
        /// The proxy configuration for `route` to `proxy`. For `tlsToProxy` the TLS options trust the proxy's CA
        /// (`proxy.caCertificatePath`) on top of the system anchors. Throws `ATSProxyTesting.Unavailable` for a port
        /// out of range.
        public static func make(_ route: ATSProxyRoute, proxy: ATSProxyEnvironment) throws -> ProxyConfiguration {
            guard let port = NWEndpoint.Port(rawValue: UInt16(clamping: proxy.port)), proxy.port > 0,
                proxy.port <= 65535
            else {
                throw ATSProxyTesting.Unavailable(description: "proxy port \(proxy.port) is out of range")
            }
            let endpoint = NWEndpoint.hostPort(host: NWEndpoint.Host(proxy.host), port: port)
            switch route {
            case .httpConnect:
                return ProxyConfiguration(httpCONNECTProxy: endpoint, tlsOptions: nil)
            case .tlsToProxy:
                return ProxyConfiguration(httpCONNECTProxy: endpoint, tlsOptions: tlsOptions(trusting: proxy))
            case .socks5:
                return ProxyConfiguration(socksv5Proxy: endpoint)
            }
        }

        /// TLS options for the hop to the proxy that accept a certificate chaining to the proxy CA (or to a
        /// system anchor), with the usual host-name check.
        static func tlsOptions(trusting proxy: ATSProxyEnvironment) -> NWProtocolTLS.Options {
            let options = NWProtocolTLS.Options()
            let anchor = proxy.caCertificateDER().flatMap { SecCertificateCreateWithData(nil, $0 as CFData) }
            sec_protocol_options_set_verify_block(
                options.securityProtocolOptions,
                { _, trust, complete in
                    let secTrust = sec_trust_copy_ref(trust).takeRetainedValue()
                    if let anchor {
                        SecTrustSetAnchorCertificates(secTrust, [anchor] as CFArray)
                        SecTrustSetAnchorCertificatesOnly(secTrust, false)
                    }
                    var error: CFError?
                    complete(SecTrustEvaluateWithError(secTrust, &error))
                }, DispatchQueue.global())
            return options
        }
    }
#endif
