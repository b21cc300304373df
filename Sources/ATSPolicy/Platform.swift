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

    /// The default emulation: the newest iOS the platform table models (`PlatformFeature`), with its own SDK.
    /// Today iOS 27.0 with the iOS 27.0 SDK; older systems stay available through `--platform`.
    public static let `default` = Platform(family: .iOS, version: OSVersion(27, 0), sdk: OSVersion(27, 0))

    /// `--platform`'s spelling of the default (`ios:27.0`).
    public static let defaultArgument = "\(Platform.default.family.rawValue):\(Platform.default.version)"

    /// True when this is the default emulation (same family, OS and SDK).
    public var isDefault: Bool { self == .default }

    /// The platform followed by "(default)" when it is the default emulation, for banners and
    /// explanations: `iOS 27.0 (default)`.
    public var labelled: String { isDefault ? "\(self) (default)" : description }

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

    /// Why this version never shipped, or nil: Apple went from iOS 18 / macOS 15 straight to 26 (2025), so
    /// iOS 19–25 and macOS 16–25 do not exist and asking for one is almost certainly a typo for 26.
    public var skippedReleaseNote: String? {
        let (lastBefore, skipped): (Int, ClosedRange<Int>) =
            switch family {
            case .iOS: (18, 19...25)
            case .macOS: (15, 16...25)
            }
        guard skipped.contains(version.major) || skipped.contains(sdk.major) else { return nil }
        return
            "\(family.displayName) \(skipped.lowerBound)–\(skipped.upperBound) never existed: after \(family.displayName) "
            + "\(lastBefore) came \(family.displayName) 26 (e.g. \(family.rawValue):26.0)"
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
