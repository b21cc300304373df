import ATSConfigFiles
import Foundation
import Testing
import ZIPFoundation

@testable import ATSPolicy

// InfoPlistLoader with fixtures written by the tests into a fresh temporary directory: XML and
// binary Info.plists and bare ATS dictionaries, .app bundles, .ipa archives, and bad inputs.

/// A temporary directory removed when the value is dropped.
final class FixtureDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ats-policy-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// Writes `data` at `relative` (creating parent directories) and returns the full path.
    @discardableResult
    func write(_ relative: String, _ data: Data) throws -> String {
        let file = url.appendingPathComponent(relative)
        try FileManager.default.createDirectory(
            at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file)
        return file.path
    }

    /// Writes a zip archive at `relative` holding `entries` (path → bytes; a path ending in `/`
    /// is a directory).
    @discardableResult
    func zip(_ relative: String, _ entries: [(String, Data)]) throws -> String {
        let file = url.appendingPathComponent(relative)
        let archive = try Archive(url: file, accessMode: .create)
        for (path, data) in entries {
            if path.hasSuffix("/") {
                try archive.addEntry(with: path, type: .directory, uncompressedSize: Int64(0)) { _, _ in Data() }
            } else {
                try archive.addEntry(
                    with: path, type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate
                ) { position, size in
                    data.subdata(in: Int(position)..<Int(position) + size)
                }
            }
        }
        return file.path
    }
}

/// Serialises a Foundation property list.
func plistData(_ object: Any, _ format: PropertyListSerialization.PropertyListFormat) throws -> Data {
    try PropertyListSerialization.data(fromPropertyList: object, format: format, options: 0)
}

/// A realistic Info.plist with an ATS dictionary using several value types.
private var infoPlist: [String: Any] {
    let exceptionDomains: [String: Any] = [
        "example.com": ["NSExceptionAllowsInsecureHTTPLoads": true, "NSExceptionMinimumTLSVersion": "TLSv1.1"],
        "strict.example.com": [String: Any](),
    ]
    let ats: [String: Any] = [
        "NSAllowsArbitraryLoads": true, "NSAllowsLocalNetworking": 1, "NSExceptionDomains": exceptionDomains,
    ]
    return [
        "CFBundleExecutable": "Demo", "CFBundleIdentifier": "com.example.demo", "MinimumOSVersion": "15.0",
        "UIRequiredDeviceCapabilities": ["arm64"], "NSAppTransportSecurity": ats,
    ]
}

/// A bare NSAppTransportSecurity dictionary.
private var bareATS: [String: Any] {
    [
        "NSAllowsArbitraryLoadsInWebContent": true,
        "NSExceptionDomains": ["legacy.example": ["NSExceptionAllowsInsecureHTTPLoads": true]],
    ]
}

/// Deterministic pseudo-random bytes (no dependence on the system generator).
private func noise(_ count: Int, seed: UInt64) -> Data {
    var state = seed
    return Data(
        (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        })
}

private func evaluate(_ loaded: LoadedInfoPlist, _ url: String) -> ATSDecision {
    let configuration = ATSConfigurationParser().parse(loaded.atsValue)
    return ATSEvaluator(configuration: configuration, options: options()).evaluate(target(url))
}

