import Foundation

/// Choices the parser makes where Apple's behaviour is uncertain.
public struct ParseOptions: Sendable, Hashable {
    /// Honour `NSThirdParty…`, `NSTemporary…` and `NSAllowsArbitraryLoadsInMedia` as aliases of
    /// the current keys (`--legacy-keys`). Default: ignored with a warning, as the current
    /// Network.framework parser does.
    public var legacyKeysAsAliases: Bool = false
    /// Treat `<integer>1</integer>` as YES for Boolean keys, as Foundation's `isEqual:@YES` does.
    /// Default true; `--strict-booleans` makes every integer count as NO.
    public var integerOneIsYes: Bool = true

    public init(legacyKeysAsAliases: Bool = false, integerOneIsYes: Bool = true) {
        self.legacyKeysAsAliases = legacyKeysAsAliases
        self.integerOneIsYes = integerOneIsYes
    }
}

/// Turns an `NSAppTransportSecurity` dictionary into an `ATSConfiguration`, applying the
/// wrong-type rules of the reference (section 1.4) and logging what Apple's parser logs.
///
/// Pure: no I/O. Unknown keys are ignored here (the linter reports them).
public struct ATSConfigurationParser: Sendable {
    public let options: ParseOptions

    public init(options: ParseOptions = ParseOptions()) { self.options = options }

    /// Parses the value found under `NSAppTransportSecurity` (nil when the key is absent).
    public func parse(_ value: PlistValue?) -> ATSConfiguration {
        var configuration = ATSConfiguration()
        guard let value else { return configuration }
        guard case .dictionary(let root) = value else {
            configuration.messages.append(
                ConfigMessage(
                    code: "ats-not-dictionary", severity: .error, keyPath: .ats,
                    message:
                        "NSAppTransportSecurity is \(article(value.typeName)), not a dictionary; ATS uses its defaults",
                    fix: "make NSAppTransportSecurity a <dict>"))
            return configuration
        }
        parseTopLevel(root, into: &configuration)
        return configuration
    }

    private func parseTopLevel(_ root: [String: PlistValue], into configuration: inout ATSConfiguration) {
        let path = KeyPath.ats
        configuration.allowsArbitraryLoads = boolean(root, ATSKey.allowsArbitraryLoads, path, &configuration.messages)
        configuration.allowsArbitraryLoadsForMedia = boolean(
            root, ATSKey.allowsArbitraryLoadsForMedia, path, &configuration.messages)
        configuration.allowsArbitraryLoadsInWebContent = boolean(
            root, ATSKey.allowsArbitraryLoadsInWebContent, path, &configuration.messages)
        configuration.allowsLocalNetworking = boolean(root, ATSKey.allowsLocalNetworking, path, &configuration.messages)

        for (legacy, official) in ATSKey.legacyTopLevelAliases.sorted(by: { $0.key < $1.key }) where root[legacy] != nil
        {
            if options.legacyKeysAsAliases {
                if root[official] == nil {
                    configuration.allowsArbitraryLoadsForMedia = boolean(
                        root, legacy, path, &configuration.messages)
                    configuration.messages.append(
                        legacyNote(path.appending(legacy), official: official, honoured: true))
                }
            } else {
                configuration.messages.append(legacyNote(path.appending(legacy), official: official, honoured: false))
            }
        }

        if let niap = root[ATSKey.requiresNIAP] {
            configuration.niapPackage =
                niapValue(niap, path.appending(ATSKey.requiresNIAP), &configuration.messages) ?? .none
        }

        if let exceptions = root[ATSKey.exceptionDomains] {
            let exceptionsPath = path.appending(ATSKey.exceptionDomains)
            if case .dictionary(let entries) = exceptions {
                for (key, entry) in entries.sorted(by: { $0.key < $1.key }) {
                    if let parsed = exceptionEntry(key, entry, exceptionsPath.appending(key), &configuration.messages) {
                        configuration.exceptionDomains[key] = parsed
                    }
                }
            } else {
                configuration.messages.append(
                    ConfigMessage(
                        code: "wrong-type", severity: .error, keyPath: exceptionsPath,
                        message: "NSExceptionDomains is \(article(exceptions.typeName)), so no exception applies",
                        fix: "make NSExceptionDomains a <dict> of host name → <dict>",
                        appleLog: "App Transport Security exceptions must be a dictionary"))
            }
        }

        if let pinned = root[ATSKey.pinnedDomains] {
            let pinnedPath = path.appending(ATSKey.pinnedDomains)
            if case .dictionary(let entries) = pinned {
                for (key, entry) in entries.sorted(by: { $0.key < $1.key }) {
                    if let parsed = pinnedEntry(key, entry, pinnedPath.appending(key), &configuration.messages) {
                        configuration.pinnedDomains[key] = parsed
                    }
                }
            } else {
                configuration.messages.append(
                    ConfigMessage(
                        code: "wrong-type", severity: .error, keyPath: pinnedPath,
                        message: "NSPinnedDomains is \(article(pinned.typeName)), so nothing is pinned",
                        fix: "make NSPinnedDomains a <dict> of host name → <dict>"))
            }
        }
    }

