import ATSDiagnose
import ATSPolicy
import ATSTLS
import Foundation

/// Policy builders for the tests: the default (empty) dictionary, NSAllowsArbitraryLoads, and
/// single exception entries for the test host.
public enum Policies {
    public static func make(
        _ configure: (inout ATSConfiguration) -> Void = { _ in }, platform: String = "ios:18.0",
        options configureOptions: (inout EvaluationOptions) -> Void = { _ in }
    ) -> PolicyContext {
        var configuration = ATSConfiguration()
        configure(&configuration)
        var options = EvaluationOptions(platform: Platform(parsing: platform)!)
        configureOptions(&options)
        return PolicyContext(configuration: configuration, options: options)
    }

    public static let standard = make()
    public static let arbitraryLoads = make { $0.allowsArbitraryLoads = .value(true) }

    public static func exception(
        minimumTLS: TLSProtocolVersion? = nil, forwardSecrecy: Bool = true, insecureHTTP: Bool = false,
        trustOverride: Bool = false, platform: String = "ios:18.0"
    ) -> PolicyContext {
        make(
            { configuration in
                var entry = ExceptionDomain(key: TestPKI.host)
                if let minimumTLS {
                    entry.minimumTLSVersion = minimumTLS
                    entry.minimumTLSVersionSpecified = true
                }
                entry.requiresForwardSecrecy = forwardSecrecy
                entry.allowsInsecureHTTPLoads = insecureHTTP
                configuration.exceptionDomains[TestPKI.host] = entry
            }, platform: platform,
            options: { options in if trustOverride { options.trustOverrideHosts = [TestPKI.host] } })
    }

    public static func pinned(leaf: [Data]? = nil, ca: [Data]? = nil) -> PolicyContext {
        make { configuration in
            var entry = PinnedDomain(key: TestPKI.host)
            if let leaf { entry.leafIdentities = PinList(digests: leaf) }
            if let ca { entry.caIdentities = PinList(digests: ca) }
            configuration.pinnedDomains[TestPKI.host] = entry
        }
    }
}

/// Runs the full check of the test host against `server` under `policy`.
public func check(
    _ server: TestServer, _ policy: PolicyContext, ctLogs: CTLogStore? = nil
) -> UpstreamVerdict {
    let checker = UpstreamChecker(client: TestPKI.client(ctLogs: ctLogs))
    let target = RequestTarget(scheme: .https, host: TestPKI.host, port: Int(server.port))
    return checker.check(target, policy: policy, transport: server.transport)
}

/// What a test expects of a verdict.
public enum Expectation: Sendable, Equatable, CustomStringConvertible {
    case allowed
    case overridden
    case blocked(NSURLErrorCode, Int)

    public var description: String {
        switch self {
        case .allowed: "allowed"
        case .overridden: "allowed by trust override"
        case .blocked(let code, let stream): "\(code.rawValue) [3:\(stream)]"
        }
    }

    public static func of(_ verdict: UpstreamVerdict) -> Expectation {
        switch verdict.outcome {
        case .allowed: return .allowed
        case .allowedByTrustOverride: return .overridden
        case .blocked: return .blocked(verdict.error ?? .secureConnectionFailed, verdict.streamCode ?? 0)
        }
    }
}
