import ATSPolicy
import Foundation

/// What Apple's iOS/macOS 27 system processes require of the servers they reach for device management,
/// Automated Device Enrollment, profile and app installation (enterprise distribution included) and
/// software update (Apple support article 126655): TLS 1.2 or later without exceptions, an ATS cipher
/// suite, a certificate that meets the ATS rules, and, as a documented default, the extended master
/// secret extension (RFC 7627) on TLS 1.2 (`emsOnTLS12`; the article's own text does not name it, the
/// requirement is reported from the developer documentation it links to, see docs/ATS-BEHAVIOUR.md).
///
/// Judged apart from the app's ATS verdict: the profile never changes what the app is allowed to load.
/// Pure; no I/O.
public struct SystemServicesProfile: Sendable {
    /// Whether TLS 1.2 handshakes must use the extended master secret (`--system-services-ems`).
    public enum EMSRule: String, Sendable, CaseIterable {
        /// Required on TLS 1.2 (the default).
        case required
        /// Not checked.
        case off
    }

    /// The emulated system the profile is judged for: the emulated platform when it already has the
    /// system-services rules, else the same family's first release that has them (27.0).
    public let platform: Platform
    /// The platform options the ATS requirements come from (the default ATS dictionary, TLS floor on).
    public let options: EvaluationOptions
    public let emsOnTLS12: EMSRule

    public init(options: EvaluationOptions, ems: EMSRule = .required) {
        let emulated = options.platform
        let threshold = PlatformFeature.systemServicesRequireATS.threshold(for: emulated.family)
        platform =
            emulated.has(.systemServicesRequireATS)
            ? emulated : Platform(family: emulated.family, version: threshold, sdk: threshold)
        var profileOptions = options
        profileOptions.platform = platform
        profileOptions.tls12FloorOn26 = true
        profileOptions.trustOverrideHosts = []
        self.options = profileOptions
        emsOnTLS12 = ems
    }

    /// The requirements of a system process: the default ATS dictionary's for a public host name, which no
    /// Info.plist exception relaxes and no local-network exemption lifts (those are app-ATS rules).
    public var requirements: TLSRequirements {
        ATSEvaluator(configuration: .empty, options: options)
            .evaluate(RequestTarget(scheme: .https, host: "system-services.example")).requirements
    }

    /// The verdict for a completed handshake (the certificate was verified for the summary's host).
    public func judge(_ summary: HandshakeSummary) -> SystemServicesVerdict {
        let requirements = requirements
        var reasons = UpstreamJudge(requirements: requirements).violations(of: summary).map {
            UpstreamVerdict.sentence($0, requirements: requirements, summary: summary)
        }
        if emsOnTLS12 == .required, summary.version == .tls12, summary.extendedMasterSecret == false {
            reasons.append(
                "the server did not use the extended master secret extension (RFC 7627) at TLS 1.2 "
                    + "(switch: --system-services-ems off)")
        }
        return SystemServicesVerdict(platform: platform, reasons: reasons)
    }

    /// `explain --profile system-services`: what a system process requires of `target`, without connecting.
    /// Blocked for `http://` (system processes load nothing in cleartext); for `https://` the requirements.
    public func explain(_ target: RequestTarget) -> (text: String, blocked: Bool) {
        var lines = [target.url]
        lines.append(
            "  Profile       system services of \(platform) (MDM, DDM, Automated Device Enrollment, profile and app "
                + "installation, software update; Apple support article 126655)")
        guard target.scheme == .https else {
            lines.append("  Verdict       BLOCKED  system processes require HTTPS; no Info.plist key changes that")
            return (lines.joined(separator: "\n"), true)
        }
        lines.append(
            "  Verdict       requirements only (explain does not connect: 'ats-proxy diagnose --profile system-services \(target.url)' checks the server)"
        )
        lines.append(
            "  Requirements  (the default ATS dictionary's; an app's exceptions do not apply to system processes)")
        lines += DecisionRenderer.requirementLines(requirements).map { "    " + $0 }
        switch emsOnTLS12 {
        case .required:
            lines.append(
                "    Extended MS    required on TLS 1.2 (RFC 7627; documented default, switch --system-services-ems off)"
            )
        case .off:
            lines.append("    Extended MS    not checked (--system-services-ems off)")
        }
        return (lines.joined(separator: "\n"), false)
    }

    /// The verdict when no handshake completed under the app's policy: `reason` says why.
    public func noHandshake(_ reason: String) -> SystemServicesVerdict {
        SystemServicesVerdict(platform: platform, reasons: ["no TLS handshake completed: \(reason)"])
    }
}

/// The system-services profile's answer for one server, reported next to (never instead of) the app's
/// ATS verdict.
public struct SystemServicesVerdict: Sendable, Hashable, Codable {
    /// `pass` or `fail`.
    public enum Outcome: String, Sendable, Hashable, Codable {
        case pass, fail
    }

    public let outcome: Outcome
    /// The system judged for, e.g. "iOS 27.0".
    public let platform: String
    /// One sentence per unmet requirement (empty when it passes).
    public let reasons: [String]

    public init(platform: Platform, reasons: [String]) {
        outcome = reasons.isEmpty ? .pass : .fail
        self.platform = platform.description
        self.reasons = reasons
    }

    /// "would fail for device enrolment on iOS 27.0: …" or "meets the iOS 27.0 system-services requirements".
    public var line: String {
        switch outcome {
        case .pass:
            "meets the \(platform) system-services requirements (device management, enrolment, app and profile installation, software update)"
        case .fail:
            "would fail for device enrolment and the other system services on \(platform): "
                + reasons.joined(separator: "; ")
        }
    }
}
