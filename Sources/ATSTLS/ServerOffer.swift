import ATSPolicy
import Foundation

/// What the permissive explanation probe found the server offers.
public struct ServerOffer: Sendable, Hashable {
    /// Versions the server completed a handshake with (offered alone, every suite, level 0),
    /// and the IANA suite it chose for each.
    public var acceptedVersions: [TLSProtocolVersion: String] = [:]
    /// The suite the server chose when offered only ECDHE suites at its best TLS ≤ 1.2 version
    /// (nil: not probed, or it refused them all).
    public var ecdheChoice: String?
    /// Whether the ECDHE-only probe ran.
    public var ecdheProbed = false
    /// The finding in plain words.
    public var sentence: String = ""

    /// Nothing found yet (the probe fills it in).
    public init() {}

    /// The highest accepted version.
    public var highestVersion: TLSProtocolVersion? { acceptedVersions.keys.max() }
}

/// The Info.plist knowledge the fix finder needs: the app's configuration and the emulation options.
public struct PolicyContext: Sendable {
    public let configuration: ATSConfiguration
    public let options: EvaluationOptions

    public init(configuration: ATSConfiguration, options: EvaluationOptions) {
        self.configuration = configuration
        self.options = options
    }

    /// The decision for `target` under this policy.
    public func decide(_ target: RequestTarget) -> ATSDecision {
        ATSEvaluator(configuration: configuration, options: options).evaluate(target)
    }
}

/// `items` as an English list ("a", "a and b", "a, b and c"), as fixes and probe findings are written.
public func englishList(_ items: [String]) -> String {
    switch items.count {
    case 0: ""
    case 1: items[0]
    default: items.dropLast().joined(separator: ", ") + " and " + items.last!
    }
}
