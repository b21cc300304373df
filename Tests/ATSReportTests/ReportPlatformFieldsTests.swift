import ATSPolicy
import ATSTLS
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// The negotiated key-exchange group and the system-services verdict in the session report.
@Suite("Session report: key-exchange group and system-services verdict")
struct ReportPlatformFieldsTests {
    static func record(_ url: String, group: String?, systemServices: SystemServicesVerdict?) -> RequestRecord {
        var tls = ReportFixtures.tls("TLSv1.2", cipher: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", keyExchange: "ECDHE")
        if let group { tls["group"] = group }
        return ReportFixtures.record(url, tls: tls).updating { $0.systemServices = systemServices }
    }

    @Test func theGroupIsPartOfEachTLSSetAndTheHTMLAndJUnit() throws {
        let report = ReportFixtures.report([
            Self.record("https://a.example.com/1", group: "x25519", systemServices: nil),
            Self.record("https://a.example.com/2", group: "secp256r1", systemServices: nil),
            Self.record("https://a.example.com/3", group: "x25519", systemServices: nil),
        ])
        let document = report.document()
        let host = try #require(document.hosts.first)
        #expect(host.tls.map(\.group) == ["x25519", "secp256r1"])
        #expect(host.tls.map(\.count) == [2, 1])
        #expect(host.systemServices == nil)
        #expect(ReportHTMLWriter.render(document).contains("group secp256r1"))
    }

    @Test func aFailingSystemServicesVerdictWinsAndIsKeptApartFromTheAppsVerdict() throws {
        let platform = Platform(parsing: "ios:27.0")!
        let pass = SystemServicesVerdict(platform: platform, reasons: [])
        let fail = SystemServicesVerdict(
            platform: platform, reasons: ["the server did not use the extended master secret"])
        let report = ReportFixtures.report([
            Self.record("https://mdm.example.com/1", group: "x25519", systemServices: pass),
            Self.record("https://mdm.example.com/2", group: "x25519", systemServices: fail),
            Self.record("https://mdm.example.com/3", group: "x25519", systemServices: pass),
        ])
        let document = report.document()
        let host = try #require(document.hosts.first)
        #expect(host.systemServices == fail)
        #expect(host.status == .ok)
        #expect(host.violations == 0)
        let html = ReportHTMLWriter.render(document)
        #expect(html.contains("would fail for device enrolment and the other system services on iOS 27.0"))
        let data = try JSONEncoder().encode(document)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let hosts = try #require(json["hosts"] as? [[String: Any]])
        let verdict = try #require(hosts.first?["systemServices"] as? [String: Any])
        #expect(verdict["outcome"] as? String == "fail")
    }
}
