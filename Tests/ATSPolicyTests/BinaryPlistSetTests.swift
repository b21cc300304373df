import Foundation
import Testing

@testable import ATSPolicy

/// A binary plist holding a set crashed Foundation's decoder (found by the info-plist fuzz target): it is refused
/// with an error naming the file instead.
@Suite struct BinaryPlistSetTests {
    /// The fuzzer's input: an Info.plist whose NSAllowsLocalNetworking/NSExceptionDomains array became a set.
    /// Computed: a static `let` holding Data is reported by LeakSanitizer at exit.
    static var withSet: Data {
        Data(
            base64Encoded:
                "YnBsaXN0MDDUAQIDBAUGBwhfEBJDRkJ1bmRsZUV4ZWN1dGFibGVfEBJDRkJ1bmRsZUlOU1Bpbm5lZENBSWRlbnRpdGllc1NWZXJzaW9uXxAWTlNBcHBUcmFuc3BvcnRTZWN1cml0eVpOZXdzUmVhZGVyXxAWY29tLmV4YW1wbGUubmV3c3JlYWRlclQxNi4wwgkKCwxfEBdOU0FsbG93c0xsY2FsTmV0d29ya2luZ18QEk5TRXhjZXB0aW9uRG9tYWlucwnSDQ4PEV8QGGxlZ2FjeS1mZWVkcy5leGFtcGxlLmNvbV8QEW1lZGlhLmV4YW1wbGUubmV00RALXxAiTlNFeGNlcHRpb25BbGxvd3NJbnNlY3VyZUhUVFBMb2Fkc9MSExQVFgtfEBxOU0V4Y2VwdGlvbk1pbmltdW1UTFNWZXJzaW9uXxAhTlNFeGNlcHRpb25SZXF1aXJlc0ZvcndhcmRTZWNyZWN5XxAUTlNJbmNsdWRlc1N1YmRvbWFpbnNXVExTdjEuMQgACAARACYAOwBOAGcAcgCLAJAAlQCvAMQAxQDKAOUA+QD8ASEBKAFHAWsBggGKAAAAAAAAAgEAAAAAAAAAFwAAAAAAAAAAAAAAAAAAAYs="
        )!
    }

    @Test func aBinaryPlistWithASetIsRefusedWithAClearError() {
        #expect(BinaryPlistSetScan.containsSet(Self.withSet))
        #expect(throws: ConfigLoadError.self) {
            try InfoPlistLoader.loadPlist(path: "App/Info.plist", data: Self.withSet, kind: nil, innerPath: nil)
        }
        do {
            _ = try InfoPlistLoader.loadPlist(path: "App/Info.plist", data: Self.withSet, kind: nil, innerPath: nil)
        } catch {
            #expect(error.description.contains("App/Info.plist"))
            #expect(error.description.contains("contains a set"))
        }
    }

    @Test func ordinaryBinaryPlistsHaveNoSet() throws {
        let plist: [String: Any] = [
            "CFBundleIdentifier": "com.example.app",
            "NSAppTransportSecurity": ["NSExceptionDomains": ["a.example": ["NSIncludesSubdomains": true]]],
            "List": [1, 2, 3],
        ]
        let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
        #expect(!BinaryPlistSetScan.containsSet(data))
        #expect(!BinaryPlistSetScan.containsSet(Data("<?xml version=\"1.0\"?><plist></plist>".utf8)))
        #expect(!BinaryPlistSetScan.containsSet(Data("bplist00".utf8)))  // too short to scan: Foundation decides
        _ = try InfoPlistLoader.loadPlist(path: "Info.plist", data: data, kind: nil, innerPath: nil)
    }
}
