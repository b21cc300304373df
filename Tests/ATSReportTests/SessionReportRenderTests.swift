import ATSPolicy
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The three written files: JSON against the embedded schema (Python `jsonschema`), JUnit XML
/// parsed back, and the HTML rendered by a real headless Chromium.
@Suite(.serialized) struct SessionReportRenderTests {
    typealias F = ReportFixtures

    /// A report with every kind of host, written to a fresh directory.
    static func writtenReport() throws -> (directory: URL, document: SessionReportDocument) {
        var records = SessionReportTests.mixedTraffic
        records += [
            F.record("http://a.cdn.example.com/1.png", .blockedCleartext, error: -1022),
            F.record("http://b.cdn.example.com/2.png", .blockedCleartext, error: -1022),
            F.record("http://c.cdn.example.com/3.png", .blockedCleartext, error: -1022),
            F.record("http://localhost:8080/health", atsRequired: false),
            F.record(
                "https://private-ca.example.com/", .failed, error: -1202, stream: .secureTransport(-9813), tls: F.tls(),
                rule: "the chain ends in the root CN=Private <Root> & Co, which is not trusted", atsRequired: false),
            F.record(
                "https://down.example.com/", .failed, error: -1003, stream: StreamError(domain: 12, code: 8),
                rule: "not resolved"),
            F.record("https://video.example.com/master.m3u8", tls: F.tls(), source: .media),
        ]
        let ats: [String: PlistValue] = [
            "NSAllowsArbitraryLoadsInWebContent": .bool(true),
            "NSExceptionDomains": .dictionary([
                "unused.example.com": .dictionary(["NSExceptionAllowsInsecureHTTPLoads": .bool(true)])
            ]),
        ]
        let report = F.report(records, ats: ats)
        let directory = try F.temporaryDirectory().appendingPathComponent("report")
        try SessionReport.checkWritable(directory: directory.path)
        try report.write(to: directory.path)
        return (directory, report.document())
    }

