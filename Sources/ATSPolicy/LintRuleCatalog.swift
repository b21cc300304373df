/// One kind of finding `ATSLinter` (and the configuration parser it runs) can report: the stable code of
/// `ConfigMessage.code`, a one-line summary and the help a reader needs to act on it. Machine-readable lint
/// outputs (SARIF's `rules`) are built from these.
public struct LintRule: Sendable, Hashable {
    /// The finding's code, e.g. `wildcard-key`.
    public let code: String
    /// What the rule checks, in one line.
    public let summary: String
    /// Why it matters and what to do, in a few sentences.
    public let help: String
}

/// Every rule the linter and the configuration parser can report. A code that is missing here still reaches
/// every output (with a generic description); `LintRuleCatalogTests` keeps the list complete by reading the
/// codes out of the sources.
public enum LintRuleCatalog {
    /// The rules, ordered by code.
    public static let rules: [LintRule] = [
        LintRule(
            code: "aal-ignored", summary: "NSAllowsArbitraryLoads is ignored because a finer-grained key is present",
            help:
                "On iOS 10 / macOS 10.12 and later, NSAllowsArbitraryLoads = YES is ignored as soon as NSAllowsArbitraryLoadsForMedia, NSAllowsArbitraryLoadsInWebContent or NSAllowsLocalNetworking is present, whatever its value. Remove one or the other."
        ),
        LintRule(
            code: "app-review", summary: "A relaxing key that App Review asks to justify",
            help:
                "Keys that relax ATS (arbitrary loads, insecure HTTP exceptions, lower TLS versions) need a justification when the app is submitted. Keep the exception as narrow as the traffic allows; `ats-proxy run --report` prints the smallest dictionary for what the app really loads."
        ),
        LintRule(
            code: "ats-not-dictionary", summary: "NSAppTransportSecurity is not a dictionary",
            help:
                "ATS reads NSAppTransportSecurity only when it is a <dict>; any other type is ignored and full ATS applies. Make it a dictionary."
        ),
        LintRule(
            code: "bad-domain-key", summary: "An exception or pin key is empty or contains white space",
            help: "Such a key never matches a host. Write the bare host name, e.g. api.example.com."),
        LintRule(
            code: "exception-reenables-ats", summary: "An exception entry turns full ATS back on for its host",
            help:
                "Under NSAllowsArbitraryLoads = YES, an NSExceptionDomains entry replaces the global relaxation for its host: without NSExceptionAllowsInsecureHTTPLoads, cleartext to that host is blocked again. Intended if you want ATS there; otherwise add the key."
        ),
        LintRule(
            code: "inert-key", summary: "A key or entry that changes nothing",
            help:
                "The key sets the default, or has no effect where it is (NSIncludesSubdomains on an IP entry, an empty entry where full ATS already applies). Remove it so the dictionary says only what it means."
        ),
        LintRule(
            code: "integer-boolean", summary: "A Boolean key holds an integer",
            help:
                "ATS reads a non-zero integer as YES and zero as NO, but Xcode and other readers may not. Use <true/> or <false/>."
        ),
        LintRule(
            code: "invalid-cidr", summary: "An exception key with '/' is not valid CIDR notation",
            help: "The entry never matches. Write ADDRESS/PREFIX, e.g. 10.0.0.0/8."),
        LintRule(
            code: "invalid-niap", summary: "A NIAP TLS package version ATS does not know",
            help:
                "NSRequiresNIAPTLSPackageVersion (or its exception form) holds an unknown value, which is ignored. Valid values: none, FCP_v2.1, recommended."
        ),
        LintRule(
            code: "invalid-pin", summary: "A pinned identity is not a valid SPKI-SHA256-BASE64 digest",
            help:
                "Each item must be a <dict> with SPKI-SHA256-BASE64 holding the base64 of a 32-byte SHA-256 of the public key (openssl x509 -pubkey -noout -in cert.pem | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)."
        ),
        LintRule(
            code: "invalid-tls-version", summary: "NSExceptionMinimumTLSVersion holds an unknown version",
            help: "An unknown value is ignored and TLS 1.2 applies. Use TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3."),
        LintRule(
            code: "ip-key-old-os", summary: "An IP or CIDR exception key on an OS that may not honour it",
            help:
                "IP and CIDR exception keys are documented from iOS 17 / macOS 14 only. On older systems rely on the IP exemption or another key."
        ),
        LintRule(
            code: "leading-dot-key", summary: "An exception or pin key starts with a dot",
            help: "Such a key never matches. Use the bare domain with NSIncludesSubdomains = YES."),
        LintRule(
            code: "legacy-key", summary: "A legacy (pre-release) spelling of an ATS key",
            help:
                "Older spellings (NSTemporaryException…, NSThirdPartyException…, NSAllowsArbitraryLoadsInMedia) are ignored by current systems (ats-proxy honours them only with --legacy-keys). Rename the key to its official spelling."
        ),
        LintRule(
            code: "local-exception-stricter", summary: "An exception makes a local name stricter than the default",
            help:
                "Local names (no dot, or .local) are exempt from ATS by default; an exception entry without NSExceptionAllowsInsecureHTTPLoads blocks http:// to them. Add the key or remove the entry."
        ),
        LintRule(
            code: "local-networking-no", summary: "An explicit NSAllowsLocalNetworking = NO",
            help:
                "It removes the default exemption for local hosts (http://localhost, LAN addresses are blocked) and cancels NSAllowsArbitraryLoads. Remove the key to keep the default."
        ),
        LintRule(
            code: "misplaced-key", summary: "An ATS key at the Info.plist root",
            help: "ATS reads its keys only inside NSAppTransportSecurity; at the root they do nothing. Move the key."),
        LintRule(
            code: "no-ats", summary: "The Info.plist has no NSAppTransportSecurity dictionary",
            help: "Full ATS applies to every host. This is a note, not a problem."),
        LintRule(
            code: "obsolete-key", summary: "NSRequiresCertificateTransparency on a platform that requires CT anyway",
            help:
                "The platform enforces Certificate Transparency for publicly trusted certificates by itself; the key adds nothing and breaks debugging proxies. Remove it."
        ),
        LintRule(
            code: "pin-empty", summary: "A pinned-identity list is empty",
            help: "A host pinned to nothing fails every connection. Add the identities or remove the list."),
        LintRule(
            code: "pin-nothing", summary: "A pinned-domain entry pins nothing",
            help:
                "The entry has neither NSPinnedCAIdentities nor NSPinnedLeafIdentities, so it has no effect. Add one or remove the entry."
        ),
        LintRule(
            code: "port-in-key", summary: "An exception or pin key includes a port",
            help: "Keys never include ports, so it never matches. Remove the port: an exception applies to every port."),
        LintRule(
            code: "scheme-in-key", summary: "An exception or pin key contains a URL scheme",
            help: "Keys are bare host names, so it never matches. Remove the scheme (and any path)."),
        LintRule(
            code: "tls-floor", summary: "A minimum TLS version below 1.2 where the platform no longer honours it",
            help:
                "On iOS/macOS 26 and later, connections to a server without TLS 1.2 reportedly fail whatever the exception says. Upgrade the server."
        ),
        LintRule(
            code: "tls13-unavailable", summary: "TLS 1.3 is required on a platform without TLS 1.3",
            help: "Every connection to the host fails. Require TLSv1.2 instead."),
        LintRule(
            code: "trailing-dot-key", summary: "An exception or pin key ends with a dot",
            help: "A fully qualified name with a trailing dot may not match the host the app loads. Remove the dot."),
        LintRule(
            code: "undocumented-key", summary: "A key seen in the wild that was never an ATS key",
            help:
                "It does nothing. Use the documented key it was meant to be (NSAllowsLocalNetworking, NSExceptionAllowsInsecureHTTPLoads)."
        ),
        LintRule(
            code: "unknown-key", summary: "A key ATS does not know",
            help: "ATS ignores it. When it looks like a misspelling the finding names the key it was meant to be."),
        LintRule(
            code: "uppercase-key", summary: "An exception key with upper-case letters",
            help: "Exception keys are matched in lower case, so this one never matches. Write it in lower case."),
        LintRule(
            code: "wildcard-key", summary: "An exception or pin key with a wildcard",
            help: "ATS does not support wildcards, so it never matches. Use the domain with NSIncludesSubdomains = YES."
        ),
        LintRule(
            code: "wrong-type", summary: "A key holds a value of the wrong type",
            help: "ATS ignores a value of the wrong type and applies the default. Use the type the key documents."),
    ]

    /// The rule with `code`, if the catalog has it.
    public static func rule(_ code: String) -> LintRule? { rules.first { $0.code == code } }
}
