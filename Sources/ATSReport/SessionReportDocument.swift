import ATSPolicy
import ATSProxyCore
import ATSTLS
import Foundation

/// The `report.json` document: everything a session report says, as Codable values. The JSON
/// Schema in `SessionReportSchema.json` describes exactly this shape (tests validate against it).
public struct SessionReportDocument: Sendable, Codable, Equatable {
    /// Bumped when a field changes meaning or disappears.
    public static let currentSchemaVersion = 1

    public var schemaVersion: Int
    public var generator: String
    /// ISO 8601, UTC.
    public var generatedAt: String
    /// Where the loaded configuration came from (e.g. `App/Info.plist (Info.plist, XML)`).
    public var source: String
    /// The emulated platform, e.g. `iOS 18.0`.
    public var platform: String
    public var options: OptionsSummary
    public var configuration: ConfigurationSummary
    public var totals: Totals
    /// Hosts, worst first, as ATS judged the app's requests (challenged connections are not among them).
    public var hosts: [HostReport]
    /// The app's own trust decisions (`--challenge`, `--af-policy`), per host.
    public var appTrust: AppTrustSection
    public var minimalDictionary: MinimalDictionary
    public var comparison: Comparison
}

/// The emulation switches that decided the verdicts.
public struct OptionsSummary: Sendable, Codable, Equatable {
    public var subdomainDepth: String
    public var builtInAppleExceptions: Bool
    public var explicitLocalNetworkingNoIsStrict: Bool
    public var tls12FloorOn26: Bool
    public var localNetworks: [String]
    public var trustOverrideHosts: [String]
}

/// The loaded `NSAppTransportSecurity` dictionary, key by key.
public struct ConfigurationSummary: Sendable, Codable, Equatable {
    /// `absent`, `YES` or `NO` for each global Boolean key.
    public var allowsArbitraryLoads: String
    public var allowsArbitraryLoadsForMedia: String
    public var allowsArbitraryLoadsInWebContent: String
    public var allowsLocalNetworking: String
    public var exceptionDomains: [ExceptionSummary]
    public var pinnedDomains: [String]
}

/// One loaded `NSExceptionDomains` entry.
public struct ExceptionSummary: Sendable, Codable, Equatable {
    public var key: String
    public var includesSubdomains: Bool
    public var allowsInsecureHTTPLoads: Bool
    /// Only when the entry sets a valid value.
    public var minimumTLSVersion: String?
    public var requiresForwardSecrecy: Bool
}

/// Request counts over the whole session. Every figure up to `clientUntrustedCA` counts the app's requests as ATS
/// judged them; a connection `--challenge` showed a forged server is in none of them, only in
/// `challengePasses`/`challengeFindings`.
public struct Totals: Sendable, Codable, Equatable {
    public var requests: Int
    public var allowed: Int
    public var blocked: Int
    public var failed: Int
    public var reported: Int
    public var hosts: Int
    /// Requests that broke ATS (blocked, reported, or failed on an ATS rule).
    public var violations: Int
    /// Connections and plain requests to hosts left alone by `--ignore-hosts`/`--allow-hosts`:
    /// counted, never judged, and in no other figure.
    public var ignoredConnections: Int = 0
    /// Distinct hosts among them.
    public var ignoredHosts: Int = 0
    /// TLS handshakes the client refused because it does not trust the proxy CA (a set-up failure, not ATS).
    public var clientUntrustedCA: Int
    /// `--challenge`: challenged connections whose client refused the forged server (passes) and those whose
    /// client sent a request through it (findings).
    public var challengePasses: Int
    public var challengeFindings: Int
    /// `--af-policy`: hosts whose pinning policy refuses the real server's chain at least once, and hosts whose
    /// policy refuses the proxy's chain (interception breaks the app there).
    public var pinningRealChainRefused: Int
    public var pinningInterceptionRefused: Int
    /// The app's requests by outcome word (`LoadOutcome`: `allowed`, `network error`, …; a challenged connection
    /// is in `challengePasses`/`challengeFindings` only), and `ignored` for the connections the host filter left
    /// alone. Words never seen are absent.
    public var outcomes: [String: Int]
}

