// swift-tools-version:6.0
import PackageDescription

/// An app's networking code and its tests, run under `ats-proxy exec` (see the README's "CI" part):
/// `ats-proxy exec --config Info.plist --allow-violations -- swift test` (each of its two tests expects a
/// violation, which without `--allow-violations` turns the passing run into exit status 3). In your own package,
/// depend on ats-proxy by its repository URL and a version instead of the path.
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