    private func exceptionEntry(
        _ key: String, _ value: PlistValue, _ path: KeyPath, _ messages: inout [ConfigMessage]
    ) -> ExceptionDomain? {
        guard case .dictionary(let entry) = value else {
            messages.append(
                ConfigMessage(
                    code: "wrong-type", severity: .error, keyPath: path,
                    message:
                        "the exception for \(key) is \(article(value.typeName)), so it is skipped and \(key) gets the global policy",
                    fix: "make \(key) a <dict> (an empty <dict/> means full ATS for this host)",
                    appleLog: "App Transport Security exception must be a dictionary"))
            return nil
        }
        var domain = ExceptionDomain(key: key)
        if case .invalidCIDR = domain.kind {
            messages.append(
                ConfigMessage(
                    code: "invalid-cidr", severity: .error, keyPath: path,
                    message: "\(key) contains '/' but is not valid CIDR notation, so this entry never matches",
                    fix: "write the block as ADDRESS/PREFIX, e.g. 192.168.0.0/16 or 2001:db8::/32",
                    appleLog: "App Transport Security exception \(key) is not a valid CIDR notation."))
        }
        domain.includesSubdomains = boolean(entry, ATSKey.includesSubdomains, path, &messages).resolved(default: false)
        domain.allowsInsecureHTTPLoads = boolean(entry, ATSKey.exceptionAllowsInsecureHTTPLoads, path, &messages)
            .resolved(default: false)
        domain.requiresForwardSecrecy = boolean(entry, ATSKey.exceptionRequiresForwardSecrecy, path, &messages)
            .resolved(default: true)
        domain.requiresCertificateTransparency = boolean(
            entry, ATSKey.requiresCertificateTransparency, path, &messages
        ).resolved(default: false)
        if let version = minimumTLS(
            entry[ATSKey.exceptionMinimumTLSVersion], path.appending(ATSKey.exceptionMinimumTLSVersion), &messages)
        {
            domain.minimumTLSVersion = version
            domain.minimumTLSVersionSpecified = true
        }
        if let niap = entry[ATSKey.exceptionRequiresNIAP] {
            domain.niapPackage = niapValue(niap, path.appending(ATSKey.exceptionRequiresNIAP), &messages)
        }
        for legacy in entry.keys.sorted() {
            guard let official = ATSKey.legacyExceptionAliases[legacy] else { continue }
            let legacyPath = path.appending(legacy)
            guard options.legacyKeysAsAliases else {
                messages.append(legacyNote(legacyPath, official: official, honoured: false))
                continue
            }
            guard entry[official] == nil else { continue }
            messages.append(legacyNote(legacyPath, official: official, honoured: true))
            domain.legacyKeysApplied.append(legacy)
            switch official {
            case ATSKey.exceptionAllowsInsecureHTTPLoads:
                domain.allowsInsecureHTTPLoads = boolean(entry, legacy, path, &messages).resolved(default: false)
            case ATSKey.exceptionRequiresForwardSecrecy:
                domain.requiresForwardSecrecy = boolean(entry, legacy, path, &messages).resolved(default: true)
            case ATSKey.exceptionMinimumTLSVersion:
                if let version = minimumTLS(entry[legacy], legacyPath, &messages) {
                    domain.minimumTLSVersion = version
                    domain.minimumTLSVersionSpecified = true
                }
            default:
                break
            }
        }
        return domain
    }