/// How bad a host's traffic was; hosts are sorted by this, worst first.
public enum HostStatus: String, Sendable, Codable, Comparable, CaseIterable {
    /// At least one request broke ATS.
    case violation
    /// No ATS violation, but the client refused the proxy's certificate: the proxy CA is not trusted by the
    /// client, so what the app would have done is unknown (a set-up failure).
    case clientUntrustedCA = "client-untrusted-ca"
    /// No ATS violation, but a certificate-trust failure outside ATS (default trust).
    case trustFailure = "trust-failure"
    /// Only connection failures (DNS, refused, timeout): not ATS's doing.
    case transportFailure = "transport-failure"
    /// Every request was allowed.
    case ok

    /// 4 for the worst, 0 for `ok`.
    public var rank: Int {
        switch self {
        case .violation: 4
        case .clientUntrustedCA: 3
        case .trustFailure: 2
        case .transportFailure: 1
        case .ok: 0
        }
    }

    public static func < (lhs: HostStatus, rhs: HostStatus) -> Bool { lhs.rank < rhs.rank }
}

/// Everything the session saw for one host.
public struct HostReport: Sendable, Codable, Equatable {
    public var host: String
    public var status: HostStatus
    public var requests: Int
    public var allowed: Int
    public var blocked: Int
    public var failed: Int
    public var reported: Int
    /// Requests that broke ATS.
    public var violations: Int
    /// The host's requests by outcome word (`LoadOutcome`); words never seen are absent.
    public var outcomes: [String: Int]
    /// Bytes the clients sent and received through the proxy for this host.
    public var bytesFromClient: Int
    public var bytesToClient: Int
    /// Total time of the host's requests.
    public var durationMilliseconds: Double
    /// `http`, `https`, in that order, as seen.
    public var schemes: [String]
    /// `urlsession`, `webkit`, `media`, as seen.
    public var sources: [String]
    /// How the host's loads reached the proxy (`ProxyRoute` raw values: `absolute-form`, `CONNECT+TLS`,
    /// `CONNECT+HTTP`, …), as first seen.
    public var routes: [String] = []
    /// Distinct outcomes with their codes, worst first.
    public var verdicts: [VerdictSummary]
    /// Distinct negotiated TLS parameter sets.
    public var tls: [TLSObservation]
    /// The rule that failed first (worst verdict), if any.
    public var failedRule: String?
    /// Its fix, if one was recorded.
    public var fix: String?
    /// What this host needs relative to the empty dictionary.
    public var needs: HostNeeds
    /// `--system-services-hosts`: the iOS/macOS 27 system-services verdict (the first failing one seen, else the
    /// first passing one), apart from the app's verdicts above; nil for other hosts.
    public var systemServices: SystemServicesVerdict? = nil
    /// The host's responses offered HTTP/3 (`Alt-Svc: h3…`); nil when none did.
    public var http3: HostHTTP3?
}

/// A host whose responses offered HTTP/3: how many did, the latest offer, and what it means for the app.
public struct HostHTTP3: Sendable, Codable, Equatable {
    /// Responses that carried the offer.
    public var responses: Int
    /// The HTTP/3 alternatives of the latest offer.
    public var alternatives: [HTTP3Advertisement.Alternative]
    /// `HTTP3Advertisement.note`: through the proxy the app stays on TCP; without it, QUIC is possible.
    public var note: String
}

