/// Which component of the app issued a request: ATS keys for media and web content depend on it.
public enum RequestSource: String, Sendable, Codable, CaseIterable {
    /// URLSession / NSURLConnection (the default).
    case urlsession
    /// A web view (WKWebView): NSAllowsArbitraryLoadsInWebContent applies.
    case webkit
    /// AVFoundation media loading: NSAllowsArbitraryLoadsForMedia applies.
    case media

    /// Display name.
    public var displayName: String {
        switch self {
        case .urlsession: "URLSession"
        case .webkit: "WebKit"
        case .media: "AVFoundation"
        }
    }
}

/// How far NSIncludesSubdomains reaches for NSExceptionDomains (reference §2.4, uncertain).
public enum SubdomainDepth: String, Sendable, Codable, CaseIterable {
    /// Any number of labels, as Apple's code and the older documentation say (default).
    case any
    /// Exactly one extra label, as the current NSIncludesSubdomains page says.
    case one
}

/// Everything besides the Info.plist that decides an outcome: the emulated platform and one
/// switch for every point the reference marks uncertain. Defaults are the reference's
/// recommendations; each is documented in the README.
public struct EvaluationOptions: Sendable, Hashable {
    public var platform: Platform = .default
    public var subdomainDepth: SubdomainDepth = .any
    /// Address blocks treated as local ("direct"). Default: loopback, link-local, RFC 1918, ULA.
    public var localNetworks: [CIDRBlock] = EvaluationOptions.defaultLocalNetworks
    /// Apply Apple's built-in exceptions (apple.com, ls.apple.com, …). Default off: their effect
    /// on third-party apps is unproven, and a test tool should not pass what a device may block.
    public var builtInAppleExceptions: Bool = false
    /// An explicit NSAllowsLocalNetworking = NO removes the local exemption (current code).
    public var explicitLocalNetworkingNoIsStrict: Bool = true
    /// On iOS/macOS 26+, exceptions below TLS 1.2 are not honoured (reported, uncertain).
    public var tls12FloorOn26: Bool = true
    /// NSExceptionRequiresForwardSecrecy = NO also removes the ATS key-size extra (Apple's docs).
    public var forwardSecrecyWaiverSkipsKeySize: Bool = true
    /// Honour NSRequiresCertificateTransparency (forces CT for every chain). Default: only on
    /// OSes before platform-wide CT (iOS 12.1.1); later Apple documents it as obsolete.
    public var requiresCTKey: RequiresCTKeyMode = .beforePlatformCT
    /// Hosts whose URLSession delegate overrides trust (accepts any chain where ATS permits it).
    public var trustOverrideHosts: [String] = []

    /// What to do with NSRequiresCertificateTransparency.
    public enum RequiresCTKeyMode: String, Sendable, Codable, CaseIterable {
        /// Honour it only before platform-wide CT (default).
        case beforePlatformCT = "auto"
        /// Always honour it.
        case always
        /// Never honour it.
        case never
    }

    public init(platform: Platform = .default) { self.platform = platform }

    /// Loopback, link-local, RFC 1918 and unique-local blocks.
    public static let defaultLocalNetworks: [CIDRBlock] = [
        "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "::1/128", "fe80::/10",
        "fc00::/7",
    ].map { CIDRBlock(parsing: $0)! }

    /// Whether the app's delegate overrides trust for `host` (suffix match with a leading dot).
    public func appOverridesTrust(for host: String) -> Bool {
        trustOverrideHosts.contains { pattern in
            let lowered = pattern.lowercased()
            if lowered.hasPrefix(".") { return host.hasSuffix(lowered) || host == String(lowered.dropFirst()) }
            return host == lowered
        }
    }
}
