import ATSPolicy
import Foundation
import Testing

/// Builders and helpers shared by the session-report tests: reading a pasted Info.plist fragment
/// back and asking the policy engine whether it allows a load. ATSReportTests extends this type
/// with its record and report builders.
public enum ReportFixtures {
    /// Parses the pasted fragment back the way Xcode would read it: wrapped in a plist root,
    /// through `PropertyListSerialization`, then `ATSConfigurationParser`.
    public static func parseFragment(_ fragment: String) throws -> ATSConfiguration {
        let document = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
            \(fragment)
            </dict>
            </plist>
            """
        let object = try PropertyListSerialization.propertyList(from: Data(document.utf8), format: nil)
        let root = try #require(PlistValue(foundation: object).dictionaryValue)
        let ats = try #require(root[ATSKey.root])
        return ATSConfigurationParser().parse(ats)
    }

    /// iOS 18.0, pinned: the report fixtures' servers speak TLS 1.0/1.1 under exceptions, which iOS/macOS 26 and
    /// later (the default platform) no longer honour.
    public static let pinnedOptions = EvaluationOptions(platform: Platform(parsing: "ios:18.0")!)

    /// Whether `url` is allowed under `configuration` given what the server offers: cleartext
    /// allowed, or the HTTPS minimum at most `serverVersion` and forward secrecy waived when
    /// `staticRSA`.
    public static func allows(
        _ configuration: ATSConfiguration, _ url: String, serverVersion: TLSProtocolVersion = .tls13,
        staticRSA: Bool = false, options: EvaluationOptions = ReportFixtures.pinnedOptions
    ) throws -> Bool {
        let target = try RequestTarget(parsing: url)
        let decision = ATSEvaluator(configuration: configuration, options: options).evaluate(target)
        switch decision.outcome {
        case .cleartextBlocked: return false
        case .cleartextAllowed: return true
        case .https:
            return decision.requirements.minimumVersion <= serverVersion
                && !(staticRSA && decision.requirements.forwardSecrecyRequired)
        }
    }
}
