// swift-tools-version:6.0
import PackageDescription

/// ats-proxy: an explicit HTTP proxy that enforces Apple's App Transport Security.
/// Layering (see shared/ARCHITECTURE.md): ats-proxy → ATSProxyIO → ATSProxyCore → {ATSPolicy, ATSTLS, ATSHTTP2}.

/// Release builds of the modules on the request path drop the dynamic exclusivity checks: the compiler's
/// static checks still run, and debug builds (the tests) keep the dynamic ones. Measured with
/// `Benchmarks/compare`: the checks (swift_beginAccess and the access set) cost about 1% of the proxy's CPU.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "ats-proxy",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "ats-proxy", targets: ["ats-proxy"]),
        .library(name: "ATSPolicy", targets: ["ATSPolicy"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.19"),
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
        .target(
            name: "ATSPolicy",
            dependencies: [.product(name: "ZIPFoundation", package: "ZIPFoundation")]
        ),
        .target(name: "ATSTLS", dependencies: ["ATSPolicy", "COpenSSL", "COpenSSLShims"], swiftSettings: hotPath),
        .target(name: "ATSHTTP2", dependencies: ["CNGHTTP2"], swiftSettings: hotPath),
        .target(name: "ATSProxyCore", dependencies: ["ATSPolicy", "ATSTLS", "ATSHTTP2"], swiftSettings: hotPath),
        .target(
            name: "ATSProxyIO",
            dependencies: ["ATSProxyCore", "COpenSSLShims", .product(name: "Logging", package: "swift-log")],
            swiftSettings: hotPath
        ),
        .executableTarget(
            name: "ats-proxy",
            dependencies: [
                "ATSPolicy", "ATSTLS", "ATSHTTP2", "ATSProxyCore", "ATSProxyIO",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "ATSPolicyTests", dependencies: ["ATSPolicy"], exclude: ["Golden"]),
        .testTarget(name: "ATSTLSTests", dependencies: ["ATSTLS", "ATSPolicy", "COpenSSL", "COpenSSLShims"]),
        .testTarget(name: "ATSProxyCoreTests", dependencies: ["ATSProxyCore", "ATSPolicy", "ATSTLS"]),
        .testTarget(name: "ATSProxyIOTests", dependencies: ["ATSProxyIO", "ATSProxyCore"]),
        .testTarget(name: "ats-proxyTests", dependencies: ["ATSPolicy", "ATSTLS"], exclude: ["Fixtures"]),
    ]
)

/// libFuzzer targets (see Fuzzing/README.md): declared only when `scripts/fuzz` builds them (ATS_PROXY_FUZZ=1,
/// its own scratch path), so `swift build` and `swift test` never see them. Each is an executable whose entry
/// point is `LLVMFuzzerTestOneInput`; libFuzzer supplies `main`.
if Context.environment["ATS_PROXY_FUZZ"] == "1" {
    package.targets.append(.target(name: "CLibFuzzer", path: "Fuzzing/CLibFuzzer"))
    package.targets.append(
        .target(
            name: "FuzzSupport", dependencies: ["CLibFuzzer", "ATSProxyCore", "ATSPolicy", "ATSTLS", "ATSHTTP2"],
            path: "Fuzzing/Support"))
    for name in ["http1-request", "http1-response", "request-target", "info-plist", "http2-frontend", "tls-hello"] {
        package.targets.append(
            .executableTarget(
                name: "fuzz-\(name)", dependencies: ["FuzzSupport", "ATSProxyCore", "ATSPolicy", "ATSTLS", "ATSHTTP2"],
                path: "Fuzzing/Targets/\(name)"))
    }
}
