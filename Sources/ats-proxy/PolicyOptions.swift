import ATSConfigFiles
import ATSPolicy
import ATSTLS
import ArgumentParser
import Foundation

/// Options shared by every command that evaluates a policy: the configuration source, the
/// emulated platform, and the switches for the reference's uncertain points.
struct PolicyOptions: ParsableArguments {
    @Option(
        name: .long,
        help: "Settings file, JSON or YAML (default: $ATS_PROXY_SETTINGS, else ats-proxy.json or .yaml here).")
    var settings: String?

    @Option(name: .long, help: "Info.plist, bare NSAppTransportSecurity plist (XML or binary), .app bundle or .ipa.")
    var config: String?

    @Option(
        name: .long,
        help:
            "Emulated platform, e.g. ios:18.0 or macos:15 (default: the newest modelled, \(Platform.defaultArgument)).")
    var platform: String = Platform.defaultArgument

    @Option(name: .long, help: "SDK the app was linked with (defaults to the platform version).")
    var sdk: String?

    @Flag(
        name: .long,
        help: "Honour the legacy NSThirdParty…, NSTemporary… and NSAllowsArbitraryLoadsInMedia keys as aliases.")
    var legacyKeys = false

    @Flag(
        name: .long,
        help: "Count every integer as NO for Boolean keys (default: integer 1 is YES, as Foundation compares).")
    var strictBooleans = false

    @Option(
        name: .long,
        help: "How far NSIncludesSubdomains reaches in NSExceptionDomains: any (code) or one (current docs).")
    var subdomainDepth: SubdomainDepth = .any

    @Option(
        name: .customLong("local-network"),
        help: "CIDR block treated as local (repeatable; replaces the default loopback, link-local, RFC 1918, fc00::/7)."
    )
    var localNetworks: [String] = []

    @Flag(name: .long, help: "Apply Apple's built-in exceptions (apple.com, ls.apple.com, …).")
    var builtinExceptions = false

    @Option(
        name: [.customLong("tls-floor-26"), .customLong("tls-floor26")],
        help: "On iOS/macOS 26+ (the default platform included), ignore exceptions below TLS 1.2: on or off.")
    var tlsFloor26: Toggle = .on

    @Option(
        name: .long,
        help:
            "System-services profile: require the extended master secret on TLS 1.2 (required, the default) or not (off)."
    )
    var systemServicesEms: SystemServicesProfile.EMSRule = .required

    @Option(
        name: .long,
        help: "Whether an explicit NSAllowsLocalNetworking = NO removes the local exemption: strict or lenient.")
    var localNetworkingNo: LocalNetworkingNo = .strict

    @Option(
        name: .long,
        help: "Whether NSExceptionRequiresForwardSecrecy = NO also drops the ATS key-size check: on or off.")
    var pfsWaiverKeySize: Toggle = .on

    @Option(name: .long, help: "Honour NSRequiresCertificateTransparency: auto (before platform CT), always, never.")
    var requiresCt: EvaluationOptions.RequiresCTKeyMode = .beforePlatformCT

    @Option(
        name: .customLong("trust-override"),
        help: "Host whose app delegate accepts any server trust where ATS permits (repeatable; leading dot = suffix).")
    var trustOverrides: [String] = []

    /// on/off switch values.
    enum Toggle: String, ExpressibleByArgument, CaseIterable {
        case on, off
    }

    /// Values of --local-networking-no.
    enum LocalNetworkingNo: String, ExpressibleByArgument, CaseIterable {
        case strict, lenient
    }

    func validate() throws {
        _ = try resolvedPlatform()
        _ = try resolvedLocalNetworks()
    }

    func resolvedPlatform() throws -> Platform {
        guard let parsed = Platform(parsing: platform, sdk: sdk) else {
            throw ValidationError(
                "--platform must look like ios:18.0 or macos:15 (and --sdk like 18.0); got '\(platform)'")
        }
        if let gap = parsed.skippedReleaseNote {
            throw ValidationError("--platform \(platform): \(gap)")
        }
        return parsed
    }

    func resolvedLocalNetworks() throws -> [CIDRBlock] {
        try localNetworks.map { text in
            guard let block = CIDRBlock(parsing: text) else {
                throw ValidationError("--local-network '\(text)' is not CIDR notation such as 10.0.0.0/8 or fd00::/8")
            }
            return block
        }
    }

    var parseOptions: ParseOptions {
        ParseOptions(legacyKeysAsAliases: legacyKeys, integerOneIsYes: !strictBooleans)
    }

    func evaluationOptions() throws -> EvaluationOptions {
        var options = EvaluationOptions(platform: try resolvedPlatform())
        options.subdomainDepth = subdomainDepth
        let blocks = try resolvedLocalNetworks()
        if !blocks.isEmpty { options.localNetworks = blocks }
        options.builtInAppleExceptions = builtinExceptions
        options.tls12FloorOn26 = tlsFloor26 == .on
        options.explicitLocalNetworkingNoIsStrict = localNetworkingNo == .strict
        options.forwardSecrecyWaiverSkipsKeySize = pfsWaiverKeySize == .on
        options.requiresCTKey = requiresCt
        options.trustOverrideHosts = trustOverrides
        return options
    }

    /// The iOS/macOS 27 system-services profile for the emulated platform and `--system-services-ems`.
    func systemServicesProfile() throws -> SystemServicesProfile {
        SystemServicesProfile(options: try evaluationOptions(), ems: systemServicesEms)
    }

    /// Loads the configuration source, or exits with status 2 and a one-line error.
    func loadSource() throws -> LoadedInfoPlist {
        guard let config else { return .none }
        do {
            return try ConfigSourceReader.load(path: config)
        } catch {
            throw CLIError.configuration(error.description)
        }
    }
}

extension SubdomainDepth: ExpressibleByArgument {}
extension SystemServicesProfile.EMSRule: ExpressibleByArgument {}
extension EvaluationOptions.RequiresCTKeyMode: ExpressibleByArgument {}

/// Errors the CLI reports as one line on stderr with exit status 2.
enum CLIError: Error, CustomStringConvertible {
    case configuration(String)
    case usage(String)

    var description: String {
        switch self {
        case .configuration(let text), .usage(let text): text
        }
    }
}

/// Prints a CLIError as `ats-proxy: error: …` and exits 2; used by every command's `run`.
func exitWithError(_ error: any Error) -> Never {
    FileHandle.standardError.write(Data("ats-proxy: error: \(error)\n".utf8))
    exit(2)
}