/// One distinct outcome for a host.
public struct VerdictSummary: Sendable, Codable, Equatable {
    /// `completed`, `blocked-cleartext`, `failed`, `refused`, `reported`, `client-untrusted-ca`: the record's class.
    public var result: String
    /// The outcome word every output uses for these loads (`LoadOutcome`).
    public var outcome: LoadOutcome
    /// `-1022`, `-1200 [3:-9836]`; nil for completed loads.
    public var code: String?
    /// `violation`, `client-untrusted-ca`, `trust-failure`, `transport-failure` or `ok`.
    public var kind: HostStatus
    public var count: Int
    public var rule: String
    public var fix: String?
    public var exampleURL: String
    /// The route the example load took (`ProxyRoute` raw value), when its record names one.
    public var exampleRoute: String?
}

/// One distinct set of negotiated TLS facts.
public struct TLSObservation: Sendable, Codable, Equatable {
    public var version: String?
    public var cipher: String?
    public var keyExchange: String?
    /// The negotiated key-exchange group by its registry name (`x25519`, `X25519MLKEM768`), nil for static RSA.
    public var group: String? = nil
    public var leaf: String?
    public var leafKey: String?
    public var leafSignature: String?
    public var chainLength: String?
    public var alpn: String?
    public var count: Int
}

/// The relaxations one host needs so that every observed load passes, starting from the empty
/// dictionary.
public struct HostNeeds: Sendable, Codable, Equatable, Hashable {
    /// Cleartext `http://` loads were made.
    public var cleartext: Bool
    /// The lowest `NSExceptionMinimumTLSVersion` needed (only below TLS 1.2).
    public var minimumTLSVersion: String?
    /// Static-RSA key exchange was seen or is needed.
    public var forwardSecrecyWaiver: Bool
    /// Assumptions made when the record did not say enough (e.g. the server's version).
    public var assumptions: [String]
    /// Problems no Info.plist key can fix.
    public var unfixable: [String]
}

/// The smallest `NSAppTransportSecurity` dictionary that lets the observed traffic through.
public struct MinimalDictionary: Sendable, Codable, Equatable {
    /// Ready to paste into an Info.plist (`<key>NSAppTransportSecurity</key><dict>…</dict>`),
    /// with App Review notes as XML comments.
    public var plist: String
    public var allowsLocalNetworking: Bool
    public var entries: [MinimalEntry]
    /// Loads no Info.plist change can allow.
    public var unfixable: [UnfixableLoad]
    /// How hosts were merged under a parent with NSIncludesSubdomains.
    public var mergeRule: String
    /// True when the dictionary, parsed back and evaluated, allows every observed load.
    public var roundTripVerified: Bool
    public var notes: [String]
}

/// One `NSExceptionDomains` entry of the minimal dictionary.
public struct MinimalEntry: Sendable, Codable, Equatable {
    public var key: String
    public var includesSubdomains: Bool
    public var allowsInsecureHTTPLoads: Bool
    public var minimumTLSVersion: String?
    /// False when forward secrecy must be waived; nil when the default (YES) applies.
    public var requiresForwardSecrecy: Bool?
    /// The observed hosts this entry covers.
    public var coveredHosts: [String]
    /// Why App Review will ask about each key of the entry (reference §6).
    public var justifications: [String]
}

/// A load no Info.plist key can allow.
public struct UnfixableLoad: Sendable, Codable, Equatable {
    public var host: String
    public var url: String
    public var code: String?
    public var reason: String
    public var fix: String?
}

/// The loaded configuration compared with what the traffic needed.
public struct Comparison: Sendable, Codable, Equatable {
    /// Exception entries no observed load matched.
    public var unexercisedExceptions: [ComparisonFinding]
    /// Keys that relax more than the traffic needed.
    public var overBroad: [ComparisonFinding]
    /// Keys ATS ignores (presence rule and other linter findings).
    public var ignoredKeys: [ComparisonFinding]
}

/// One comparison finding.
public struct ComparisonFinding: Sendable, Codable, Equatable {
    public var code: String
    public var keyPath: String
    public var message: String
    public var fix: String?
}
