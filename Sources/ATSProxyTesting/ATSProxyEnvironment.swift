import Foundation

/// Where the proxy that `ats-proxy exec` started listens and where its CA certificate is, read from the
/// variables exec gives the command it runs: `ATS_PROXY_URL` (`http://127.0.0.1:PORT`) and
/// `ATS_PROXY_CA_CERT` (a PEM file). Nil outside `ats-proxy exec` (or when either is missing or malformed).
public struct ATSProxyEnvironment: Sendable, Equatable {
    /// `http://127.0.0.1:PORT`.
    public var proxyURL: URL
    /// The proxy's host (`127.0.0.1`) and port, as a proxy dictionary wants them.
    public var host: String
    public var port: Int
    /// Path of the proxy's CA certificate (PEM).
    public var caCertificatePath: String

    /// A proxy at `host:port` (an IPv6 address without brackets) whose CA certificate is the PEM file at
    /// `caCertificatePath`: for routing one session without `ats-proxy exec` (`ATSProxyTesting.configuration(through:)`).
    /// Nil when the port is outside 1...65535.
    public init?(host: String, port: Int, caCertificatePath: String) {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard (1...65535).contains(port), !bare.isEmpty,
            let url = URL(string: "http://\(bare.contains(":") ? "[\(bare)]" : bare):\(port)")
        else { return nil }
        proxyURL = url
        self.host = bare
        self.port = port
        self.caCertificatePath = caCertificatePath
    }

    /// Reads `ATS_PROXY_URL` and `ATS_PROXY_CA_CERT` from `environment`.
    public init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let text = environment["ATS_PROXY_URL"], let url = URL(string: text), let host = url.host,
            let port = url.port, let ca = environment["ATS_PROXY_CA_CERT"], !ca.isEmpty
        else { return nil }
        proxyURL = url
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        self.port = port
        caCertificatePath = ca
    }

    /// The DER bytes of the CA certificate (the first PEM block of the file); nil when it cannot be read.
    public func caCertificateDER() -> Data? {
        guard let text = try? String(contentsOfFile: caCertificatePath, encoding: .utf8) else { return nil }
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        guard let start = text.range(of: begin), let stop = text.range(of: end, range: start.upperBound..<text.endIndex)
        else { return nil }
        let base64 = text[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
        return Data(base64Encoded: String(base64))
    }

    /// The proxy dictionary CFNetwork reads (`connectionProxyDictionary`): HTTP and HTTPS through the proxy.
    /// The string keys are the values of `kCFNetworkProxiesHTTP*`, which iOS does not export by name.
    public var connectionProxyDictionary: [AnyHashable: Any] {
        [
            "HTTPEnable": 1, "HTTPProxy": host, "HTTPPort": port,
            "HTTPSEnable": 1, "HTTPSProxy": host, "HTTPSPort": port,
        ]
    }
}
