import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Entry points for a test suite run under `ats-proxy exec`: a `URLSessionConfiguration` (or a whole
/// `URLSession`) whose loads go through the proxy, trust its CA, and fail with the device's `URLError` where
/// ATS would fail them.
///
/// ```swift
/// let session = try ATSProxyTesting.session()
/// do {
///     _ = try await session.data(from: URL(string: "http://example.com/")!)
/// } catch let error as URLError {
///     XCTAssertEqual(error.code, .appTransportSecurityRequiresSecureConnection)
/// }
/// ```
///
/// How the proxy is reached: on Apple platforms `connectionProxyDictionary` (CFNetwork ignores
/// `HTTP(S)_PROXY`), and the CA is trusted by the transport session's delegate. On Linux,
/// FoundationNetworking's libcurl follows the `http_proxy`/`HTTPS_PROXY` variables exec sets and reads the
/// system CA bundle, which `ats-proxy exec` shows with the proxy CA added (a private mount namespace).
public enum ATSProxyTesting {
    /// Why no proxied configuration can be made.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The proxy of the surrounding `ats-proxy exec`, or nil when the tests run without it.
    public static var environment: ATSProxyEnvironment? { ATSProxyEnvironment() }

    /// `base` (default `.ephemeral`) changed to load through the proxy named by `environment`: the proxy
    /// dictionary, and `ATSProxyURLProtocol` first in `protocolClasses` so that `X-ATS-Error` answers become
    /// the device's `URLError`. Throws `Unavailable` outside `ats-proxy exec`.
    public static func configuration(
        _ base: URLSessionConfiguration = .ephemeral, environment: ATSProxyEnvironment? = ATSProxyEnvironment()
    ) throws -> URLSessionConfiguration {
        guard let environment else {
            throw Unavailable(
                description:
                    "ATS_PROXY_URL and ATS_PROXY_CA_CERT are not set: run the tests under 'ats-proxy exec -- swift test'"
            )
        }
        let transport = transportConfiguration(base.copy() as! URLSessionConfiguration, environment: environment)
        ATSProxyURLProtocol.install(transport: makeTransportSession(transport, environment: environment))
        let configuration = base.copy() as! URLSessionConfiguration
        configuration.connectionProxyDictionary = environment.connectionProxyDictionary
        configuration.protocolClasses = [ATSProxyURLProtocol.self] + (configuration.protocolClasses ?? [])
        return configuration
    }

    /// A session on `configuration(base)`.
    public static func session(
        _ base: URLSessionConfiguration = .ephemeral, environment: ATSProxyEnvironment? = ATSProxyEnvironment()
    ) throws -> URLSession {
        URLSession(configuration: try configuration(base, environment: environment))
    }

    /// The configuration the transport session uses: the proxy, and no custom protocols (which would loop).
    static func transportConfiguration(
        _ configuration: URLSessionConfiguration, environment: ATSProxyEnvironment
    ) -> URLSessionConfiguration {
        configuration.connectionProxyDictionary = environment.connectionProxyDictionary
        configuration.protocolClasses = (configuration.protocolClasses ?? []).filter { $0 != ATSProxyURLProtocol.self }
        return configuration
    }

    /// The transport session: with a delegate that trusts the proxy CA where the platform lets one decide.
    static func makeTransportSession(
        _ configuration: URLSessionConfiguration, environment: ATSProxyEnvironment
    ) -> URLSession {
        #if canImport(Security)
            return URLSession(
                configuration: configuration, delegate: ATSProxyTrustDelegate(environment: environment),
                delegateQueue: nil)
        #else
            return URLSession(configuration: configuration)
        #endif
    }
}
