// swift-tools-version:6.1
import PackageDescription

/// ats-proxy: an explicit HTTP proxy that enforces Apple's App Transport Security.
///
/// Layering (each module sees only those below it; C modules are imported `internal`, so no C type
/// crosses a Swift module boundary):
/// - ats-proxy (the command line) → ATSProxyIO, ATSReport, ATSDiagnose and everything below;
/// - ATSProxyIO: event loops, sockets, resolver, upstream pool → ATSProxyCore, CATSPoll;
/// - ATSReport: report.json/html, JUnit, minimal Info.plist dictionary → ATSProxyCore, ATSPolicy;
/// - ATSDiagnose: the `diagnose` matrix (nscurl --ats-diagnostics) and UpstreamChecker, the blocking upstream check
///   `diagnose`, `verify` and the startup checks use → ATSTLS, ATSPolicy;
/// - ATSAppTrust: AFNetworking's AFSecurityPolicy emulated on real and interception chains (--af-policy), and the core's
///   AppTrustProvider (--challenge, --af-policy while the proxy runs) → ATSTLS, ATSPolicy, ATSProxyCore;
/// - ATSProxyCore: the sans-io proxy (no sockets, no files) → ATSPolicy, ATSTLS, ATSHTTP2 (features such as app trust
///   plug in through protocols it declares);
/// - ATSTLS: the only OpenSSL user → ATSPolicy, COpenSSL, COpenSSLShims;
/// - ATSHTTP2: the only nghttp2 user → CNGHTTP2;
/// - ATSPolicy: pure Swift ATS model and evaluator (no C);
/// - CATSPoll: the epoll/kqueue poller and socket shims in C, apart from OpenSSL.
/// ATSTestSupport (under Tests/) holds helpers shared by test targets; only test targets use it.

/// Release builds of the modules on the request path drop the dynamic exclusivity checks: the compiler's
/// static checks still run, and debug builds (the tests) keep the dynamic ones. Measured with
/// `Benchmarks/compare`: the checks (swift_beginAccess and the access set) cost about 1% of the proxy's CPU.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

/// The version and commit `scripts/version` derives from `git describe`, compiled into `ats-proxy --version` when
/// `make install` or `scripts/package` builds (they set these variables); a plain `swift build`, from a clone or a
/// tarball without `.git`, sets none and `--version` says so. Only letters, digits and `.+-_~` are taken.
let buildInfo: [CSetting] = ["ATS_PROXY_BUILD_VERSION", "ATS_PROXY_BUILD_COMMIT"].compactMap { name in
    guard let value = Context.environment[name], !value.isEmpty,
        value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".+-_~".contains($0)) })
    else { return nil }
    return .define(name, to: "\"\(value)\"")
}