    private func pinnedEntry(
        _ key: String, _ value: PlistValue, _ path: KeyPath, _ messages: inout [ConfigMessage]
    ) -> PinnedDomain? {
        guard case .dictionary(let entry) = value else {
            messages.append(
                ConfigMessage(
                    code: "wrong-type", severity: .error, keyPath: path,
                    message: "the pinned domain \(key) is \(article(value.typeName)), so it is skipped",
                    fix: "make \(key) a <dict> with NSPinnedLeafIdentities and/or NSPinnedCAIdentities"))
            return nil
        }
        var domain = PinnedDomain(key: key)
        if let flag = entry[ATSKey.includesSubdomains] {
            domain.includesSubdomains = flag == .bool(true)
            if case .bool = flag {
            } else {
                messages.append(
                    ConfigMessage(
                        code: "wrong-type", severity: .error, keyPath: path.appending(ATSKey.includesSubdomains),
                        message:
                            "NSIncludesSubdomains is \(article(flag.typeName)); pinning only honours a Boolean true",
                        fix: "use <true/>"))
            }
        }
        domain.caIdentities = pinList(
            entry[ATSKey.pinnedCAIdentities], path.appending(ATSKey.pinnedCAIdentities), &messages)
        domain.leafIdentities = pinList(
            entry[ATSKey.pinnedLeafIdentities], path.appending(ATSKey.pinnedLeafIdentities), &messages)
        return domain
    }

    /// Parses an identity array. A non-array value, an item that is not a dictionary with a
    /// base64 SHA-256 string, all count as invalid items; the list then pins fewer (possibly zero)
    /// identities, which fails closed, as Apple's parser does.
    private func pinList(_ value: PlistValue?, _ path: KeyPath, _ messages: inout [ConfigMessage]) -> PinList? {
        guard let value else { return nil }
        guard case .array(let items) = value else {
            messages.append(
                ConfigMessage(
                    code: "wrong-type", severity: .error, keyPath: path,
                    message:
                        "\(path.components.last ?? "") is \(article(value.typeName)), not an array; the host is pinned to nothing and every connection fails",
                    fix: "make it an <array> of <dict> with SPKI-SHA256-BASE64"))
            return PinList(digests: [], invalidCount: 1)
        }
        var list = PinList()
        for (index, item) in items.enumerated() {
            let itemPath = path.appending("[\(index)]")
            guard case .dictionary(let fields) = item, case .string(let text)? = fields[ATSKey.spkiSHA256] else {
                list.invalidCount += 1
                messages.append(
                    ConfigMessage(
                        code: "invalid-pin", severity: .error, keyPath: itemPath,
                        message: "item \(index) is not a dictionary with a SPKI-SHA256-BASE64 string",
                        fix: "use <dict><key>SPKI-SHA256-BASE64</key><string>BASE64</string></dict>"))
                continue
            }
            guard let digest = Data(base64Encoded: text), digest.count == 32 else {
                list.invalidCount += 1
                messages.append(
                    ConfigMessage(
                        code: "invalid-pin", severity: .error, keyPath: itemPath.appending(ATSKey.spkiSHA256),
                        message: "'\(text)' is not the base64 of a 32-byte SHA-256 digest",
                        fix:
                            "compute it with: openssl x509 -pubkey -noout -in cert.pem | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"
                    ))
                continue
            }
            list.digests.append(digest)
        }
        return list
    }