@Suite("InfoPlistLoader with generated fixtures")
struct LoaderTests {
    @Test(
        "full Info.plist, XML and binary",
        arguments: [
            (PropertyListSerialization.PropertyListFormat.xml, "XML"), (.binary, "binary"),
        ] as [(PropertyListSerialization.PropertyListFormat, String)])
    func fullInfoPlist(_ format: PropertyListSerialization.PropertyListFormat, _ name: String) throws {
        let fixtures = try FixtureDirectory()
        let path = try fixtures.write("Info.plist", plistData(infoPlist, format))
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .infoPlist)
        #expect(loaded.format == name)
        #expect(loaded.path == path)
        #expect(loaded.processName == "Demo")
        #expect(loaded.minimumOSVersion == OSVersion(15, 0))
        #expect(loaded.misplacedATSKeys.isEmpty)
        guard case .dictionary(let ats)? = loaded.atsValue else {
            Issue.record("no ATS dictionary")
            return
        }
        // Plist types survive: <true/> stays a Boolean, <integer>1</integer> an integer.
        #expect(ats[keyAAL] == yes)
        #expect(ats[keyLocal] == .integer(1))
        let configuration = ATSConfigurationParser().parse(loaded.atsValue)
        #expect(configuration.allowsArbitraryLoads == .value(true))
        #expect(configuration.allowsLocalNetworking == .value(true))
        #expect(configuration.exceptionDomains["example.com"]?.minimumTLSVersion == .tls11)
        #expect(configuration.exceptionDomains["strict.example.com"] != nil)
        #expect(evaluate(loaded, "http://example.com/").outcome == .cleartextAllowed)
        #expect(evaluate(loaded, "http://strict.example.com/").outcome == .cleartextBlocked)
        // LOCAL (integer 1) is present, so NSAllowsArbitraryLoads is cancelled for other hosts.
        #expect(evaluate(loaded, "http://other.example/").outcome == .cleartextBlocked)
    }

    @Test("hand-written XML keeps <string>, <integer> and <true/> apart")
    func handWrittenXML() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
                <key>CFBundleName</key>
                <string>Hand</string>
                <key>NSAppTransportSecurity</key>
                <dict>
                    <key>NSAllowsArbitraryLoads</key>
                    <string>YES</string>
                    <key>NSAllowsArbitraryLoadsForMedia</key>
                    <integer>2</integer>
                    <key>NSAllowsArbitraryLoadsInWebContent</key>
                    <true/>
                    <key>NSAllowsLocalNetworking</key>
                    <false/>
                </dict>
            </dict>
            </plist>
            """
        let fixtures = try FixtureDirectory()
        let path = try fixtures.write("Hand.plist", Data(xml.utf8))
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .infoPlist)
        #expect(loaded.processName == "Hand")
        let expected: PlistValue = dict([keyAAL: .string("YES"), keyMedia: .integer(2), keyWeb: yes, keyLocal: no])
        #expect(loaded.atsValue == expected)
        let configuration = ATSConfigurationParser().parse(loaded.atsValue)
        #expect(
            configuration.messages.compactMap(\.appleLog) == [
                "App Transport Security value for key NSAllowsArbitraryLoads must be a boolean"
            ])
        #expect(configuration.allowsArbitraryLoadsForMedia == .value(false))
        #expect(configuration.allowsLocalNetworking == .value(false))
    }

    @Test(
        "bare ATS dictionary, XML and binary",
        arguments: [PropertyListSerialization.PropertyListFormat.xml, .binary])
    func bareDictionary(_ format: PropertyListSerialization.PropertyListFormat) throws {
        let fixtures = try FixtureDirectory()
        let path = try fixtures.write("ats.plist", plistData(bareATS, format))
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .atsDictionary)
        #expect(loaded.infoPlist == nil)
        #expect(loaded.misplacedATSKeys.isEmpty)
        let configuration = ATSConfigurationParser().parse(loaded.atsValue)
        #expect(configuration.allowsArbitraryLoadsInWebContent == .value(true))
        #expect(configuration.exceptionDomains["legacy.example"]?.allowsInsecureHTTPLoads == true)
        #expect(evaluate(loaded, "http://legacy.example/").outcome == .cleartextAllowed)
    }

    @Test("an empty dictionary means full ATS", arguments: [PropertyListSerialization.PropertyListFormat.xml, .binary])
    func emptyDictionary(_ format: PropertyListSerialization.PropertyListFormat) throws {
        let fixtures = try FixtureDirectory()
        let path = try fixtures.write("empty.plist", plistData([String: Any](), format))
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(evaluate(loaded, "http://example.com/").outcome == .cleartextBlocked)
        #expect(evaluate(loaded, "https://example.com/").requirements.atsGoverned)
    }

    @Test("an Info.plist without NSAppTransportSecurity means full ATS")
    func infoPlistWithoutATS() throws {
        let fixtures = try FixtureDirectory()
        let path = try fixtures.write("Info.plist", plistData(["CFBundleIdentifier": "com.example.plain"], .xml))
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .infoPlist)
        #expect(loaded.atsValue == nil)
        #expect(evaluate(loaded, "http://example.com/").outcome == .cleartextBlocked)
    }

    @Test("ATS keys at the Info.plist root are reported as misplaced and do nothing")
    func misplacedKeys() throws {
        let fixtures = try FixtureDirectory()
        let root: [String: Any] = [
            "CFBundleIdentifier": "com.example.misplaced", "NSAllowsArbitraryLoads": true,
            "NSExceptionDomains": ["example.com": ["NSExceptionAllowsInsecureHTTPLoads": true]],
        ]
        let path = try fixtures.write("Info.plist", plistData(root, .binary))
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .infoPlist)
        #expect(loaded.misplacedATSKeys == ["NSAllowsArbitraryLoads", "NSExceptionDomains"])
        #expect(loaded.atsValue == nil)
        #expect(evaluate(loaded, "http://example.com/").outcome == .cleartextBlocked)
    }

    @Test("an .app bundle directory (iOS layout)")
    func iOSAppBundle() throws {
        let fixtures = try FixtureDirectory()
        try fixtures.write("Demo.app/Info.plist", plistData(infoPlist, .binary))
        try fixtures.write("Demo.app/Demo", Data([0xCF, 0xFA, 0xED, 0xFE]))
        let path = fixtures.url.appendingPathComponent("Demo.app").path
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .appBundle)
        #expect(loaded.innerPath == "Info.plist")
        #expect(loaded.processName == "Demo")
        #expect(evaluate(loaded, "http://example.com/").outcome == .cleartextAllowed)
    }

    @Test("an .app bundle directory (macOS layout)")
    func macOSAppBundle() throws {
        let fixtures = try FixtureDirectory()
        try fixtures.write("Mac.app/Contents/Info.plist", plistData(infoPlist, .xml))
        let path = fixtures.url.appendingPathComponent("Mac.app").path
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .appBundle)
        #expect(loaded.innerPath == "Contents/Info.plist")
        #expect(ATSConfigurationParser().parse(loaded.atsValue).allowsArbitraryLoads == .value(true))
    }

    @Test(
        "an .ipa archive reads Payload/*.app/Info.plist, not nested bundles",
        arguments: [PropertyListSerialization.PropertyListFormat.xml, .binary])
    func ipa(_ format: PropertyListSerialization.PropertyListFormat) throws {
        let fixtures = try FixtureDirectory()
        let framework: [String: Any] = [
            "CFBundleIdentifier": "com.example.framework",
            "NSAppTransportSecurity": ["NSAllowsArbitraryLoads": false],
        ]
        let path = try fixtures.zip(
            "Demo.ipa",
            [
                ("Payload/", Data()), ("Payload/Demo.app/", Data()),
                ("Payload/Demo.app/Frameworks/Kit.framework/Info.plist", try plistData(framework, format)),
                ("Payload/Demo.app/Info.plist", try plistData(infoPlist, format)),
                ("Payload/Demo.app/Demo", Data([0xCF, 0xFA, 0xED, 0xFE])),
                ("iTunesMetadata.plist", try plistData(["itemName": "Demo"], .xml)),
            ])
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .ipa)
        #expect(loaded.innerPath == "Payload/Demo.app/Info.plist")
        #expect(loaded.processName == "Demo")
        #expect(loaded.format == (format == .binary ? "binary" : "XML"))
        #expect(evaluate(loaded, "http://example.com/").outcome == .cleartextAllowed)
    }

    @Test("a zip without the .ipa extension is still read as an archive")
    func ipaWithoutExtension() throws {
        let fixtures = try FixtureDirectory()
        let path = try fixtures.zip("build.zip", [("Payload/Demo.app/Info.plist", try plistData(infoPlist, .xml))])
        let loaded = try ConfigSourceReader.load(path: path)
        #expect(loaded.kind == .ipa)
    }
}

/// A bad input and how to create it inside a fixture directory (returns the path to load).
struct BadInput: Sendable, CustomTestStringConvertible {
    let label: String
    let make: @Sendable (FixtureDirectory) throws -> String

    var testDescription: String { label }
}

private let badInputs: [BadInput] = [
    BadInput(label: "missing file") { $0.url.appendingPathComponent("nope/Info.plist").path },
    BadInput(label: "empty file") { try $0.write("empty.plist", Data()) },
    BadInput(label: "plain text") { try $0.write("notes.txt", Data("hello, this is not a plist\n".utf8)) },
    BadInput(label: "JSON") { try $0.write("config.json", Data(#"{"NSAllowsArbitraryLoads": true}"#.utf8)) },
    BadInput(label: "random bytes") { try $0.write("random.bin", noise(4096, seed: 42)) },
    BadInput(label: "random bytes named .plist") { try $0.write("random.plist", noise(512, seed: 7)) },
    BadInput(label: "random bytes named .ipa") { try $0.write("random.ipa", noise(2048, seed: 9)) },
    BadInput(label: "truncated binary plist (first half)") { fixtures in
        let data = try plistData(infoPlist, .binary)
        return try fixtures.write("half.plist", data.prefix(data.count / 2))
    },
    BadInput(label: "truncated binary plist (last half)") { fixtures in
        let data = try plistData(infoPlist, .binary)
        return try fixtures.write("tail.plist", data.suffix(data.count / 2))
    },
    BadInput(label: "binary plist header then garbage") { fixtures in
        try fixtures.write("garbage.plist", Data("bplist00".utf8) + noise(200, seed: 3))
    },
    BadInput(label: "truncated XML plist") { fixtures in
        let data = try plistData(infoPlist, .xml)
        return try fixtures.write("half.xml", data.prefix(data.count / 2))
    },
    BadInput(label: "root is an array (XML)") { try $0.write("array.plist", plistData(["a", "b"], .xml)) },
    BadInput(label: "root is an array (binary)") { try $0.write("array.bplist", plistData([1, 2], .binary)) },
    BadInput(label: "root is a string") { try $0.write("string.plist", plistData("NSAppTransportSecurity", .xml)) },
    BadInput(label: ".ipa without an app") { fixtures in
        try fixtures.zip("NoApp.ipa", [("Payload/", Data()), ("README.txt", Data("no app".utf8))])
    },
    BadInput(label: ".ipa with Info.plist outside Payload/*.app") { fixtures in
        try fixtures.zip("Flat.ipa", [("Info.plist", try plistData(infoPlist, .xml))])
    },
    BadInput(label: ".ipa whose Info.plist is not a plist") { fixtures in
        try fixtures.zip("Broken.ipa", [("Payload/Demo.app/Info.plist", noise(300, seed: 5))])
    },
    BadInput(label: ".ipa whose Info.plist root is an array") { fixtures in
        try fixtures.zip("Array.ipa", [("Payload/Demo.app/Info.plist", try plistData(["x"], .binary))])
    },
    BadInput(label: "zip magic then garbage") { fixtures in
        try fixtures.write("fake.ipa", Data([0x50, 0x4B, 0x03, 0x04]) + noise(100, seed: 11))
    },
    BadInput(label: "truncated .ipa") { fixtures in
        let path = try fixtures.zip("Whole.ipa", [("Payload/Demo.app/Info.plist", try plistData(infoPlist, .xml))])
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try fixtures.write("Cut.ipa", data.prefix(data.count / 2))
    },
    BadInput(label: "directory without Info.plist") { fixtures in
        try fixtures.write("Empty.app/readme", Data("x".utf8))
        return fixtures.url.appendingPathComponent("Empty.app").path
    },
    BadInput(label: ".app whose Info.plist is truncated") { fixtures in
        let data = try plistData(infoPlist, .binary)
        try fixtures.write("Cut.app/Info.plist", data.prefix(data.count / 3))
        return fixtures.url.appendingPathComponent("Cut.app").path
    },
]

@Suite("InfoPlistLoader bad inputs")
struct LoaderErrorTests {
    @Test("each bad input gives a ConfigLoadError that starts with the path", arguments: badInputs)
    func badInput(_ input: BadInput) throws {
        let fixtures = try FixtureDirectory()
        let path = try input.make(fixtures)
        do {
            let loaded = try ConfigSourceReader.load(path: path)
            Issue.record("loaded \(loaded.summary) instead of failing")
        } catch {
            #expect(error.path == path)
            #expect(error.description.hasPrefix(path + ": "))
            #expect(!error.reason.isEmpty)
            #expect(!error.description.contains("\n"))
        }
    }

    @Test("the reasons name what is wrong")
    func reasons() throws {
        let fixtures = try FixtureDirectory()
        func reason(_ path: String) -> String {
            do {
                _ = try ConfigSourceReader.load(path: path)
                return "loaded"
            } catch {
                return error.reason
            }
        }
        #expect(reason(fixtures.url.appendingPathComponent("missing.plist").path).contains("no such file"))
        #expect(reason(try fixtures.write("e.plist", Data())).contains("empty"))
        #expect(reason(try fixtures.write("a.plist", plistData(["x"], .xml))).contains("array"))
        let noApp = try fixtures.zip("n.ipa", [("README.txt", Data("x".utf8))])
        #expect(reason(noApp).contains("Payload/*.app/Info.plist"))
        let binary = try plistData(infoPlist, .binary)
        #expect(reason(try fixtures.write("t.plist", binary.prefix(binary.count / 2))).contains("binary"))
    }
}
