import ATSPolicy
import ATSProxyIO
import ArgumentParser
import Configuration

/// One option that may come from a settings file or an `ATS_PROXY_*` environment variable as
/// well as from the command line. The key in the file is the option's long name (`upstream-ca`),
/// the environment variable is `ATS_PROXY_` plus that name in upper case with `_` for `-`.
///
/// The type of the option's property decides how the value is read (string, integer, number,
/// Boolean, list of strings) and checked (`ExpressibleByArgument.init(argument:)`), so a row of
/// ``all`` is all a new option needs.
struct SettingsKey: Sendable {
    /// Which commands accept the option.
    enum Scope: Sendable {
        /// Every command that evaluates a policy: run, exec, explain, lint, diagnose.
        case policy
        /// The proxy commands only: run and exec.
        case proxy
        /// Where the CA lives: run, exec and every `ca` command.
        case ca
    }

    /// How the value turns into command-line arguments.
    enum Shape: Sendable {
        /// `--name VALUE`.
        case single
        /// `--name` when true, nothing when false.
        case flag
        /// `--name VALUE` once per element.
        case list
    }

    let name: String
    let scope: Scope
    let shape: Shape
    /// Relative values are taken relative to the settings file's directory.
    let isPath: Bool
    /// The type asked of the configuration provider.
    let configType: ConfigType
    /// What a value must be, for error messages ("an integer", "one of on, off").
    let expected: String
    /// Whether one textual value (or list element) is acceptable for the option.
    let accepts: @Sendable (String) -> Bool
    /// The effective value of the option in parsed options, as text.
    let describe: @Sendable (ProxyOptions) -> String

