// swift-tools-version:6.0
import PackageDescription

/// The benchmark's load generator. It talks TLS through plain OpenSSL (its own tiny system-library
/// target) rather than through the main package: the main package exports only the `ats-proxy`
/// executable and the `ATSPolicy` library, neither of which has a TLS client, and depending on the
/// proxy's own TLS code would make the generator share the code under test.
let package = Package(
    name: "LoadGen",
    platforms: [.macOS(.v15)],
    targets: [
        .systemLibrary(
            name: "CLoadGenSSL",
            path: "Sources/CLoadGenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .executableTarget(
            name: "loadgen",
            dependencies: ["CLoadGenSSL"]
        ),
    ]
)
