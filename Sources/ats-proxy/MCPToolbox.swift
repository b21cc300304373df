import ATSPolicy
import ATSProxyCore
import ATSReport
import ATSWeb
import Foundation
import MCP

/// The read-only tools `ats-proxy mcp` offers a coding agent, and what each one does when called. Attached to a
/// running proxy (`--web`), the flow tools read its web view's JSON API; standalone, only `explain`, `lint`,
/// `diagnose` and (with `--report`) the report tools exist. Nothing here changes the proxy or the machine.
///
/// Every answer is text (JSON where the data is structured); failures come back as tool errors with the reason,
/// never as a crash of the server.
struct MCPToolbox: Sendable {
    /// The tools, by the name an agent calls.
    enum Name: String, CaseIterable, Sendable {
        case listFlows = "list_flows"
        case getFlow = "get_flow"
        case sessionSummary = "session_summary"
        case minimalInfoPlist = "minimal_info_plist"
        case explain
        case lint
        case diagnose
    }

    /// A tool's answer.
    struct Answer: Sendable, Equatable {
        var text: String
        var isError = false
    }

    /// The running proxy's web view (nil: standalone).
    let web: WebAPIClient?
    /// A report.json to answer the report tools from when standalone.
    let reportPath: String?
    /// The policy options `mcp` was started with (the Info.plist explain and lint use unless a call names one).
    let policy: PolicyOptions
    /// This executable, for `diagnose` (run as a child so that it keeps its own options and timeouts).
    let executable: String?

    /// The tools available in this mode, in a stable order.
    var available: [Name] {
        Name.allCases.filter { name in
            switch name {
            case .listFlows, .getFlow: web != nil
            case .sessionSummary, .minimalInfoPlist: web != nil || reportPath != nil
            case .explain, .lint, .diagnose: true
            }
        }
    }

    /// The MCP descriptions of the available tools.
    var tools: [Tool] { available.map(Self.tool) }

    /// Runs tool `name` with `arguments`.
    func call(_ name: String, _ arguments: [String: Value]) -> Answer {
        guard let tool = Name(rawValue: name), available.contains(tool) else {
            let hint =
                Name(rawValue: name) == nil
                ? ""
                : " (it needs a running proxy: start ats-proxy with --web 127.0.0.1:PORT and this server with --web http://127.0.0.1:PORT)"
            return Answer(text: "no tool named \(name) here\(hint)", isError: true)
        }
        do {
            switch tool {
            case .listFlows: return try listFlows(arguments)
            case .getFlow: return try getFlow(arguments)
            case .sessionSummary: return try sessionSummary()
            case .minimalInfoPlist: return try minimalInfoPlist()
            case .explain: return try explain(arguments)
            case .lint: return try lint(arguments)
            case .diagnose: return diagnose(arguments)
            }
        } catch {
            return Answer(text: "\(error)", isError: true)
        }
    }

    // MARK: - Flows (attached)

    private func listFlows(_ arguments: [String: Value]) throws -> Answer {
        guard let web else { preconditionFailure("MCPToolbox.listFlows: offered only with --web") }
        var filter = FlowFilter()
        filter.host = arguments["host"]?.stringValue ?? ""
        filter.outcome = arguments["outcome"]?.stringValue ?? ""
        filter.code = arguments["code"]?.stringValue ?? ""
        filter.source = arguments["source"]?.stringValue ?? ""
        filter.text = arguments["text"]?.stringValue ?? ""
        filter.violationsOnly = arguments["violations_only"]?.boolValue ?? false
        let limit = arguments["limit"]?.intValue ?? 50
        let listing = try JSONSerialization.jsonObject(with: try web.get(Self.flowsPath(filter, limit: limit)))
        guard let listing = listing as? [String: Any], let flows = listing["flows"] as? [[String: Any]] else {
            throw WebAPIClient.Failure(description: "the web view's /api/flows answer is not a flow listing")
        }
        // A row per flow: enough to pick one for get_flow.
        let rows = flows.map { flow in
            flow.filter { ["id", "time", "method", "url", "status", "outcome", "code", "rule"].contains($0.key) }
        }
        let answer: [String: Any] = [
            "held": listing["held"] ?? 0, "matched": listing["matched"] ?? 0, "flows": rows,
        ]
        return Answer(text: try Self.jsonText(answer))
    }

