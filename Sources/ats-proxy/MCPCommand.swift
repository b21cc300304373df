import ATSProxyIO
import ArgumentParser
import Foundation
import MCP

/// `ats-proxy mcp`: a Model Context Protocol server on stdin/stdout (newline-delimited JSON-RPC, the stdio
/// transport of the `modelcontextprotocol/swift-sdk` package) that lets a coding agent ask why a load failed.
/// Attached to a running proxy through its web view (`--web`, loopback only), it lists and reads flows and the
/// session's summary and minimal dictionary; standalone it offers `explain`, `lint`, `diagnose`, and the report
/// tools over a report.json (`--report`). Every tool is read-only (`MCPToolbox`).
struct MCPCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mcp",
        abstract: "Serve read-only ATS tools to a coding agent over the Model Context Protocol (stdio).",
        discussion: """
            Attached to a running proxy started with --web 127.0.0.1:PORT:
              ats-proxy mcp --web http://127.0.0.1:PORT --config Info.plist
            Standalone (explain, lint, diagnose; session_summary and minimal_info_plist from a report.json):
              ats-proxy mcp --config Info.plist [--report report.json]
            The protocol runs on stdin and stdout; messages about the server go to stderr.
            """)

    @OptionGroup var policy: PolicyOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The running proxy's web view: http://127.0.0.1:PORT (its --web address; loopback only).",
            valueName: "URL"))
    var web: String?

    @Option(
        name: .long,
        help: ArgumentHelp("A report.json to answer session_summary and minimal_info_plist from.", valueName: "FILE"))
    var report: String?

    func validate() throws {
        if let web {
            do {
                _ = try WebAPIClient(parsing: web)
            } catch {
                throw ValidationError(error.description)
            }
        }
        if web != nil && report != nil {
            throw ValidationError("--web and --report exclude each other (attached, the report comes from the proxy)")
        }
    }

    func run() throws {
        IOSystem.ignoreSIGPIPE()
        let toolbox: MCPToolbox
        do {
            _ = try policy.loadSource()
            toolbox = MCPToolbox(
                web: try web.map { try WebAPIClient(parsing: $0) }, reportPath: report, policy: policy,
                executable: ExecCommand.ownExecutable())
        } catch {
            exitWithError(error)
        }
        Task {
            do {
                let server = MCPServerSession(toolbox: toolbox)
                try await server.serve()
                Foundation.exit(0)
            } catch {
                FileHandle.standardError.write(Data("ats-proxy mcp: error: \(error)\n".utf8))
                Foundation.exit(1)
            }
        }
        dispatchMain()
    }
}

/// The MCP server of one `ats-proxy mcp` process: the SDK's `Server` on the stdio transport, with the toolbox's
/// tools registered. Serves until stdin closes.
struct MCPServerSession: Sendable {
    let toolbox: MCPToolbox

    func serve() async throws {
        let server = Server(
            name: "ats-proxy", version: ATSProxyVersion.text,
            instructions:
                "Tools of ats-proxy, a proxy that enforces Apple's App Transport Security for one app. Ask get_flow (by id from list_flows, or by URL) why a load failed: it answers with the ATS rule, the NSURLError code and the smallest Info.plist fix.",
            capabilities: Server.Capabilities(tools: Server.Capabilities.Tools(listChanged: false)))
        let toolbox = toolbox
        await server.withMethodHandler(ListTools.self) { _ in ListTools.Result(tools: toolbox.tools) }
        await server.withMethodHandler(CallTool.self) { parameters in
            let answer = await Task.detached { toolbox.call(parameters.name, parameters.arguments ?? [:]) }.value
            return CallTool.Result(
                content: [.text(text: answer.text, annotations: nil, _meta: nil)], isError: answer.isError)
        }
        try await server.start(transport: StdioTransport())
        await server.waitUntilCompleted()
    }
}
