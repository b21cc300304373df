import ATSPolicy
import Foundation

/// Compares the loaded configuration with what the observed traffic needed: exception entries
/// never exercised, keys that relax more than needed, and keys ATS ignores.
struct ConfigComparer {
    let configuration: ATSConfiguration
    let options: EvaluationOptions
    let source: LoadedInfoPlist?
    let loads: [ObservedLoad]
    let minimal: [MinimalEntry]
    let minimalAllowsLocalNetworking: Bool

    private var exceptionsPath: KeyPath { KeyPath.ats.appending(ATSKey.exceptionDomains) }

    func compare() -> Comparison {
        let evaluator = ATSEvaluator(configuration: configuration, options: options)
        let decisions = loads.map { ($0, evaluator.evaluate($0.target, source: $0.source)) }
        return Comparison(
            unexercisedExceptions: unexercised(decisions), overBroad: overBroad(decisions), ignoredKeys: ignoredKeys())
    }

    private func unexercised(_ decisions: [(ObservedLoad, ATSDecision)]) -> [ComparisonFinding] {
        let matched = Set(decisions.compactMap { $0.1.exceptionKey })
        return configuration.exceptionDomains.values.filter { !$0.isBuiltIn && !matched.contains($0.key) }
            .sorted { $0.key < $1.key }
            .map { entry in
                ComparisonFinding(
                    code: "unexercised-exception", keyPath: exceptionsPath.appending(entry.key).description,
                    message: "no observed load matched NSExceptionDomains → \(entry.key)",
                    fix:
                        "remove the entry if the app no longer loads \(entry.key), or exercise it before trusting this report"
                )
            }
    }