    private func getFlow(_ arguments: [String: Value]) throws -> Answer {
        guard let web else { preconditionFailure("MCPToolbox.getFlow: offered only with --web") }
        if let id = arguments["id"]?.intValue {
            return Answer(
                text: try Self.jsonText(try JSONSerialization.jsonObject(with: try web.get("/api/flows/\(id)"))))
        }
        guard let url = arguments["url"]?.stringValue, !url.isEmpty else {
            return Answer(text: "give id (from list_flows) or url (part of the request URL)", isError: true)
        }
        var filter = FlowFilter()
        filter.text = url
        let listing = try JSONSerialization.jsonObject(with: try web.get(Self.flowsPath(filter, limit: 1_000)))
        let flows = (listing as? [String: Any])?["flows"] as? [[String: Any]] ?? []
        guard let newest = flows.last(where: { ($0["url"] as? String)?.contains(url) ?? false }) else {
            return Answer(text: "no flow in the ring has a URL containing \(url)", isError: true)
        }
        return Answer(text: try Self.jsonText(newest))
    }

    /// The `/api/flows` request for `filter`, at most `limit` flows.
    static func flowsPath(_ filter: FlowFilter, limit: Int) -> String {
        let query = filter.query
        return "/api/flows?" + (query.isEmpty ? "" : query + "&") + "limit=\(limit)"
    }

    // MARK: - Report (attached, or --report)