    /// The environment variable that sets this key.
    var environmentName: String { "ATS_PROXY_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }

    /// Repeatable options whose values hold commas themselves (`--challenge '.*=expired,sha1'`, `--af-policy
    /// 'api=public-key,pins=pins/'`): their environment variables separate values with `;`, not `,`.
    static let semicolonSeparatedInEnvironment: Set<String> = ["challenge", "af-policy"]

    /// Every option a settings file or the environment may set. Adding an option to the settings
    /// is one line here; the name is the option's long name.
    static let all: [SettingsKey] = [
        .init("config", .policy, \.policy.config, isPath: true),
        .init("platform", .policy, \.policy.platform),
        .init("sdk", .policy, \.policy.sdk),
        .init("legacy-keys", .policy, \.policy.legacyKeys),
        .init("strict-booleans", .policy, \.policy.strictBooleans),
        .init("subdomain-depth", .policy, \.policy.subdomainDepth),
        .init("local-network", .policy, \.policy.localNetworks),
        .init("builtin-exceptions", .policy, \.policy.builtinExceptions),
        .init("tls-floor-26", .policy, \.policy.tlsFloor26),
        .init("system-services-ems", .policy, \.policy.systemServicesEms),
        .init("local-networking-no", .policy, \.policy.localNetworkingNo),
        .init("pfs-waiver-key-size", .policy, \.policy.pfsWaiverKeySize),
        .init("requires-ct", .policy, \.policy.requiresCt),
        .init("trust-override", .policy, \.policy.trustOverrides),
        .init("ca-dir", .ca, \.ca.caDir, isPath: true),
        .init("ca-cert", .ca, \.ca.caCert, isPath: true),
        .init("ca-key", .ca, \.ca.caKey, isPath: true),
        .init("ca-key-type", .ca, \.ca.caKeyType),
        .init("listen", .proxy, \.listen),
        .init("allow-client", .proxy, \.allowClients),
        .init("allow-local-targets", .proxy, \.allowLocalTargets),
        .init("max-connections", .proxy, \.maxConnections),
        .init("mode", .proxy, \.mode),
        .init("cleartext", .proxy, \.cleartext),
        .init("tunnel-unknown", .proxy, \.tunnelUnknown),
        .init("proxy-auth", .proxy, \.proxyAuth),
        .init("source", .proxy, \.source),
        .init("upgrade-port", .proxy, \.upgradePort),
        .init("passthrough", .proxy, \.passthrough),
        .init("intercept-pinned", .proxy, \.interceptPinned),
        .init("challenge", .proxy, \.challenge),
        .init("challenge-every", .proxy, \.challengeEvery),
        .init("af-policy", .proxy, \.afPolicy),
        .init("ignore-hosts", .proxy, \.ignoreHosts),
        .init("allow-hosts", .proxy, \.allowHosts),
        .init("system-services-hosts", .proxy, \.systemServicesHosts),
        .init("ignore-background", .proxy, \.ignoreBackground),
        .init("upstream-proxy", .proxy, \.upstreamProxy),
        .init("http2", .proxy, \.http2),
        .init("diagnostics", .proxy, \.diagnostics),
        .init("log-format", .proxy, \.logFormat),
        .init("log-file", .proxy, \.logFile, isPath: true),
        .init("log-secrets", .proxy, \.logSecrets),
        .init("resolve", .proxy, \.resolve),
        .init("hosts-file", .proxy, \.hostsFile, isPath: true),
        .init("upstream-ca", .proxy, \.upstreamCa, isPath: true),
        .init("ct-log-list", .proxy, \.ctLogList, isPath: true),
        .init("ct-max-age", .proxy, \.ctMaxAge),
        .init("header-timeout", .proxy, \.headerTimeout),
        .init("idle-timeout", .proxy, \.idleTimeout),
        .init("exchange-timeout", .proxy, \.exchangeTimeout),
        .init("connect-timeout", .proxy, \.connectTimeout),
        .init("loops", .proxy, \.loops),
        .init("event-loop", .proxy, \.eventLoop),
        .init("report", .proxy, \.report, isPath: true),
        .init("fail-on-violations", .proxy, \.failOnViolations),
        .init("quiet", .proxy, \.quiet),
        .init("grace-period", .proxy, \.gracePeriod),
        .init("upstream-idle-timeout", .proxy, \.upstreamIdleTimeout),
        .init("system-proxy", .proxy, \.systemProxyOptions.systemProxy),
        .init("system-proxy-service", .proxy, \.systemProxyOptions.systemProxyServices),
        .init("web", .proxy, \.observe.web),
        .init("web-flows", .proxy, \.observe.webFlows),
        .init("har", .proxy, \.observe.har, isPath: true),
        .init("capture-bodies", .proxy, \.observe.captureBodies),
        .init("keylog", .proxy, \.observe.keylog, isPath: true),
        .init("baseline", .proxy, \.ci.baseline, isPath: true),
    ]

    /// The row named `name`, if any.
    static func named(_ name: String) -> SettingsKey? { all.first { $0.name == name } }

    /// The key name closest to a misspelt `name` (edit distance 3 at most), for "did you mean".
    static func suggestion(for name: String) -> String? {
        Suggestion.closest(to: name, in: all.map(\.name))
    }

    /// `ATS_PROXY_*` variables that are not settings but are read or exported by ats-proxy itself (`exec`
    /// exports the first four to its command).
    static let otherEnvironmentNames: Set<String> = [
        "ATS_PROXY_URL", "ATS_PROXY_CA_BUNDLE", "ATS_PROXY_TRUST_OVERLAY", "ATS_PROXY_CA_CERT",
        SettingsResolver.fileVariable, "ATS_PROXY_STATE_DIR", "ATS_PROXY_UPSTREAM_PROXY_AUTH",
    ]

    /// Checks beyond the option's type, the same ones the command's `validate()` makes, so that a bad value from
    /// a settings file or a variable is reported with its source instead of as a flag the user never typed.
    static let formats: [String: (expected: String, accepts: @Sendable (String) -> Bool)] = [
        "listen": ("HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080)", { ListenAddress(parsing: $0) != nil }),
        "web": ("HOST:PORT (e.g. 127.0.0.1:8081)", { ListenAddress(parsing: $0) != nil }),
        "diagnostics": ("0, 1, 2 or 3", { ["0", "1", "2", "3"].contains($0) }),
        "http2": (HTTP2Setting.choices, { HTTP2Setting(rawValue: $0) != nil }),
        "source": (SourceOption.choices, { SourceOption(rawValue: $0) != nil }),
    ]
}

/// "Did you mean" for names: the candidate that differs only in case, or the one within edit distance 3.
enum Suggestion {
    static func closest(to name: String, in candidates: [String]) -> String? {
        if let same = candidates.first(where: { $0.lowercased() == name.lowercased() }) { return same }
        let scored = candidates.map { ($0, editDistance($0.lowercased(), name.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= 3 else { return nil }
        return best.0
    }
}

extension SettingsKey {
    /// An option with one value of an argument type (string, number, enumeration).
    init<Value: ExpressibleByArgument>(
        _ name: String, _ scope: Scope, _ path: Swift.KeyPath<ProxyOptions, Value> & Sendable, isPath: Bool = false
    ) {
        let format = Self.formats[name]
        self.init(
            name: name, scope: scope, shape: .single, isPath: isPath, configType: Self.configType(Value.self),
            expected: format?.expected ?? Self.expected(Value.self),
            accepts: { Value(argument: $0) != nil && format?.accepts($0) != false },
            describe: { Self.text($0[keyPath: path]) })
    }

    /// An optional option with one value (no default).
    init<Value: ExpressibleByArgument>(
        _ name: String, _ scope: Scope, _ path: Swift.KeyPath<ProxyOptions, Value?> & Sendable, isPath: Bool = false
    ) {
        let format = Self.formats[name]
        self.init(
            name: name, scope: scope, shape: .single, isPath: isPath, configType: Self.configType(Value.self),
            expected: format?.expected ?? Self.expected(Value.self),
            accepts: { Value(argument: $0) != nil && format?.accepts($0) != false },
            describe: { options in
                guard let value = options[keyPath: path] else { return "(none)" }
                return Self.secretKeys.contains(name) ? Self.hidingPassword(Self.text(value)) : Self.text(value)
            })
    }

    /// Keys whose value holds a password: `settings show` prints the user only.
    static let secretKeys: Set<String> = ["proxy-auth"]

    /// `user X, password hidden` for `user:password`.
    static func hidingPassword(_ value: String) -> String {
        "user \(value.prefix { $0 != ":" }), password hidden"
    }

    /// A repeatable option.
    init<Value: ExpressibleByArgument>(
        _ name: String, _ scope: Scope, _ path: Swift.KeyPath<ProxyOptions, [Value]> & Sendable, isPath: Bool = false
    ) {
        let format = Self.formats[name]
        self.init(
            name: name, scope: scope, shape: .list, isPath: isPath, configType: .stringArray,
            expected: format.map { "\($0.expected), or a list of them" } ?? "a string or a list of strings",
            accepts: { Value(argument: $0) != nil && format?.accepts($0) != false },
            describe: { options in
                let values = options[keyPath: path].map(Self.text)
                return values.isEmpty ? "(none)" : values.joined(separator: ", ")
            })
    }

    /// An on/off flag.
    init(_ name: String, _ scope: Scope, _ path: Swift.KeyPath<ProxyOptions, Bool> & Sendable) {
        self.init(
            name: name, scope: scope, shape: .flag, isPath: false, configType: .bool, expected: "true or false",
            accepts: { _ in true }, describe: { String($0[keyPath: path]) })
    }

    private static func configType<Value>(_ type: Value.Type) -> ConfigType {
        if type == Int.self { return .int }
        if type == Double.self { return .double }
        return .string
    }

    private static func expected<Value: ExpressibleByArgument>(_ type: Value.Type) -> String {
        if type == Int.self { return "an integer" }
        if type == Double.self { return "a number" }
        let choices = Value.allValueStrings
        return choices.isEmpty ? "a string" : "one of " + choices.joined(separator: ", ")
    }

    /// A value as the command line would spell it: raw values for enumerations.
    static func text(_ value: some Any) -> String {
        if let raw = value as? any RawRepresentable, let string = raw.rawValue as? String { return string }
        if let double = value as? Double, double == double.rounded(), abs(double) < 1e15 { return String(Int(double)) }
        return String(describing: value)
    }
}
