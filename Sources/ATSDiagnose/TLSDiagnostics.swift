import ATSPolicy
import ATSTLS
import Foundation

/// `ats-proxy diagnose --tls-diagnostics URL`: the equivalent of `nscurl --tls-diagnostics` on macOS 26 (Apple
/// support article 122756): one handshake as the emulated platform's default ATS makes it, then the negotiated
/// version with its code point, the key-exchange group by name and the cipher suite with its code point.
/// ats-proxy adds which groups it offered and whether the answer is post-quantum (informational only).
public struct TLSDiagnostics: Sendable {
    public let checker: UpstreamChecker
    public let options: EvaluationOptions

    public init(checker: UpstreamChecker, options: EvaluationOptions) {
        self.checker = checker
        self.options = options
    }

    /// Runs the handshake for `target` over `transport`; `passed` is false when none completed.
    public func run(_ target: RequestTarget, transport: any HandshakeTransport) -> (text: String, passed: Bool) {
        let requirements = PolicyContext(configuration: ATSConfiguration(), options: options).decide(target)
            .requirements
        let verdict = checker.attempt(
            requirements: requirements, host: target.host, url: target.url, transport: transport)
        var lines = ["Starting TLS Diagnostics for \(target.url) (as \(options.platform) connects)", ""]
        guard let summary = verdict.summary else {
            let pair = verdict.streamPair.map { " \($0)" } ?? ""
            lines.append("Result : FAIL \(verdict.error?.rawValue ?? 0)\(pair): \(verdict.rule)")
            lines.append("(no handshake completed; 'ats-proxy diagnose \(target.url)' tries the other ATS settings)")
            return (lines.joined(separator: "\n") + "\n", false)
        }
        lines += Self.negotiatedLines(summary)
        lines.append("")
        lines.append(Self.offeredLine(checker.client.groupOffer))
        lines.append(Self.postQuantumLine(summary))
        if verdict.isBlocked {
            lines.append("ATS (default dictionary): FAIL: \(verdict.rule)")
        }
        return (lines.joined(separator: "\n") + "\n", true)
    }

    /// nscurl's three lines: version and suite as code points, the group by name.
    public static func negotiatedLines(_ summary: HandshakeSummary) -> [String] {
        let group = summary.group.map { KeyExchangeGroup(name: $0)?.rawValue ?? $0 } ?? "none (static RSA key exchange)"
        return [
            "Negotiated TLS version (codepoint): \(KeyExchangeGroup.hex(summary.version.wireValue))",
            "Negotiated TLS key exchange group (name): \(group)",
            "Negotiated TLS ciphersuite (codepoint): \(KeyExchangeGroup.hex(summary.cipher.code))",
        ]
    }

    /// The groups offered, in order, and any the linked OpenSSL lacks.
    static func offeredLine(_ offer: GroupOffer) -> String {
        var line = "Offered key exchange groups (ats-proxy): \(offer.offered.map(\.rawValue).joined(separator: ", "))"
        if !offer.unavailable.isEmpty {
            line +=
                "; not offered, missing from the linked \(OpenSSLLibrary.shortVersion): "
                + offer.unavailable.map(\.rawValue).joined(separator: ", ")
        }
        return line
    }

    /// Whether the negotiated group is post-quantum; never a failure.
    static func postQuantumLine(_ summary: HandshakeSummary) -> String {
        let group = summary.group.flatMap { KeyExchangeGroup(name: $0) }
        return group?.isPostQuantum == true
            ? "Post-quantum key exchange: yes"
            : "Post-quantum key exchange: no (informational; a device connects with a classical group, never an ATS failure)"
    }
}

/// `ats-proxy diagnose --profile system-services URL`: one handshake as an iOS/macOS 27 system process makes
/// it, judged by `SystemServicesProfile`.
public struct SystemServicesDiagnostics: Sendable {
    public let checker: UpstreamChecker
    public let profile: SystemServicesProfile

    public init(checker: UpstreamChecker, profile: SystemServicesProfile) {
        self.checker = checker
        self.profile = profile
    }

    /// The report for `target`; `passed` when the server meets the profile.
    public func run(_ target: RequestTarget, transport: any HandshakeTransport) -> (text: String, passed: Bool) {
        let verdict = checker.attempt(
            requirements: profile.requirements, host: target.host, url: target.url, transport: transport)
        let judged =
            verdict.summary.map { profile.judge($0) } ?? profile.noHandshake(verdict.rule)
        var lines = [
            "System-services profile (\(profile.platform): MDM, Automated Device Enrollment, profile and app installation, software update) for \(target.url):"
        ]
        if let summary = verdict.summary {
            lines += TLSDiagnostics.negotiatedLines(summary)
            if summary.version == .tls12 {
                let ems = summary.extendedMasterSecret == true ? "yes" : "no"
                lines.append("Extended master secret (RFC 7627): \(ems)")
            }
        }
        switch judged.outcome {
        case .pass: lines.append("Result : PASS (\(judged.line))")
        case .fail: lines.append("Result : FAIL: \(judged.line)")
        }
        lines.append(
            "(apart from the app's ATS verdict: an app's Info.plist exceptions do not apply to system processes)")
        return (lines.joined(separator: "\n") + "\n", judged.outcome == .pass)
    }
}
