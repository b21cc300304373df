/// The result of linting one configuration source.
public struct LintReport: Sendable, Codable {
    /// Every finding, most severe first, then by key path.
    public let findings: [ConfigMessage]

    /// The highest severity present, nil when there are no findings.
    public var worstSeverity: Severity? { findings.map(\.severity).max() }

    /// Counts by severity.
    public func count(_ severity: Severity) -> Int { findings.filter { $0.severity == severity }.count }

    /// Exit status of `ats-proxy lint`: 2 with errors, 1 with warnings under `--strict`, else 0.
    public func exitStatus(strict: Bool) -> Int32 {
        if count(.error) > 0 { return 2 }
        if strict && count(.warning) > 0 { return 1 }
        return 0
    }
}

/// Finds configuration errors and traps in an ATS dictionary: everything the parser logs, plus
/// keys that never match, keys that do nothing, keys that are silently ignored, and the App Review
/// justification each relaxing key needs (reference §1, §2.4, §6).
///
/// Pure: works on the loaded plist values, no I/O.
public struct ATSLinter: Sendable {
    public let source: LoadedInfoPlist
    public let parseOptions: ParseOptions
    public let platform: Platform

    public init(source: LoadedInfoPlist, parseOptions: ParseOptions = ParseOptions(), platform: Platform = .default) {
        self.source = source
        self.parseOptions = parseOptions
        self.platform = platform
    }

    public func lint() -> LintReport {
        let configuration = ATSConfigurationParser(options: parseOptions).parse(source.atsValue)
        var findings = configuration.messages
        findings += misplacedKeys()
        if case .dictionary(let root)? = source.atsValue {
            findings += unknownKeys(root)
            findings += exceptionKeyTraps(root, configuration)
            findings += pinnedKeyTraps(configuration)
            findings += globalTraps(root, configuration)
            findings += inertKeys(root, configuration)
            findings += justifications(configuration)
        } else if source.atsValue == nil, source.kind != .none {
            findings.append(
                ConfigMessage(
                    code: "no-ats", severity: .note, keyPath: .ats,
                    message: "there is no NSAppTransportSecurity dictionary, so full ATS applies to every host"))
        }
        let ordered = findings.enumerated().sorted { lhs, rhs in
            if lhs.element.severity != rhs.element.severity { return lhs.element.severity > rhs.element.severity }
            return lhs.offset < rhs.offset
        }.map(\.element)
        var seen = Set<String>()
        let unique = ordered.filter { seen.insert("\($0.code)|\($0.keyPath)|\($0.message)").inserted }
        return LintReport(findings: unique)
    }

    // MARK: - Keys in the wrong place or misspelt

    private func misplacedKeys() -> [ConfigMessage] {
        source.misplacedATSKeys.map { key in
            ConfigMessage(
                code: "misplaced-key", severity: .error, keyPath: [key],
                message: "\(key) is at the Info.plist root, outside NSAppTransportSecurity, so ATS never reads it",
                fix: "move \(key) inside the NSAppTransportSecurity dictionary")
        }
    }

    private func unknownKeys(_ root: [String: PlistValue]) -> [ConfigMessage] {
        var findings: [ConfigMessage] = []
        let topKnown = Set(ATSKey.topLevel).union(ATSKey.legacyTopLevelAliases.keys)
        for key in root.keys.sorted() where !topKnown.contains(key) {
            findings.append(
                unknownKey(key, path: KeyPath.ats.appending(key), candidates: ATSKey.topLevel, where: "top level"))
        }
        if case .dictionary(let entries)? = root[ATSKey.exceptionDomains] {
            let known = Set(ATSKey.exceptionEntry).union(ATSKey.legacyExceptionAliases.keys)
            for (host, entry) in entries.sorted(by: { $0.key < $1.key }) {
                guard case .dictionary(let fields) = entry else { continue }
                for key in fields.keys.sorted() where !known.contains(key) {
                    findings.append(
                        unknownKey(
                            key, path: KeyPath.ats.appending(ATSKey.exceptionDomains).appending(host).appending(key),
                            candidates: ATSKey.exceptionEntry, where: "an exception-domain entry"))
                }
            }
        }
        if case .dictionary(let entries)? = root[ATSKey.pinnedDomains] {
            for (host, entry) in entries.sorted(by: { $0.key < $1.key }) {
                guard case .dictionary(let fields) = entry else { continue }
                for key in fields.keys.sorted() where !ATSKey.pinnedEntry.contains(key) {
                    findings.append(
                        unknownKey(
                            key, path: KeyPath.ats.appending(ATSKey.pinnedDomains).appending(host).appending(key),
                            candidates: ATSKey.pinnedEntry, where: "a pinned-domain entry"))
                }
            }
        }
        return findings
    }

