import ATSPolicy
import ATSSystemTools
import ATSTestSupport
import Foundation
import Testing

@testable import ATSProxyCore
@testable import ATSReport

/// Builders and helpers shared by the session-report tests (the policy round-trip helpers live in
/// ATSTestSupport, shared with the ProxySession report test).
extension ReportFixtures {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    /// A record as the proxy logs it; only the fields the report reads are meaningful.
    static func record(
        _ url: String, _ result: RequestRecord.Result = .completed, error: Int? = nil, stream: StreamError? = nil,
        tls: [String: String]? = nil, rule: String = "", fix: String? = nil, source: RequestSource = .urlsession,
        atsRequired: Bool = true, status: Int? = 200
    ) -> RequestRecord {
        RequestRecord(
            time: start, clientAddress: "127.0.0.1:50000", taskID: "T.1", method: "GET", url: url,
            httpProtocol: "http/1.1", source: source, result: result, atsRequired: atsRequired, ruleChain: [rule],
            rule: rule, fix: fix, errorCode: error, streamError: stream,
            status: result == .completed || result == .reported ? status : 502, tls: tls)
    }

    /// TLS facts as `ProxySession.tlsFacts` writes them.
    static func tls(
        _ version: String = "TLSv1.3", cipher: String = "TLS_AES_128_GCM_SHA256",
        keyExchange: String = "TLS 1.3 (EC)DHE",
        leafKey: String = "EC P-256"
    ) -> [String: String] {
        [
            "version": version, "cipher": cipher, "keyExchange": keyExchange, "leaf": "CN=example",
            "leafKey": leafKey, "leafSignature": "ecdsa-with-SHA256", "chainLength": "2", "alpn": "http/1.1",
        ]
    }

    static func configuration(_ ats: [String: PlistValue]) -> ATSConfiguration {
        ATSConfigurationParser().parse(.dictionary(ats))
    }

    static func report(
        _ records: [RequestRecord], ats: [String: PlistValue] = [:],
        options: EvaluationOptions = ReportFixtures.pinnedOptions,
        source: LoadedInfoPlist? = nil
    ) -> SessionReport {
        let report = SessionReport(
            policy: SessionReport.Policy(
                configuration: configuration(ats), options: options, sourceSummary: "test configuration",
                source: source),
            clock: { start })
        for record in records { report.record(record) }
        return report
    }

    /// The package root (for `.build/test-artifacts`).
    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// A fresh temporary directory.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ats-report-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Result of a bounded child process.
    struct RunResult {
        var status: Int32
        var output: String
        var timedOut: Bool
    }

    /// Runs Python `checks` against the report.json at `reportPath` with Python's `jsonschema`. The checks start with
    /// `schema` (the embedded schema, itself checked), `document` (the report) and `validator` bound, and `copy`,
    /// `json` and `sys` imported; what they print is the result's output.
    static func checkReportJSON(at reportPath: String, _ checks: String) throws -> RunResult {
        let scratch = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let schemaPath = scratch.appendingPathComponent("schema.json").path
        try Data(SessionReportSchema.json.utf8).write(to: URL(fileURLWithPath: schemaPath))
        let script = """
            import copy, json, sys
            from jsonschema import Draft202012Validator
            schema = json.load(open(sys.argv[1]))
            Draft202012Validator.check_schema(schema)
            document = json.load(open(sys.argv[2]))
            validator = Draft202012Validator(schema)

            """ + checks
        return try run("/usr/bin/env", ["python3", "-c", script, schemaPath, reportPath], timeout: 60)
    }

    /// Runs `executable` with a deadline; kills it (by PID) when the deadline passes.
    static func run(_ executable: String, _ arguments: [String], timeout: Double) throws -> RunResult {
        let scratch = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outputURL = scratch.appendingPathComponent("output.txt")
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        let handle = try FileHandle(forWritingTo: outputURL)
        let process = try ChildProcess(
            executable: executable, arguments: arguments, environment: ProcessInfo.processInfo.environment,
            standardOutput: .descriptor(handle.fileDescriptor), standardError: .descriptor(handle.fileDescriptor))
        var timedOut = false
        if !process.wait(timeout: timeout) {
            timedOut = true
            process.send(SIGKILL)
            process.waitUntilExit()
        }
        try? handle.close()
        let output = (try? String(contentsOf: outputURL, encoding: .utf8)) ?? ""
        return RunResult(status: process.terminationStatus, output: output, timedOut: timedOut)
    }
}