    /// Reads a Boolean key with Apple's rules: non-numbers are logged and treated as absent;
    /// numbers are present, YES only when equal to 1.
    private func boolean(
        _ dictionary: [String: PlistValue], _ key: String, _ path: KeyPath, _ messages: inout [ConfigMessage]
    ) -> BooleanSetting {
        guard let value = dictionary[key] else { return .absent }
        switch value {
        case .bool(let flag):
            return .value(flag)
        case .integer(let number):
            let yes = options.integerOneIsYes && number == 1
            messages.append(
                ConfigMessage(
                    code: "integer-boolean", severity: .warning, keyPath: path.appending(key),
                    message: "\(key) is the integer \(number), which ATS reads as \(yes ? "YES" : "NO")",
                    fix: "use <\(yes ? "true" : "false")/>"))
            return .value(yes)
        case .real(let number):
            let yes = options.integerOneIsYes && number == 1
            messages.append(
                ConfigMessage(
                    code: "integer-boolean", severity: .warning, keyPath: path.appending(key),
                    message: "\(key) is the real number \(number), which ATS reads as \(yes ? "YES" : "NO")",
                    fix: "use <\(yes ? "true" : "false")/>"))
            return .value(yes)
        case .string, .date, .data, .array, .dictionary:
            let suggestion: String
            if case .string(let text) = value, ["yes", "true", "1"].contains(text.lowercased()) {
                suggestion = "replace <string>\(text)</string> with <true/>"
            } else {
                suggestion = "use <true/> or <false/>"
            }
            messages.append(
                ConfigMessage(
                    code: "wrong-type", severity: .error, keyPath: path.appending(key),
                    message: "\(key) is \(article(value.typeName)), not a Boolean, so ATS ignores the key entirely",
                    fix: suggestion,
                    appleLog: "App Transport Security value for key \(key) must be a boolean"))
            return .absent
        }
    }

    private func minimumTLS(_ value: PlistValue?, _ path: KeyPath, _ messages: inout [ConfigMessage])
        -> TLSProtocolVersion?
    {
        guard let value else { return nil }
        let key = path.components.last ?? ATSKey.exceptionMinimumTLSVersion
        guard case .string(let text) = value else {
            messages.append(
                ConfigMessage(
                    code: "wrong-type", severity: .error, keyPath: path,
                    message: "\(key) is \(article(value.typeName)), not a string, so the default TLSv1.2 applies",
                    fix: "use <string>TLSv1.2</string> (or TLSv1.0, TLSv1.1, TLSv1.3)",
                    appleLog: "App Transport Security value for key \(key) must be a string"))
            return nil
        }
        guard let version = TLSProtocolVersion(plistString: text) else {
            let guess =
                TLSProtocolVersion.allCases.first { $0.rawValue.lowercased() == text.lowercased() }
                ?? TLSProtocolVersion.allCases.first { text.hasSuffix(String($0.rawValue.suffix(3))) }
            messages.append(
                ConfigMessage(
                    code: "invalid-tls-version", severity: .error, keyPath: path,
                    message:
                        "'\(text)' is not a valid \(key) (valid: TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3; exact case), so the default TLSv1.2 applies",
                    fix: guess.map { "write \($0.rawValue)" } ?? "use one of TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3"))
            return nil
        }
        return version
    }

    private func niapValue(_ value: PlistValue, _ path: KeyPath, _ messages: inout [ConfigMessage]) -> NIAPPackage? {
        let key = path.components.last ?? ""
        guard case .string(let text) = value else {
            messages.append(
                ConfigMessage(
                    code: "wrong-type", severity: .error, keyPath: path,
                    message: "\(key) is \(article(value.typeName)), not a string, so it is ignored",
                    fix: "use <string>FCP_v2.1</string>, recommended or none",
                    appleLog: "App Transport Security value for key \(key) must be a string"))
            return nil
        }
        guard let package = NIAPPackage(rawValue: text) else {
            messages.append(
                ConfigMessage(
                    code: "invalid-niap", severity: .error, keyPath: path,
                    message: "'\(text)' is not a valid \(key) (valid: none, FCP_v2.1, recommended), so it is ignored",
                    fix: "use FCP_v2.1 or recommended"))
            return nil
        }
        return package
    }

    private func legacyNote(_ path: KeyPath, official: String, honoured: Bool) -> ConfigMessage {
        let key = path.components.last ?? ""
        if honoured {
            return ConfigMessage(
                code: "legacy-key", severity: .warning, keyPath: path,
                message: "\(key) is a legacy spelling, honoured as \(official) because --legacy-keys is set",
                fix: "rename it to \(official)")
        }
        return ConfigMessage(
            code: "legacy-key", severity: .warning, keyPath: path,
            message: "\(key) is a legacy spelling that current iOS ignores",
            fix: "rename it to \(official) (or pass --legacy-keys to emulate OSes that honoured it)")
    }
}

/// "a string", "an integer", "an array".
func article(_ noun: String) -> String {
    let vowels: Set<Character> = ["a", "e", "i", "o", "u"]
    return (noun.first.map { vowels.contains($0) } ?? false ? "an " : "a ") + noun
}
