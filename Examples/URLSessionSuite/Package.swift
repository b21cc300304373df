// swift-tools-version:6.0
import PackageDescription

/// An app's networking code and its tests, run under `ats-proxy exec` (see the README's "CI" part):
/// `ats-proxy exec --config Info.plist -- swift test`. In your own package, depend on ats-proxy by its
/// repository URL and a version instead of the path.
let package = Package(
    name: "URLSessionSuite",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [.package(name: "ats-proxy", path: "../..")],
    targets: [
        .target(name: "AppNetworking"),
        .testTarget(
            name: "AppNetworkingTests",
            dependencies: ["AppNetworking", .product(name: "ATSProxyTesting", package: "ats-proxy")]),
    ]
)