let package = Package(
    name: "ats-proxy",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ats-proxy", targets: ["ats-proxy"]),
        .library(name: "ATSPolicy", targets: ["ATSPolicy"]),
        // For an app's test suite run under `ats-proxy exec`: Foundation only, no unsafe flags in its
        // closure, so a package can depend on it by version (SwiftPM checks only the product's own targets).
        .library(name: "ATSProxyTesting", targets: ["ATSProxyTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.19"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: ["JSON", "YAML"]),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // `ats-proxy mcp`: the Model Context Protocol server (stdio transport).
        .package(url: "https://github.com/modelcontextprotocol/swift-sdk", from: "0.12.1"),
        // `/metrics` on the --web listener.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .systemLibrary(
            name: "COpenSSL",
            path: "Sources/COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .systemLibrary(
            name: "CNGHTTP2",
            path: "Sources/CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"]), .brew(["libnghttp2"])]
        ),
        .target(name: "COpenSSLShims", dependencies: ["COpenSSL"]),
        .target(name: "CATSPoll"),
        .target(name: "CATSBuildInfo", cSettings: buildInfo),
        // Pure: the ATS model, the evaluator, the lint and CFNetwork's text. Reads no files.
        .target(name: "ATSPolicy"),
        // `--config` sources on disk (files, .app bundles, .ipa archives) turned into bytes for ATSPolicy's loader.
        .target(
            name: "ATSConfigFiles",
            dependencies: ["ATSPolicy", .product(name: "ZIPFoundation", package: "ZIPFoundation")]
        ),
        .target(name: "ATSTLS", dependencies: ["ATSPolicy", "COpenSSL", "COpenSSLShims"], swiftSettings: hotPath),
        .target(name: "ATSHTTP2", dependencies: ["CNGHTTP2"], swiftSettings: hotPath),
        .target(
            name: "ATSProxyCore", dependencies: ["ATSPolicy", "ATSTLS", "ATSHTTP2"],
            swiftSettings: hotPath),
        .target(name: "ATSReport", dependencies: ["ATSPolicy", "ATSTLS", "ATSProxyCore"]),
        .target(name: "ATSDiagnose", dependencies: ["ATSPolicy", "ATSTLS"]),
        // App-trust features (--challenge, --af-policy) implement the core's AppTrustProvider: they depend on the core,
        // never the other way round.
        .target(name: "ATSAppTrust", dependencies: ["ATSPolicy", "ATSTLS", "ATSProxyCore"]),
        .target(
            name: "ATSProxyIO",
            dependencies: ["ATSProxyCore", "CATSPoll", .product(name: "Logging", package: "swift-log")],
            swiftSettings: hotPath
        ),
        .target(name: "CTrustOverlay"),
        // posix_spawn for every child process (Foundation's Process.run() crashes now and then on Linux).
        .target(name: "CProcessSpawn"),
        .target(name: "ATSSystemTools", dependencies: ["CTrustOverlay", "CProcessSpawn"]),
        .target(name: "ATSProxyTesting"),
        .target(
            name: "ATSWeb",
            dependencies: [
                "ATSPolicy", "ATSTLS", "ATSProxyCore", "ATSProxyIO",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]),
        .executableTarget(
            name: "ats-proxy",
            dependencies: [
                "ATSPolicy", "ATSConfigFiles", "ATSTLS", "ATSHTTP2", "ATSProxyCore", "ATSProxyIO", "ATSReport",
                "ATSDiagnose", "ATSSystemTools", "ATSWeb", "ATSAppTrust", "CATSBuildInfo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "MCP", package: "swift-sdk"),
            ]
        ),
        // Helpers shared by several test targets (test PKI, in-memory TLS pumps, report fixtures, transcripts of the
        // sans-io core's commands); only test targets depend on it.
        .target(
            name: "ATSTestSupport",
            dependencies: [
                "ATSPolicy", "ATSTLS", "ATSHTTP2", "ATSProxyCore", "ATSSystemTools", "ATSDiagnose", "COpenSSL",
                "COpenSSLShims",
            ],
            path: "Tests/ATSTestSupport"
        ),
        .testTarget(
            name: "ATSPolicyTests",
            dependencies: ["ATSPolicy", "ATSConfigFiles", .product(name: "ZIPFoundation", package: "ZIPFoundation")],
            exclude: ["Golden"]),
        .testTarget(
            name: "ATSTLSTests",
            dependencies: [
                "ATSTLS", "ATSPolicy", "COpenSSL", "COpenSSLShims", "ATSTestSupport", "ATSSystemTools", "ATSDiagnose",
            ]
        ),
        .testTarget(name: "ATSDiagnoseTests", dependencies: ["ATSDiagnose", "ATSTLS", "ATSPolicy", "ATSTestSupport"]),
        .testTarget(
            name: "ATSAppTrustTests",
            dependencies: [
                "ATSAppTrust", "ATSTLS", "ATSPolicy", "ATSDiagnose", "ATSSystemTools", "ATSTestSupport", "COpenSSL",
                "COpenSSLShims",
            ]),
        .testTarget(name: "ATSHTTP2Tests", dependencies: ["ATSHTTP2", "ATSTestSupport"]),
        .testTarget(
            name: "ATSProxyCoreTests",
            dependencies: ["ATSProxyCore", "ATSPolicy", "ATSTLS", "ATSReport", "ATSTestSupport", "ATSAppTrust"]
        ),
        .testTarget(
            name: "ATSReportTests",
            dependencies: [
                "ATSReport", "ATSProxyCore", "ATSPolicy", "ATSConfigFiles", "ATSTLS", "ATSTestSupport",
                "ATSSystemTools",
            ]
        ),
        .testTarget(name: "ATSProxyIOTests", dependencies: ["ATSProxyIO", "ATSProxyCore", "ATSPolicy", "ATSTLS"]),
        .testTarget(
            name: "ats-proxyTests",
            dependencies: [
                "ATSPolicy", "ATSTLS", "ATSTestSupport", "ATSSystemTools", "ats-proxy",
                .product(name: "Yams", package: "Yams"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "ATSSystemToolsTests", dependencies: ["ATSSystemTools"]),
        .testTarget(name: "ATSProxyTestingTests", dependencies: ["ATSProxyTesting", "ATSPolicy"]),
        .testTarget(name: "ATSWebTests", dependencies: ["ATSWeb", "ATSProxyCore", "ATSProxyIO", "ATSPolicy"]),
        // A URLSession client built on ATSProxyTesting, run by the tests as the child of `ats-proxy exec`.
        .executableTarget(
            name: "ats-proxy-urlsession-client", dependencies: ["ATSProxyTesting"], path: "Tests/URLSessionClient"),
    ]
)

/// libFuzzer targets (see scripts/fuzz and the README's "Fuzzing and sanitizers"): declared only when `scripts/fuzz` builds them (ATS_PROXY_FUZZ=1,
/// its own scratch path), so `swift build` and `swift test` never see them. Each is an executable whose entry
/// point is `LLVMFuzzerTestOneInput`; libFuzzer supplies `main`.
if Context.environment["ATS_PROXY_FUZZ"] == "1" {
    package.targets.append(.target(name: "CLibFuzzer", path: "Fuzzing/CLibFuzzer"))
    package.targets.append(
        .target(
            name: "FuzzSupport", dependencies: ["CLibFuzzer", "ATSProxyCore", "ATSPolicy", "ATSTLS", "ATSHTTP2"],
            path: "Fuzzing/Support"))
    for name in [
        "http1-request", "http1-response", "request-target", "info-plist", "http2-frontend", "tls-hello",
        "proxy-session",
    ] {
        package.targets.append(
            .executableTarget(
                name: "fuzz-\(name)", dependencies: ["FuzzSupport", "ATSProxyCore", "ATSPolicy", "ATSTLS", "ATSHTTP2"],
                path: "Fuzzing/Targets/\(name)"))
    }
}