    private func unknownKey(_ key: String, path: KeyPath, candidates: [String], where place: String) -> ConfigMessage {
        if ATSKey.undocumented.contains(key) {
            return ConfigMessage(
                code: "undocumented-key", severity: .warning, keyPath: path,
                message: "\(key) is seen in the wild but was never an ATS key; it does nothing",
                fix: "remove it (use NSAllowsLocalNetworking or NSExceptionAllowsInsecureHTTPLoads as intended)")
        }
        if let suggestion = closest(key, in: candidates) {
            return ConfigMessage(
                code: "unknown-key", severity: .error, keyPath: path,
                message:
                    "\(key) is not an ATS key at \(place) and is ignored; it looks like a misspelling of \(suggestion)",
                fix: "rename it to \(suggestion)")
        }
        return ConfigMessage(
            code: "unknown-key", severity: .warning, keyPath: path,
            message: "\(key) is not an ATS key at \(place) and is ignored", fix: "remove it")
    }

    /// The candidate within edit distance 3 (or differing only in case), if any.
    private func closest(_ key: String, in candidates: [String]) -> String? {
        if let same = candidates.first(where: { $0.lowercased() == key.lowercased() }) { return same }
        let scored = candidates.map { ($0, editDistance($0.lowercased(), key.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= 3 else { return nil }
        return best.0
    }

    // MARK: - Exception keys that never match

    private func exceptionKeyTraps(_ root: [String: PlistValue], _ configuration: ATSConfiguration) -> [ConfigMessage] {
        var findings: [ConfigMessage] = []
        let base = KeyPath.ats.appending(ATSKey.exceptionDomains)
        for (key, entry) in configuration.exceptionDomains.sorted(by: { $0.key < $1.key }) {
            let path = base.appending(key)
            findings += hostKeyTraps(key, path: path, exactMatchOnly: true)
            switch entry.kind {
            case .address, .cidr:
                if !platform.has(.externalIPAddressesRequireATS) {
                    findings.append(
                        ConfigMessage(
                            code: "ip-key-old-os", severity: .warning, keyPath: path,
                            message:
                                "IP and CIDR exception keys are documented only from iOS 17 / macOS 14; on \(platform) this entry may not apply",
                            fix:
                                "for older OSes, rely on the IP exemption (iOS 10–16 exempt all IP addresses) or NSAllowsArbitraryLoads"
                        ))
                }
                if case .dictionary(let fields)? = root[ATSKey.exceptionDomains]?.dictionaryValue?[key],
                    fields[ATSKey.includesSubdomains] != nil
                {
                    findings.append(
                        ConfigMessage(
                            code: "inert-key", severity: .warning,
                            keyPath: path.appending(ATSKey.includesSubdomains),
                            message: "NSIncludesSubdomains has no effect on an IP or CIDR entry",
                            fix: "remove it; use a CIDR block to cover a range"))
                }
            case .host, .invalidCIDR:
                break
            }
            // Obsolete only once the platform requires CT itself (iOS 12.1.1, macOS 10.14.3); before that the
            // key is what asks for CT.
            if entry.requiresCertificateTransparency && platform.has(.platformCertificateTransparency) {
                findings.append(
                    ConfigMessage(
                        code: "obsolete-key", severity: .warning,
                        keyPath: path.appending(ATSKey.requiresCertificateTransparency),
                        message:
                            "NSRequiresCertificateTransparency is obsolete on \(platform): it requires CT for publicly trusted certificates anyway (since \(platform.family.displayName) \(PlatformFeature.platformCertificateTransparency.threshold(for: platform.family))), and the key broke debugging proxies",
                        fix: "remove it"))
            }
            if entry.minimumTLSVersionSpecified && entry.minimumTLSVersion < .tls12
                && platform.has(.tls12AbsoluteFloor)
            {
                findings.append(
                    ConfigMessage(
                        code: "tls-floor", severity: .warning,
                        keyPath: path.appending(ATSKey.exceptionMinimumTLSVersion),
                        message:
                            "\(entry.minimumTLSVersion) has no effect on \(platform) (reportedly not honoured on iOS/macOS 26 and later: connections to a server without TLS 1.2 fail there), yet App Review still asks for a justification of it",
                        fix:
                            "upgrade the server to TLS 1.2 or later and remove the key (it matters only below iOS 26 / macOS 26)"
                    ))
            }
            if entry.minimumTLSVersionSpecified && entry.minimumTLSVersion == .tls13 && !platform.has(.tls13) {
                findings.append(
                    ConfigMessage(
                        code: "tls13-unavailable", severity: .error,
                        keyPath: path.appending(ATSKey.exceptionMinimumTLSVersion),
                        message:
                            "TLSv1.3 is required but \(platform) has no TLS 1.3, so every connection to \(key) fails",
                        fix: "use TLSv1.2"))
            }
        }
        return findings
    }

    /// Traps shared by exception and pinned keys: case, port, wildcard, scheme, dots, spaces.
    private func hostKeyTraps(_ key: String, path: KeyPath, exactMatchOnly: Bool) -> [ConfigMessage] {
        var findings: [ConfigMessage] = []
        if key.contains("://") {
            findings.append(
                ConfigMessage(
                    code: "scheme-in-key", severity: .error, keyPath: path,
                    message: "'\(key)' contains a URL scheme; keys are bare host names, so it never matches",
                    fix: "use '\(hostPart(of: key))'"))
            return findings
        }
        let kind = ExceptionKeyKind.classify(key)
        if case .host = kind {
        } else {
            return findings
        }
        if key.isEmpty || key.contains(where: \.isWhitespace) {
            findings.append(
                ConfigMessage(
                    code: "bad-domain-key", severity: .error, keyPath: path,
                    message: "'\(key)' is empty or contains white space, so it never matches a host",
                    fix: "write the bare host name, e.g. api.example.com"))
            return findings
        }
        if key.hasPrefix("*.") || key.contains("*") {
            let base = key.replacingOccurrences(of: "*.", with: "")
            findings.append(
                ConfigMessage(
                    code: "wildcard-key", severity: .error, keyPath: path,
                    message: "'\(key)' uses a wildcard; ATS does not support wildcards, so it never matches",
                    fix: "use '\(base)' with NSIncludesSubdomains = YES"))
        }
        if let colon = key.lastIndex(of: ":"), key[key.index(after: colon)...].allSatisfy(\.isNumber),
            !key[key.index(after: colon)...].isEmpty
        {
            findings.append(
                ConfigMessage(
                    code: "port-in-key", severity: .error, keyPath: path,
                    message: "'\(key)' includes a port; keys never include ports, so it never matches",
                    fix: "use '\(key[..<colon])' (an exception applies to every port)"))
        }
        if key.hasPrefix(".") {
            findings.append(
                ConfigMessage(
                    code: "leading-dot-key", severity: .error, keyPath: path,
                    message: "'\(key)' starts with a dot, so it never matches",
                    fix: "use '\(key.drop(while: { $0 == "." }))' with NSIncludesSubdomains = YES"))
        }
        if exactMatchOnly && key != key.lowercased() {
            findings.append(
                ConfigMessage(
                    code: "uppercase-key", severity: .error, keyPath: path,
                    message:
                        "'\(key)' has upper-case letters; ATS compares exception keys with the lower-cased host, so it never matches",
                    fix: "use '\(key.lowercased())'"))
        }
        if key.hasSuffix(".") {
            findings.append(
                ConfigMessage(
                    code: "trailing-dot-key", severity: .warning, keyPath: path,
                    message:
                        "'\(key)' ends with a dot, so it matches only URLs written with the trailing dot, not '\(key.dropLast())'",
                    fix: "use '\(key.dropLast())'"))
        }
        return findings
    }

    private func hostPart(of key: String) -> String {
        guard let range = key.range(of: "://") else { return key }
        let rest = key[range.upperBound...]
        return String(rest.prefix { $0 != "/" && $0 != ":" }).lowercased()
    }

    // MARK: - Pinned domains

    private func pinnedKeyTraps(_ configuration: ATSConfiguration) -> [ConfigMessage] {
        var findings: [ConfigMessage] = []
        let base = KeyPath.ats.appending(ATSKey.pinnedDomains)
        for (key, entry) in configuration.pinnedDomains.sorted(by: { $0.key < $1.key }) {
            let path = base.appending(key)
            findings += hostKeyTraps(key, path: path, exactMatchOnly: false)
            if !entry.isPinning {
                findings.append(
                    ConfigMessage(
                        code: "pin-nothing", severity: .warning, keyPath: path,
                        message:
                            "the entry has neither NSPinnedLeafIdentities nor NSPinnedCAIdentities, so it pins nothing",
                        fix: "add NSPinnedCAIdentities (preferred) or NSPinnedLeafIdentities"))
            }
            for (name, list) in [
                (ATSKey.pinnedLeafIdentities, entry.leafIdentities), (ATSKey.pinnedCAIdentities, entry.caIdentities),
            ] {
                guard let list, list.digests.isEmpty else { continue }
                findings.append(
                    ConfigMessage(
                        code: "pin-empty", severity: .error, keyPath: path.appending(name),
                        message:
                            "\(name) holds no valid SPKI-SHA256-BASE64 digest, so every connection to \(key) fails (pinning fails closed)",
                        fix: "add the base64 SHA-256 of the certificate's SubjectPublicKeyInfo"))
            }
        }
        return findings
    }

    // MARK: - Global keys

    private func globalTraps(_ root: [String: PlistValue], _ configuration: ATSConfiguration) -> [ConfigMessage] {
        var findings: [ConfigMessage] = []
        let aalPath = KeyPath.ats.appending(ATSKey.allowsArbitraryLoads)
        if configuration.allowsArbitraryLoads.isYes && configuration.fineGrainedKeyPresent {
            let present = configuration.presentFineGrainedKeys
            let keys = present.joined(separator: " and ") + (present.count == 1 ? " is" : " are")
            let keyList = present.joined(separator: " and ")
            let supportsOld = source.minimumOSVersion.map { $0 < OSVersion(10) } ?? false
            findings.append(
                ConfigMessage(
                    code: "aal-ignored", severity: supportsOld ? .note : .warning, keyPath: aalPath,
                    message: supportsOld
                        ? "NSAllowsArbitraryLoads = YES is honoured only on iOS 9; on iOS 10+ it is ignored because \(keys) present (Apple's compatibility pattern)"
                        : "NSAllowsArbitraryLoads = YES is silently ignored on iOS 10 / macOS 10.12 and later because \(keys) present (presence alone, whatever the value)",
                    fix: supportsOld
                        ? nil : "remove NSAllowsArbitraryLoads, or remove \(keyList) if you really need arbitrary loads"
                ))
        }
        if configuration.allowsLocalNetworking.isExplicitNo {
            findings.append(
                ConfigMessage(
                    code: "local-networking-no", severity: .warning,
                    keyPath: KeyPath.ats.appending(ATSKey.allowsLocalNetworking),
                    message:
                        "an explicit NSAllowsLocalNetworking = NO removes the default exemption for local hosts: http://localhost and LAN addresses are blocked"
                        + (configuration.allowsArbitraryLoads.isYes
                            ? ", and it also cancels NSAllowsArbitraryLoads" : ""),
                    fix: "remove the key to keep the default, or set it to YES"))
        }
        if configuration.allowsArbitraryLoads.isYes && !configuration.fineGrainedKeyPresent {
            for entry in configuration.exceptionDomains.values.sorted(by: { $0.key < $1.key })
            where !entry.allowsInsecureHTTPLoads {
                findings.append(
                    ConfigMessage(
                        code: "exception-reenables-ats", severity: .warning,
                        keyPath: KeyPath.ats.appending(ATSKey.exceptionDomains).appending(entry.key),
                        message:
                            "this entry replaces NSAllowsArbitraryLoads for \(entry.key)\(entry.includesSubdomains ? " and its subdomains" : ""): full ATS (TLS \(entry.minimumTLSVersion.displayName.dropFirst(4))+, forward secrecy, no cleartext) applies there",
                        fix:
                            "intended if you want ATS for this host; otherwise add NSExceptionAllowsInsecureHTTPLoads = YES"
                    ))
            }
        }
        if case .dictionary(let entries)? = root[ATSKey.exceptionDomains] {
            let parsedKeys = Set(configuration.exceptionDomains.keys)
            for key in entries.keys.sorted() where parsedKeys.contains(key) {
                guard let entry = configuration.exceptionDomains[key], entry.kind == .host else { continue }
                let host = key.hasSuffix(".") ? String(key.dropLast()) : key
                let isLocalName = !host.contains(".") || host.hasSuffix(".local")
                if isLocalName && !entry.allowsInsecureHTTPLoads {
                    findings.append(
                        ConfigMessage(
                            code: "local-exception-stricter", severity: .warning,
                            keyPath: KeyPath.ats.appending(ATSKey.exceptionDomains).appending(key),
                            message:
                                "\(key) is a local name, exempt from ATS by default; this entry without NSExceptionAllowsInsecureHTTPLoads makes it stricter (http:// is blocked)",
                            fix: "add NSExceptionAllowsInsecureHTTPLoads = YES, or remove the entry"))
                }
            }
        }
        return findings
    }

    // MARK: - Keys that do nothing

    private func inertKeys(_ root: [String: PlistValue], _ configuration: ATSConfiguration) -> [ConfigMessage] {
        var findings: [ConfigMessage] = []
        let atsPath = KeyPath.ats
        if configuration.allowsArbitraryLoads.isExplicitNo {
            findings.append(
                inert(atsPath.appending(ATSKey.allowsArbitraryLoads), "NSAllowsArbitraryLoads = NO is the default"))
        }
        for (key, setting) in [
            (ATSKey.allowsArbitraryLoadsForMedia, configuration.allowsArbitraryLoadsForMedia),
            (ATSKey.allowsArbitraryLoadsInWebContent, configuration.allowsArbitraryLoadsInWebContent),
        ] where setting.isExplicitNo {
            findings.append(
                inert(
                    atsPath.appending(key),
                    "\(key) = NO is the default"
                        + (configuration.allowsArbitraryLoads.isYes
                            ? ", but its presence still cancels NSAllowsArbitraryLoads" : "")))
        }
        guard case .dictionary(let entries)? = root[ATSKey.exceptionDomains] else { return findings }
        for (key, value) in entries.sorted(by: { $0.key < $1.key }) {
            guard case .dictionary(let fields) = value else { continue }
            let path = atsPath.appending(ATSKey.exceptionDomains).appending(key)
            if fields[ATSKey.exceptionRequiresForwardSecrecy] == .bool(true) {
                findings.append(
                    inert(
                        path.appending(ATSKey.exceptionRequiresForwardSecrecy), "forward secrecy is required by default"
                    ))
            }
            if fields[ATSKey.exceptionMinimumTLSVersion] == .string("TLSv1.2") {
                findings.append(
                    inert(path.appending(ATSKey.exceptionMinimumTLSVersion), "TLSv1.2 is the default minimum"))
            }
            if fields[ATSKey.exceptionAllowsInsecureHTTPLoads] == .bool(false) {
                findings.append(inert(path.appending(ATSKey.exceptionAllowsInsecureHTTPLoads), "NO is the default"))
            }
            if fields[ATSKey.includesSubdomains] == .bool(false) {
                findings.append(inert(path.appending(ATSKey.includesSubdomains), "NO is the default"))
            }
            // An empty entry is inert only where it changes nothing: not under NSAllowsArbitraryLoads, not
            // where the media or web-content keys relax loads (the entry keeps ATS on for this host's
            // media and web loads), and not for a local name (exempt by default: the entry makes it stricter).
            let relaxesOtherLoads =
                configuration.allowsArbitraryLoadsForMedia.isYes || configuration.allowsArbitraryLoadsInWebContent.isYes
            let bareKey = key.hasSuffix(".") ? String(key.dropLast()) : key
            let isLocalName = !bareKey.contains(".") || bareKey.hasSuffix(".local")
            let isHostEntry = configuration.exceptionDomains[key].map { $0.kind == .host } ?? true
            if fields.isEmpty && !configuration.allowsArbitraryLoads.isYes && !relaxesOtherLoads && !isLocalName
                && isHostEntry
            {
                findings.append(
                    ConfigMessage(
                        code: "inert-key", severity: .note, keyPath: path,
                        message: "an empty entry means full ATS for \(key), which is already the default here",
                        fix: "remove the entry"))
            }
        }
        return findings
    }

    private func inert(_ path: KeyPath, _ reason: String) -> ConfigMessage {
        ConfigMessage(
            code: "inert-key", severity: .note, keyPath: path, message: "this key does nothing: \(reason)",
            fix: "remove it")
    }

    // MARK: - App Review (reference §6)

    private func justifications(_ configuration: ATSConfiguration) -> [ConfigMessage] {
        var findings: [ConfigMessage] = []
        let atsPath = KeyPath.ats
        func flag(_ path: KeyPath, _ what: String) {
            findings.append(
                ConfigMessage(
                    code: "app-review", severity: .note, keyPath: path,
                    message: "App Review asks for a justification: \(what)",
                    fix: nil))
        }
        if configuration.allowsArbitraryLoads.isYes {
            flag(atsPath.appending(ATSKey.allowsArbitraryLoads), "NSAllowsArbitraryLoads = YES")
        }
        if configuration.allowsArbitraryLoadsForMedia.isYes {
            flag(
                atsPath.appending(ATSKey.allowsArbitraryLoadsForMedia),
                "NSAllowsArbitraryLoadsForMedia = YES (already-encrypted media only)")
        }
        if configuration.allowsArbitraryLoadsInWebContent.isYes {
            flag(atsPath.appending(ATSKey.allowsArbitraryLoadsInWebContent), "NSAllowsArbitraryLoadsInWebContent = YES")
        }
        for entry in configuration.exceptionDomains.values.sorted(by: { $0.key < $1.key }) {
            let path = atsPath.appending(ATSKey.exceptionDomains).appending(entry.key)
            if entry.allowsInsecureHTTPLoads {
                flag(path.appending(ATSKey.exceptionAllowsInsecureHTTPLoads), "cleartext HTTP to \(entry.key)")
            }
            if entry.minimumTLSVersionSpecified && entry.minimumTLSVersion < .tls12 {
                flag(path.appending(ATSKey.exceptionMinimumTLSVersion), "\(entry.minimumTLSVersion) for \(entry.key)")
            }
        }
        return findings
    }
}

/// Levenshtein distance, for "did you mean" suggestions.
public func editDistance(_ lhs: String, _ rhs: String) -> Int {
    let a = Array(lhs)
    let b = Array(rhs)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = Array(repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
