import Foundation

/// One decision as `explain` reports it, with the console lines a device would print.
public struct ExplainedDecision: Sendable, Codable {
    public let decision: ATSDecision
    /// CFNetwork console lines (only for blocked cleartext loads; HTTPS needs a handshake).
    public let consoleLines: [String]
}

/// The whole `explain --format json` document.
public struct ExplainReport: Sendable, Codable {
    public let source: String
    public let platform: Platform
    public let configurationMessages: [ConfigMessage]
    public let decisions: [ExplainedDecision]

    public init(
        source: String, platform: Platform, configurationMessages: [ConfigMessage], decisions: [ExplainedDecision]
    ) {
        self.source = source
        self.platform = platform
        self.configurationMessages = configurationMessages
        self.decisions = decisions
    }
}

/// Turns decisions into the text and JSON of `ats-proxy explain`. Pure: the console context
/// (clock, task ids) is passed in, so output is reproducible.
public enum DecisionRenderer {
    /// Builds the explained decision, with console lines for a blocked cleartext load.
    public static func explain(_ decision: ATSDecision, context: ConsoleContext) -> ExplainedDecision {
        var lines: [String] = []
        if decision.outcome == .cleartextBlocked {
            lines = CFNetworkConsole.cleartextBlocked(
                url: decision.target.url, host: decision.target.host, platform: decision.platform, context: context)
        }
        return ExplainedDecision(decision: decision, consoleLines: lines)
    }

    /// The human-readable block for one decision.
    public static func text(_ explained: ExplainedDecision) -> String {
        let decision = explained.decision
        var out: [String] = []
        out.append(decision.target.url)
        out.append("  Verdict       \(verdictText(decision))")
        out.append(
            "  Request       \(decision.target.host) port \(decision.target.port), \(decision.source.displayName), \(decision.platform.labelled)"
        )
        out.append("  Rule chain")
        for (index, step) in decision.ruleChain.enumerated() {
            out.append("    \(index + 1). \(step.text)")
            if let path = step.keyPath { out.append("       [\(path)]") }
        }
        if let fix = decision.fix { out.append("  Fix           \(fix)") }
        if !decision.justificationKeys.isEmpty {
            out.append(
                "  App Review    needs a justification for \(decision.justificationKeys.joined(separator: ", "))")
        }
        if decision.target.scheme == .https {
            out.append("  Requirements")
            out += requirementLines(decision.requirements).map { "    \($0)" }
        }
        if !explained.consoleLines.isEmpty {
            out.append("  Console (as the device logs it)")
            for line in explained.consoleLines {
                out += line.split(separator: "\n", omittingEmptySubsequences: false).map { "    \($0)" }
            }
        }
        return out.joined(separator: "\n")
    }

    /// One-line verdict.
    public static func verdictText(_ decision: ATSDecision) -> String {
        switch decision.outcome {
        case .cleartextAllowed:
            return "ALLOWED  cleartext HTTP is permitted for this host"
        case .cleartextBlocked:
            let code = NSURLErrorCode.appTransportSecurityRequiresSecureConnection
            return "BLOCKED  NSURLErrorDomain \(code.rawValue) (\(code.constantName)), never sent"
        case .https:
            if !decision.requirements.isSatisfiable { return "BLOCKED  no TLS version can satisfy the requirements" }
            if decision.requirements.atsGoverned {
                return "HTTPS governed by ATS: allowed if the server meets the requirements below"
            }
            return "HTTPS not governed by ATS: default server trust only"
        }
    }