    /// The report.json of the running session, or of `--report`.
    private func reportObject() throws -> [String: Any] {
        let data: Data
        if let web {
            data = try web.get("/report.json")
        } else if let reportPath {
            guard let contents = FileManager.default.contents(atPath: reportPath) else {
                throw WebAPIClient.Failure(description: "\(reportPath): cannot be read")
            }
            data = contents
        } else {
            preconditionFailure("MCPToolbox.reportObject: offered only with --web or --report")
        }
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw WebAPIClient.Failure(description: "the report is not a JSON object")
        }
        return object
    }

    private func sessionSummary() throws -> Answer {
        let report = try reportObject()
        let hosts = (report["hosts"] as? [[String: Any]] ?? []).map { host in
            host.filter {
                ["host", "status", "requests", "violations", "failedRule", "fix", "verdicts"].contains($0.key)
            }
        }
        var summary: [String: Any] = ["hosts": hosts]
        for key in ["source", "platform", "totals", "generatedAt"] { summary[key] = report[key] }
        if let appTrust = report["appTrust"] { summary["appTrust"] = appTrust }
        return Answer(text: try Self.jsonText(summary))
    }

    private func minimalInfoPlist() throws -> Answer {
        let report = try reportObject()
        guard let dictionary = report["minimalDictionary"] as? [String: Any], let plist = dictionary["plist"] as? String
        else { throw WebAPIClient.Failure(description: "the report has no minimal dictionary") }
        return Answer(text: plist)
    }

    // MARK: - Offline tools

    /// The policy options with `config` from the call, when it names one.
    private func policy(_ arguments: [String: Value]) -> PolicyOptions {
        var options = policy
        if let config = arguments["config"]?.stringValue, !config.isEmpty { options.config = config }
        return options
    }

    private func explain(_ arguments: [String: Value]) throws -> Answer {
        let urls =
            (arguments["urls"]?.arrayValue ?? []).compactMap(\.stringValue)
            + [arguments["url"]?.stringValue]
            .compactMap { $0 }
        guard !urls.isEmpty else { return Answer(text: "give urls, e.g. [\"http://api.example.com/\"]", isError: true) }
        let source = arguments["source"]?.stringValue.flatMap(RequestSource.init(rawValue:)) ?? .urlsession
        let options = policy(arguments)
        let loaded = try options.loadSource()
        let evaluation = try options.evaluationOptions()
        let evaluator = PolicyStore.Snapshot(loaded: loaded, parseOptions: options.parseOptions, options: evaluation)
            .evaluator
        let uuid = UUID()
        var explained: [ExplainedDecision] = []
        for (index, url) in urls.enumerated() {
            let target = try RequestTarget(parsing: url)
            let context = ConsoleContext(
                processName: loaded.processName ?? "App", pid: Int(getpid()), threadID: Int(getpid()) + 1,
                taskUUID: uuid, taskNumber: index + 1)
            explained.append(DecisionRenderer.explain(evaluator.evaluate(target, source: source), context: context))
        }
        let report = ExplainReport(
            source: loaded.summary, platform: evaluation.platform,
            configurationMessages: evaluator.configuration.messages, decisions: explained)
        return Answer(text: DecisionRenderer.json(report))
    }

    private func lint(_ arguments: [String: Value]) throws -> Answer {
        let options = policy(arguments)
        let loaded = try options.loadSource()
        let report = ATSLinter(
            source: loaded, parseOptions: options.parseOptions, platform: try options.resolvedPlatform()
        )
        .lint()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return Answer(text: String(decoding: try encoder.encode(report), as: UTF8.self))
    }

    /// Runs `ats-proxy diagnose` (the nscurl-style matrix against a live server) as a child, at most two minutes.
    private func diagnose(_ arguments: [String: Value]) -> Answer {
        guard let url = arguments["url"]?.stringValue, url.hasPrefix("https://") else {
            return Answer(text: "give url, an https:// URL", isError: true)
        }
        guard let executable else { return Answer(text: "cannot find the ats-proxy executable", isError: true) }
        var command = ["diagnose"]
        let options = policy(arguments)
        if let config = options.config { command += ["--config", config] }
        for entry in (arguments["resolve"]?.arrayValue ?? []).compactMap(\.stringValue) {
            command += ["--resolve", entry]
        }
        for file in (arguments["upstream_ca"]?.arrayValue ?? []).compactMap(\.stringValue) {
            command += ["--upstream-ca", file]
        }
        command.append(url)
        let result = ChildRun.run(executable, command, timeout: 120)
        let text = result.output.isEmpty ? "(no output)" : result.output
        return Answer(
            text: "ats-proxy \(command.joined(separator: " ")) exited \(result.status)\n\n\(text)",
            isError: result.status == 2 || result.status < 0)
    }

    // MARK: - Descriptions

    /// The MCP description of `name`: what it does and the arguments it takes (JSON Schema).
    static func tool(_ name: Name) -> Tool {
        let readOnly = Tool.Annotations(readOnlyHint: true, openWorldHint: name == .diagnose)
        let config: Value = .object([
            "type": "string", "description": "Info.plist, .app or .ipa to use instead of the one mcp was started with",
        ])
        switch name {
        case .listFlows:
            return Tool(
                name: name.rawValue,
                description:
                    "List the running proxy's recent flows (newest last), filtered like the live page: host and code by substring, outcome and source exactly, free text, violations only. Each row has id, URL, status, outcome (allowed, allowed by exception, blocked, failed, network error, reported, passthrough, ignored, challenge passed, challenge finding), NSURLError code and the deciding ATS rule.",
                inputSchema: schema([
                    "host": .object(["type": "string", "description": "part of the host name"]),
                    "outcome": .object([
                        "type": "string",
                        "enum": .array(LoadOutcome.allCases.map { .string($0.rawValue) }),
                    ]),
                    "code": .object(["type": "string", "description": "part of the error code, e.g. -1022"]),
                    "source": .object(["type": "string", "enum": ["urlsession", "webkit", "media"]]),
                    "text": .object(["type": "string", "description": "free text in URL, rule, fix, code"]),
                    "violations_only": .object(["type": "boolean"]),
                    "limit": .object(["type": "integer", "minimum": 1, "maximum": 1000, "default": 50]),
                ]), annotations: readOnly)
        case .getFlow:
            return Tool(
                name: name.rawValue,
                description:
                    "Why a load failed or passed: one flow of the running proxy with its verdict, the ATS rule that decided it and the rule chain, the smallest Info.plist fix, the CFNetwork console lines, TLS facts and headers (secrets redacted as in the proxy's log). By id from list_flows, or the newest flow whose URL contains url.",
                inputSchema: schema([
                    "id": .object(["type": "integer"]),
                    "url": .object(["type": "string", "description": "part of the request URL"]),
                ]), annotations: readOnly)
        case .sessionSummary:
            return Tool(
                name: name.rawValue,
                description:
                    "The session so far (or the report.json given with --report): totals, and per host its status, violations, the rule that failed first and its fix.",
                inputSchema: schema([:]), annotations: readOnly)
        case .minimalInfoPlist:
            return Tool(
                name: name.rawValue,
                description:
                    "The smallest NSAppTransportSecurity dictionary that lets the session's observed loads through, as Info.plist XML with App Review notes.",
                inputSchema: schema([:]), annotations: readOnly)
        case .explain:
            return Tool(
                name: name.rawValue,
                description:
                    "Explain offline whether ATS allows each URL under the app's Info.plist, with the rule chain, the NSURLError iOS reports, the console lines and the fix.",
                inputSchema: schema(
                    [
                        "urls": .object(["type": "array", "items": ["type": "string"], "minItems": 1]),
                        "source": .object(["type": "string", "enum": ["urlsession", "webkit", "media"]]),
                        "config": config,
                    ], required: ["urls"]), annotations: readOnly)
        case .lint:
            return Tool(
                name: name.rawValue,
                description:
                    "Lint the app's ATS configuration: errors and traps (misspelt keys, wildcards, keys that never match or do nothing, App Review flags), each with its key path and fix.",
                inputSchema: schema(["config": config]), annotations: readOnly)
        case .diagnose:
            return Tool(
                name: name.rawValue,
                description:
                    "Probe a live https:// server the way nscurl --ats-diagnostics does (TLS versions, forward secrecy, certificate checks) and say which ATS settings it passes.",
                inputSchema: schema(
                    [
                        "url": .object(["type": "string", "description": "an https:// URL"]),
                        "resolve": .object([
                            "type": "array", "items": ["type": "string"], "description": "HOST:PORT:ADDR, as curl's",
                        ]),
                        "upstream_ca": .object([
                            "type": "array", "items": ["type": "string"], "description": "extra trust anchor PEM files",
                        ]),
                        "config": config,
                    ], required: ["url"]), annotations: readOnly)
        }
    }

    private static func schema(_ properties: [String: Value], required: [String] = []) -> Value {
        var object: [String: Value] = ["type": "object", "properties": .object(properties)]
        if !required.isEmpty { object["required"] = .array(required.map { .string($0) }) }
        return .object(object)
    }

    /// `value` as pretty, key-sorted JSON text.
    static func jsonText(_ value: Any) throws -> String {
        String(
            decoding: try JSONSerialization.data(
                withJSONObject: value, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]),
            as: UTF8.self)
    }
}

/// A child process run to completion with its output (stdout and stderr together) and a deadline; killed by
/// PID when the deadline passes.
enum ChildRun {
    static func run(_ executable: String, _ arguments: [String], timeout: Double) -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return (-1, "cannot start \(executable): \(error)")
        }
        let pid = process.processIdentifier
        let killer = DispatchWorkItem { if process.isRunning { kill(pid, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        killer.cancel()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
