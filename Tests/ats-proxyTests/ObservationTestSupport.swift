import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Helpers of the observation tests (key log, HAR, live view).

/// Where tests leave files for people to look at (`.build/test-artifacts/`).
let testArtifacts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent(".build/test-artifacts", isDirectory: true)

/// The lines of a text file (empty when it is missing).
func fileLines(_ path: String) -> [String] {
    String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self).split(separator: "\n")
        .map(String.init)
}

/// `openssl s_server -www` on 127.0.0.1 with a minted leaf, writing its own key log: the origin of
/// the key-log tests (its secrets are what the proxy's upstream leg must have logged).
final class OpenSSLOrigin {
    let port: Int
    let keyLogPath: String
    let child: Child

    init(directory: TemporaryDirectory, leaf: TestPKI.Leaf) throws {
        keyLogPath = directory.file("origin-keys.log")
        var started: (Int, Child)?
        for _ in 0..<3 where started == nil {
            let port = try E2E.freePort()
            let child = try Child(
                executable: "/usr/bin/openssl",
                arguments: [
                    "s_server", "-accept", "127.0.0.1:\(port)", "-cert", leaf.certificatePath, "-key", leaf.keyPath,
                    "-www", "-keylogfile", keyLogPath,
                ], directory: directory, label: "s_server")
            let ready = E2E.poll(timeout: 10) { () -> Bool? in
                if !child.process.isRunning { return false }
                return child.stdoutText.contains("ACCEPT") ? true : nil
            }
            if ready == true { started = (port, child) } else { child.stop() }
        }
        guard let started else { throw E2E.Failure("openssl s_server did not start") }
        (port, child) = started
    }

    deinit { child.stop() }
}

/// `Fixtures/harcheck.py` on a HAR file: schema validation, then haralyzer's reading of every entry.
struct HARCheck {
    let ok: Bool
    let output: String
    /// One object per entry, as haralyzer read it.
    let entries: [[String: Any]]

    init(_ path: String) throws {
        let result = try E2E.run("/usr/bin/env", ["python3", E2E.fixture("harcheck.py"), path], timeout: 60)
        output = result.stdoutText + result.stderrText
        ok = result.status == 0 && result.stdoutText.contains("HAR OK")
        entries = result.stdoutText.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// The entries whose URL contains `text`.
    func entries(matching text: String) -> [[String: Any]] {
        entries.filter { ($0["url"] as? String)?.contains(text) ?? false }
    }
}
