import ATSPolicy
import ATSTLS

/// The shared collaborators of every session: policy, settings, and the two TLS factories.
/// Immutable and thread-safe; one instance per running proxy.
public final class ProxyServices: Sendable {
    public let policy: PolicyStore
    public let settings: ProxySettings
    /// Client-facing TLS (minted leaves per SNI name).
    public let serverTLS: ServerTLSContext
    /// TLS to the proxy itself (a client that starts TLS on the proxy's port): the same leaves, HTTP/1.1 only in
    /// ALPN (the proxy protocol inside is HTTP/1.1). Nil when the context could not be made; such clients then get
    /// the HTTP parser's 400, as before. The run passes one that writes `--keylog` too.
    public let proxyTLS: ServerTLSContext?
    /// Upstream TLS built from each decision's requirements.
    public let upstreamTLS: UpstreamTLSClient
    /// Process id shown in console lines (passed in: the core makes no system calls).
    public let processID: Int
    /// The CA onboarding pages (nil: requests to the proxy itself get a short status text).
    public let onboarding: OnboardingSite?
    /// `--challenge` and `--af-policy` (nil: neither given).
    public let appTrust: (any AppTrustProvider)?

    public init(
        policy: PolicyStore, settings: ProxySettings, serverTLS: ServerTLSContext, upstreamTLS: UpstreamTLSClient,
        processID: Int, onboarding: OnboardingSite? = nil, appTrust: (any AppTrustProvider)? = nil,
        proxyTLS: ServerTLSContext? = nil
    ) {
        self.onboarding = onboarding
        self.appTrust = appTrust
        self.policy = policy
        self.settings = settings
        self.serverTLS = serverTLS
        self.proxyTLS =
            proxyTLS
            ?? (try? ServerTLSContext(leaves: serverTLS.leaves, alpn: ServerTLSContext.preferring(["http/1.1"])))
        self.upstreamTLS = upstreamTLS
        self.processID = processID
    }
}