    /// The requirement table lines (without indentation).
    public static func requirementLines(_ requirements: TLSRequirements) -> [String] {
        var lines: [String] = []
        func row(_ label: String, _ value: String) {
            lines.append(label.padding(toLength: 17, withPad: " ", startingAt: 0) + value)
        }
        row(
            "TLS versions",
            requirements.minimumVersion == requirements.maximumVersion
                ? requirements.minimumVersion.displayName
                : "\(requirements.minimumVersion.displayName) to \(requirements.maximumVersion.displayName)")
        row(
            "Forward secrecy",
            requirements.forwardSecrecyRequired
                ? "required (ECDHE or TLS 1.3)" : "not required (static-RSA key exchange allowed)")
        let listNote = requirements.cipherListUnrestricted ? ", unrestricted platform default" : ""
        row("Cipher suites", "\(requirements.cipherSuites.count) offered\(listNote):")
        for suite in requirements.cipherSuites {
            lines.append("                   \(suite.ianaName) (\(suite.hexCode))")
        }
        var keys: [String] = []
        keys.append(
            requirements.minimumRSAKeyBits > 0 ? "RSA ≥ \(requirements.minimumRSAKeyBits) bits" : "any RSA size")
        keys.append(requirements.minimumECKeyBits > 0 ? "EC ≥ \(requirements.minimumECKeyBits) bits" : "any EC size")
        row("Keys", keys.joined(separator: ", ") + ", on every certificate of the chain")
        let hash = requirements.minimumSignatureHash
        row(
            "Signatures",
            hash >= .sha256
                ? "SHA-256 or stronger (SHA-1 and SHA-224 rejected; self-signed roots exempt)"
                : "\(hash.rawValue) or stronger (weaker hashes rejected; self-signed roots exempt)")
        let trust = requirements.trust
        switch trust.kind {
        case .ats:
            row("Trust", "ATS: system trust must pass; the app cannot override it (failures: -1200 [3:-9802])")
        case .standard:
            let override =
                trust.appOverrides
                ? "the app overrides it (--trust-override)" : "the app may override it in its URLSession delegate"
            row("Trust", "default evaluation; \(override) (failures: -1202/-1201)")
        }
        var certificate: [String] = []
        if requirements.requireSubjectAltName { certificate.append("DNS name in SAN (CN ignored)") }
        if let date = requirements.requireServerAuthEKUIssuedAfter {
            certificate.append("EKU serverAuth if issued on or after \(day(date))")
        }
        for cap in requirements.validityCaps {
            certificate.append(
                "≤ \(cap.maximumDays) days for \(cap.anchors.rawValue) roots issued on or after \(day(cap.notBeforeOnOrAfter))"
            )
        }
        row("Certificates", certificate.isEmpty ? "platform defaults" : certificate.joined(separator: "; "))
        let ct = requirements.certificateTransparency
        if ct.allChains {
            row("Transparency", "required for every chain (NSRequiresCertificateTransparency)")
        } else if let date = ct.systemRootsIssuedOnOrAfter {
            row("Transparency", "required for chains to system roots, leaves issued on or after \(day(date))")
        } else {
            row("Transparency", "not required")
        }
        if let pins = requirements.pins {
            var parts: [String] = []
            if let leaf = pins.leafSPKISHA256 {
                parts.append("leaf ∈ {\(leaf.map { $0.base64EncodedString() }.joined(separator: ", "))}")
            }
            if let ca = pins.caSPKISHA256 {
                parts.append("a CA ∈ {\(ca.map { $0.base64EncodedString() }.joined(separator: ", "))}")
            }
            let closed = pins.failsClosed ? " (empty list: every connection fails)" : ""
            row("Pins", "from \(pins.domains.joined(separator: ", ")): \(parts.joined(separator: " and "))\(closed)")
        } else {
            row("Pins", "none")
        }
        if requirements.niap.isRestrictive {
            row("NIAP", "\(requirements.niap.rawValue): Extended Master Secret required, no rsa_pkcs1_sha1")
        }
        return lines
    }

    /// The JSON document for `explain --format json`.
    public static func json(_ report: ExplainReport) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(report), let text = String(data: data, encoding: .utf8) else {
            return "{}"
        }
        return text
    }

    private static func day(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}
