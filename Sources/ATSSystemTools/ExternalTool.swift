import Foundation

/// What one run of an external tool printed and returned.
public struct ToolOutput: Sendable, Equatable {
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }

    /// The tool's own words for a failure: stderr when it wrote any, else stdout, trimmed.
    public var message: String {
        let text = stderr.trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? stdout.trimmingCharacters(in: .whitespacesAndNewlines) : text
    }
}

/// A failure to run an external tool, or a run the tool itself reported as failed; the text names the
/// command line and quotes the tool's own message.
public struct ToolError: Error, CustomStringConvertible, Equatable {
    public let commandLine: String
    public let problem: String

    public init(commandLine: String, problem: String) {
        self.commandLine = commandLine
        self.problem = problem
    }

    public var description: String { "\(commandLine): \(problem)" }
}

/// A command-line tool of the operating system (`networksetup`, `security`, `xcrun`,
/// `update-ca-certificates`), looked up on `PATH` and run directly (never through a shell), to completion,
/// with its output captured. The environment is a value, so tests put fake tools first on `PATH`.
public struct ExternalTool: Sendable {
    /// The program name as typed (`networksetup`).
    public let name: String
    /// The environment the tool runs with; its `PATH` is where the tool is looked for.
    public let environment: [String: String]

    public init(_ name: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.name = name
        self.environment = environment
    }

    /// The executable's path on `PATH`, or nil when there is none.
    public func locate() -> String? {
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        for directory in path.split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// `name arg1 arg2`, quoted where an argument holds a space, for messages.
    public func commandLine(_ arguments: [String]) -> String {
        ([name] + arguments).map { $0.contains(" ") || $0.isEmpty ? "'\($0)'" : $0 }.joined(separator: " ")
    }

    /// Runs the tool and returns what it printed, whatever its exit status; throws only when it cannot
    /// be started (not on `PATH`, not executable). `interactive` leaves standard input connected, so a tool
    /// that asks for a password on the terminal (`security`) can read it.
    public func run(_ arguments: [String], interactive: Bool = false) throws -> ToolOutput {
        guard let executable = locate() else {
            throw ToolError(commandLine: commandLine(arguments), problem: "'\(name)' is not on PATH")
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ats-proxy-tool-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outURL = scratch.appendingPathComponent("out")
        let errURL = scratch.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let child: ChildProcess
        do {
            child = try ChildProcess(
                executable: executable, arguments: arguments, environment: environment,
                standardInput: interactive ? .inherit : .null, standardOutput: .file(outURL.path),
                standardError: .file(errURL.path))
        } catch {
            throw ToolError(commandLine: commandLine(arguments), problem: "\(error)")
        }
        let status = child.waitUntilExit().shellStatus
        let stdout = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
        return ToolOutput(status: status, stdout: stdout, stderr: stderr)
    }

    /// Runs the tool and throws a `ToolError` quoting its message when it exits non-zero.
    @discardableResult
    public func check(_ arguments: [String], interactive: Bool = false) throws -> ToolOutput {
        let output = try run(arguments, interactive: interactive)
        guard output.status == 0 else {
            let message = output.message.isEmpty ? "no message" : output.message
            throw ToolError(commandLine: commandLine(arguments), problem: "exit status \(output.status): \(message)")
        }
        return output
    }
}
