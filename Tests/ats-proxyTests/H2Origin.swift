import ATSTestSupport
import Foundation
import Testing

/// `Fixtures/h2origin.py` on 127.0.0.1 (port 0) with a minted leaf, and its event log
/// (`KEYWORD key=value …` per line). Stops by itself after 120 s; `deinit` kills it by PID.
final class H2Origin {
    let port: Int
    let logPath: String
    let child: Child

    init(directory: TemporaryDirectory, leaf: TestPKI.Leaf, alpn: String, arguments extra: [String] = []) throws {
        logPath = directory.file("h2origin-\(UUID().uuidString.prefix(6)).log")
        let arguments =
            [
                E2E.fixture("h2origin.py"), "--port", "0", "--cert", leaf.certificatePath, "--key", leaf.keyPath,
                "--alpn", alpn, "--log", logPath, "--lifetime", "120",
            ] + extra
        child = try Child(executable: "/usr/bin/python3", arguments: arguments, directory: directory, label: "h2origin")
        let ready = E2E.poll(timeout: 20) { [child] () -> Int? in
            let text = child.stdoutText
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) else { return nil }
            return Int(line.dropFirst(6))
        }
        guard let ready else {
            child.stop()
            throw E2E.Failure("h2origin.py did not start: \(child.stderrText)")
        }
        port = ready
    }

    var lines: [String] {
        String(decoding: FileManager.default.contents(atPath: logPath) ?? Data(), as: UTF8.self)
            .split(separator: "\n").map(String.init)
    }

    /// The log lines starting with `keyword`, as their key=value fields.
    func events(_ keyword: String) -> [[String: String]] {
        lines.compactMap { line in
            let tokens = line.split(separator: " ")
            guard tokens.first.map(String.init) == keyword else { return nil }
            var fields: [String: String] = [:]
            for token in tokens.dropFirst() {
                guard let equals = token.firstIndex(of: "=") else { continue }
                fields[String(token[..<equals])] = String(token[token.index(after: equals)...])
            }
            return fields
        }
    }

    /// Polls the log until a `keyword` line matching `predicate` appears.
    func waitFor(_ keyword: String, timeout: Double, where predicate: ([String: String]) -> Bool) -> [String: String]? {
        E2E.poll(timeout: timeout) { events(keyword).first(where: predicate) }
    }

    deinit { child.stop() }
}
