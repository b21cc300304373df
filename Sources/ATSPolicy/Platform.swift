/// The Apple operating system family being emulated.
public enum PlatformFamily: String, Sendable, Codable, CaseIterable {
    /// iOS and iPadOS (and the iOS Simulator).
    case iOS = "ios"
    /// macOS.
    case macOS = "macos"

    /// The marketing name ("iOS", "macOS").
    public var displayName: String {
        switch self {
        case .iOS: "iOS"
        case .macOS: "macOS"
        }
    }
}

/// The device being emulated: OS family, OS version, and the SDK the app was linked against.
///
/// Several ATS rules are "linked on or after" checks, so the SDK matters as well as the OS.
public struct Platform: Sendable, Hashable, Codable, CustomStringConvertible {
    public let family: PlatformFamily
    public let version: OSVersion
    public let sdk: OSVersion

    /// The default emulation: iOS 18.0 with the iOS 18.0 SDK.
    public static let `default` = Platform(family: .iOS, version: OSVersion(18, 0), sdk: OSVersion(18, 0))

    public init(family: PlatformFamily, version: OSVersion, sdk: OSVersion? = nil) {
        self.family = family
        self.version = version
        self.sdk = sdk ?? version
    }

    /// Parses `ios:18.0`, `macos:15`, `iOS:17.4` (family case-insensitive). The SDK defaults to
    /// the OS version.
    public init?(parsing text: String, sdk: String? = nil) {
        let parts = text.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, let family = PlatformFamily(rawValue: parts[0].lowercased()),
            let version = OSVersion(parsing: parts[1])
        else { return nil }
        var sdkVersion: OSVersion? = nil
        if let sdk {
            guard let parsed = OSVersion(parsing: sdk) else { return nil }
            sdkVersion = parsed
        }
        self.init(family: family, version: version, sdk: sdkVersion)
    }

    /// True when the emulated platform has `feature` (see `PlatformFeature` for the table).
    public func has(_ feature: PlatformFeature) -> Bool {
        let threshold = feature.threshold(for: family)
        guard version >= threshold else { return false }
        if feature.isLinkedOnOrAfter { return sdk >= threshold }
        return true
    }

    public var description: String {
        sdk == version ? "\(family.displayName) \(version)" : "\(family.displayName) \(version) (SDK \(sdk))"
    }
}
