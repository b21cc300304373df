import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// Every route a load takes to the proxy (`ProxyRoute`) reaches the report: the hosts' `routes`, each verdict's
/// `exampleRoute` (report.json, valid against the schema), the HTML and the JUnit XML.
@Suite struct SessionReportRouteTests {
    typealias F = ReportFixtures

    /// One record per route, each to a host of its own.
    static let routed: [(ProxyRoute, RequestRecord)] = ProxyRoute.allCases.map { route in
        let host = "\(route.rawValue.lowercased().replacingOccurrences(of: "+", with: "-")).example.com"
        let record: RequestRecord
        switch route {
        case .absoluteForm, .connectHTTP, .connectH2C, .socks5HTTP, .socks5H2C, .tlsAbsoluteForm, .tlsConnectHTTP,
            .tlsConnectH2C:
            record = F.record("http://\(host)/", .blockedCleartext, error: -1022, rule: "No exception entry")
        case .connectTLS, .connect, .socks5TLS, .socks5, .socks4, .tlsConnect, .tlsConnectTLS:
            record = F.record("https://\(host)/", tls: F.tls())
        case .connectRaw, .socks5Raw, .tlsConnectRaw:
            record = F.record("http://\(host):22/", .failed, rule: "not TLS, not HTTP", status: nil)
        }
        return (route, record.updating { $0.route = route })
    }

    @Test func eachRouteIsListedForItsHostAndItsVerdictInEveryRenderedForm() throws {
        let report = F.report(Self.routed.map(\.1))
        let document = report.document()
        for (route, record) in Self.routed {
            let host = try #require(document.hosts.first { $0.host == record.host }, "\(record.host)")
            #expect(host.routes == [route.rawValue])
            #expect(host.verdicts.map(\.exampleRoute) == [route.rawValue])
        }
        // A raw tunnel is no cleartext load: the minimal dictionary asks no exception for it.
        let raw = try #require(Self.routed.first { $0.0 == .connectRaw }?.1)
        #expect(!report.minimalDictionaryPlist().contains(raw.host))
        #expect(report.minimalDictionaryPlist().contains("connect-http.example.com"))

        let directory = try F.temporaryDirectory().appendingPathComponent("report")
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        try report.write(to: directory.path)
        let result = try F.checkReportJSON(
            at: directory.appendingPathComponent("report.json").path,
            """
            errors = list(validator.iter_errors(document))
            for error in errors:
                print("/".join(str(p) for p in error.path), error.message)
            routes = sorted(r for host in document["hosts"] for r in host["routes"])
            print("routes", json.dumps(routes))
            document["hosts"][0]["routes"] = ["SOCKS9"]
            rejected = len(list(validator.iter_errors(document)))
            sys.exit(1 if errors or rejected != 1 else 0)
            """)
        #expect(result.status == 0, "\(result.output)")
        let expected = ProxyRoute.allCases.map(\.rawValue).sorted()
        #expect(result.output.contains("routes \(expected)"), "\(result.output)")

        let html = try String(contentsOf: directory.appendingPathComponent("report.html"), encoding: .utf8)
        #expect(html.contains(" · via CONNECT+HTTP</p>"), "the host line names the route")
        #expect(html.contains("http://connect-h2c.example.com/ (CONNECT+h2c)"), "the verdict's example names its route")
        let junit = try String(contentsOf: directory.appendingPathComponent("junit.xml"), encoding: .utf8)
        #expect(junit.contains("e.g. http://connect-http.example.com/ (CONNECT+HTTP)"), "\(junit)")
    }

    @Test func theSameURLThroughTwoRoutesListsBoth() {
        let url = "http://legacy.example.com/"
        let first = F.record(url, .blockedCleartext, error: -1022).updating { $0.route = .absoluteForm }
        let second = F.record(url, .blockedCleartext, error: -1022).updating { $0.route = .connectHTTP }
        let document = F.report([first, second, second]).document()
        #expect(document.hosts.first?.routes == ["absolute-form", "CONNECT+HTTP"])
        #expect(document.hosts.first?.requests == 3)
    }
}