    private func overBroad(_ decisions: [(ObservedLoad, ATSDecision)]) -> [ComparisonFinding] {
        var findings: [ComparisonFinding] = []
        func relying(on key: String) -> [String] {
            Array(Set(decisions.filter { $0.1.justificationKeys.contains(key) }.map { $0.0.target.host })).sorted()
        }
        func entriesFor(_ hosts: [String]) -> [String] {
            minimal.filter { !Set($0.coveredHosts).isDisjoint(with: hosts) }.map(\.key)
        }
        let globals: [(String, BooleanSetting)] = [
            (ATSKey.allowsArbitraryLoads, configuration.allowsArbitraryLoads),
            (ATSKey.allowsArbitraryLoadsForMedia, configuration.allowsArbitraryLoadsForMedia),
            (ATSKey.allowsArbitraryLoadsInWebContent, configuration.allowsArbitraryLoadsInWebContent),
        ]
        for (key, setting) in globals where setting.isYes {
            let hosts = relying(on: key)
            let needed = entriesFor(hosts)
            let path = KeyPath.ats.appending(key).description
            if hosts.isEmpty {
                if key == ATSKey.allowsArbitraryLoads && configuration.fineGrainedKeyPresent
                    && options.platform.has(.fineGrainedGlobalKeys)
                {
                    continue  // ignored anyway: reported under ignored keys
                }
                findings.append(
                    ComparisonFinding(
                        code: "unneeded-global-key", keyPath: path,
                        message: "\(key) = YES: no observed load relied on it", fix: "remove it"))
            } else {
                let what =
                    needed.isEmpty
                    ? "the empty dictionary already allows their loads, so no exception is needed"
                    : "\(needed.count) host exception\(needed.count == 1 ? "" : "s") would do (\(needed.joined(separator: ", ")))"
                findings.append(
                    ComparisonFinding(
                        code: "over-broad-global-key", keyPath: path,
                        message:
                            "\(key) = YES lifts ATS for every host, but only \(hosts.count) observed host\(hosts.count == 1 ? "" : "s") relied on it (\(hosts.joined(separator: ", "))); \(what)",
                        fix: "replace it with the NSExceptionDomains entries of the minimal dictionary"))
            }
        }
        if configuration.allowsLocalNetworking.isYes && !minimalAllowsLocalNetworking {
            findings.append(
                ComparisonFinding(
                    code: "unneeded-global-key",
                    keyPath: KeyPath.ats.appending(ATSKey.allowsLocalNetworking).description,
                    message:
                        "NSAllowsLocalNetworking = YES: the observed traffic did not need it (local hosts are exempt by default on \(options.platform))",
                    fix: "remove it unless it is there to cancel NSAllowsArbitraryLoads on iOS 10+"))
        }
        for entry in configuration.exceptionDomains.values.sorted(by: { $0.key < $1.key }) where !entry.isBuiltIn {
            let matched = decisions.filter { $0.1.exceptionKey == entry.key }.map(\.0)
            guard !matched.isEmpty else { continue }
            let path = exceptionsPath.appending(entry.key)
            if entry.allowsInsecureHTTPLoads && !matched.contains(where: { $0.needs.cleartext }) {
                findings.append(
                    ComparisonFinding(
                        code: "unneeded-exception-key",
                        keyPath: path.appending(ATSKey.exceptionAllowsInsecureHTTPLoads).description,
                        message:
                            "NSExceptionAllowsInsecureHTTPLoads = YES, but every observed load to \(entry.key) used https://",
                        fix: "remove it (it also needs an App Review justification)"))
            }
            if entry.minimumTLSVersionSpecified && entry.minimumTLSVersion < .tls12 {
                let needed = matched.compactMap {
                    $0.needs.minimumTLSVersion.flatMap(TLSProtocolVersion.init(plistString:))
                }
                .min()
                if needed.map({ $0 > entry.minimumTLSVersion }) ?? true {
                    findings.append(
                        ComparisonFinding(
                            code: "unneeded-exception-key",
                            keyPath: path.appending(ATSKey.exceptionMinimumTLSVersion).description,
                            message:
                                "NSExceptionMinimumTLSVersion = \(entry.minimumTLSVersion) is lower than the traffic needed (\(needed?.rawValue ?? "TLSv1.2, the default"))",
                            fix: needed.map { "raise it to \($0.rawValue)" } ?? "remove it"))
                }
            }
            if !entry.requiresForwardSecrecy && !matched.contains(where: { $0.needs.forwardSecrecyWaiver }) {
                findings.append(
                    ComparisonFinding(
                        code: "unneeded-exception-key",
                        keyPath: path.appending(ATSKey.exceptionRequiresForwardSecrecy).description,
                        message:
                            "NSExceptionRequiresForwardSecrecy = NO, but every observed load to \(entry.key) used forward-secret key exchange",
                        fix: "remove it"))
            }
            if entry.includesSubdomains && !matched.contains(where: { $0.target.host != entry.key }) {
                findings.append(
                    ComparisonFinding(
                        code: "unneeded-exception-key", keyPath: path.appending(ATSKey.includesSubdomains).description,
                        message: "NSIncludesSubdomains = YES, but no subdomain of \(entry.key) was loaded",
                        fix: "remove it to keep the exception to \(entry.key) alone"))
            }
        }
        return findings
    }

    /// Keys ATS ignores: the presence rule (from `ATSLinter` when the source is known) and keys
    /// that never match or are not ATS keys.
    private func ignoredKeys() -> [ComparisonFinding] {
        let codes: Set<String> = [
            "aal-ignored", "misplaced-key", "unknown-key", "undocumented-key", "uppercase-key", "wildcard-key",
            "port-in-key", "scheme-in-key", "leading-dot-key", "bad-domain-key", "trailing-dot-key",
        ]
        if let source {
            return ATSLinter(source: source, platform: options.platform).lint().findings.filter {
                codes.contains($0.code)
            }.map {
                ComparisonFinding(code: $0.code, keyPath: $0.keyPath.description, message: $0.message, fix: $0.fix)
            }
        }
        guard configuration.allowsArbitraryLoads.isYes, configuration.fineGrainedKeyPresent,
            options.platform.has(.fineGrainedGlobalKeys)
        else { return [] }
        let present = configuration.presentFineGrainedKeys
        return [
            ComparisonFinding(
                code: "aal-ignored", keyPath: KeyPath.ats.appending(ATSKey.allowsArbitraryLoads).description,
                message:
                    "NSAllowsArbitraryLoads = YES is silently ignored on iOS 10 / macOS 10.12 and later because \(present.joined(separator: " and ")) \(present.count == 1 ? "is" : "are") present (presence alone, whatever the value)",
                fix:
                    "remove NSAllowsArbitraryLoads, or remove \(present.joined(separator: " and ")) if you really need arbitrary loads"
            )
        ]
    }
}