    @Test func reportJSONValidatesAgainstTheEmbeddedSchema() throws {
        let (directory, _) = try Self.writtenReport()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let result = try F.checkReportJSON(
            at: directory.appendingPathComponent("report.json").path,
            """
            errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
            for error in errors:
                print("/".join(str(p) for p in error.path), error.message)
            # The schema must also reject drift: an unknown field and a wrong status.
            document["surprise"] = 1
            document["hosts"][0]["status"] = "fine"
            rejected = len(list(validator.iter_errors(document)))
            print("rejected", rejected)
            sys.exit(1 if errors or rejected < 2 else 0)
            """)
        #expect(!result.timedOut)
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("rejected 2"))
    }

    @Test func junitXMLParsesBackWithOneTestCasePerHost() throws {
        let (directory, document) = try Self.writtenReport()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let path = directory.appendingPathComponent("junit.xml")
        #if canImport(FoundationXML) || os(macOS)
            let xml = try XMLDocument(contentsOf: path, options: [])
            let root = try #require(xml.rootElement())
            #expect(root.name == "testsuites")
            let suites = root.elements(forName: "testsuite")
            #expect(suites.count == 1)
            let cases = try #require(suites.first).elements(forName: "testcase")
            #expect(cases.map { $0.attribute(forName: "name")?.stringValue ?? "" } == document.hosts.map(\.host))
            let failed = cases.filter { !$0.elements(forName: "failure").isEmpty }
            #expect(failed.count == document.hosts.filter { $0.status == .violation }.count)
            #expect(root.attribute(forName: "failures")?.stringValue == "\(failed.count)")
            let api = try #require(cases.first { $0.attribute(forName: "name")?.stringValue == "api.example.com" })
            let failure = try #require(api.elements(forName: "failure").first)
            #expect(failure.attribute(forName: "message")?.stringValue?.contains("-1022") == true)
            #expect(failure.stringValue?.contains("fix: add NSExceptionDomains → api.example.com") == true)
            let legacy = try #require(
                cases.first { $0.attribute(forName: "name")?.stringValue == "legacy.example.org" })
            #expect(
                legacy.elements(forName: "failure").first?.attribute(forName: "message")?.stringValue?.contains(
                    "-1200 [3:-9836]") == true)
            let privateCA = try #require(
                cases.first { $0.attribute(forName: "name")?.stringValue == "private-ca.example.com" })
            #expect(privateCA.elements(forName: "error").first?.stringValue?.contains("<Root> & Co") == true)
            let good = try #require(cases.first { $0.attribute(forName: "name")?.stringValue == "good.example.com" })
            #expect(good.elements(forName: "failure").isEmpty && good.elements(forName: "error").isEmpty)
        #else
            let script = """
                import sys, xml.etree.ElementTree as ET
                root = ET.parse(sys.argv[1]).getroot()
                assert root.tag == "testsuites"
                print(len(root.findall("./testsuite/testcase")), len(root.findall("./testsuite/testcase/failure")))
                """
            let result = try F.run("/usr/bin/env", ["python3", "-c", script, path.path], timeout: 60)
            #expect(result.status == 0, "\(result.output)")
            let violations = document.hosts.filter { $0.status == .violation }.count
            #expect(
                result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(document.hosts.count) \(violations)"
            )
        #endif
    }

    @Test func htmlIsSelfContainedSortedAndCopyable() throws {
        let (directory, document) = try Self.writtenReport()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let html = try String(contentsOf: directory.appendingPathComponent("report.html"), encoding: .utf8)
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(html.contains(#"<meta name="viewport" content="width=device-width, initial-scale=1">"#))
        #expect(html.contains("@media print") && html.contains("@media (max-width: 700px)"))
        for external in ["<script", "<link", "<img", "<iframe", "url(", "@import", " src=", " href="] {
            #expect(!html.contains(external), "external reference \(external)")
        }
        // The minimal dictionary, escaped, in one selectable <pre>.
        let escaped = PlistFragmentWriter.escape(document.minimalDictionary.plist)
        #expect(html.contains("<pre class=\"plist\">\(escaped)</pre>"))
        #expect(!html.contains("<Root>"))
        // Hosts appear worst first.
        let positions = document.hosts.map { host in
            html.range(of: "</span> \(host.host)</h3>")?.lowerBound
        }
        #expect(positions.allSatisfy { $0 != nil })
        #expect(positions.compactMap { $0 } == positions.compactMap { $0 }.sorted())
        #expect(document.hosts.first?.status == .violation && document.hosts.last?.status == .ok)
    }

    @Test(.timeLimit(.minutes(3))) func htmlRendersInHeadlessChromium() throws {
        let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let chromium else {
            Issue.record("chromium is not installed; run scripts/bootstrap test")
            return
        }
        let (directory, _) = try Self.writtenReport()
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let artifacts = F.packageRoot.appendingPathComponent(".build/test-artifacts", isDirectory: true)
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let html = directory.appendingPathComponent("report.html")
        for (name, size) in [("session-report-phone.png", "390,844"), ("session-report-desktop.png", "1280,1600")] {
            let png = directory.appendingPathComponent(name)
            let profileRoot = try F.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: profileRoot) }
            let profile = profileRoot.appendingPathComponent("profile").path
            let result = try F.run(
                "/usr/bin/timeout",
                [
                    "-k", "5", "90", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--hide-scrollbars", "--no-first-run", "--user-data-dir=\(profile)", "--screenshot=\(png.path)",
                    "--window-size=\(size)", html.absoluteString,
                ], timeout: 120)
            #expect(!result.timedOut, "chromium did not finish: \(result.output)")
            let data = try Data(contentsOf: png)
            #expect(data.count > 10_000, "screenshot too small (\(data.count) bytes): \(result.output)")
            #expect(data.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
            let width = data.count > 24 ? data[16..<20].reduce(0) { $0 << 8 | Int($1) } : 0
            #expect(width == Int(size.split(separator: ",")[0]))
            let artifact = artifacts.appendingPathComponent(name)
            try? FileManager.default.removeItem(at: artifact)
            try FileManager.default.copyItem(at: png, to: artifact)
        }
        // Print: Chromium lays the page out for paper with the print styles.
        let pdf = directory.appendingPathComponent("session-report.pdf")
        let profileRoot = try F.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: profileRoot) }
        let profile = profileRoot.appendingPathComponent("profile").path
        let printed = try F.run(
            "/usr/bin/timeout",
            [
                "-k", "5", "90", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--user-data-dir=\(profile)", "--no-pdf-header-footer", "--print-to-pdf=\(pdf.path)",
                html.absoluteString,
            ], timeout: 120)
        #expect(!printed.timedOut)
        let pdfData = try Data(contentsOf: pdf)
        #expect(pdfData.count > 5_000 && pdfData.prefix(5) == Data("%PDF-".utf8))
        let artifact = artifacts.appendingPathComponent("session-report.pdf")
        try? FileManager.default.removeItem(at: artifact)
        try FileManager.default.copyItem(at: pdf, to: artifact)
        try? FileManager.default.removeItem(at: artifacts.appendingPathComponent("session-report.html"))
        try FileManager.default.copyItem(at: html, to: artifacts.appendingPathComponent("session-report.html"))
    }
}
