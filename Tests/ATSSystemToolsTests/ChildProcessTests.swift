import ATSSystemTools
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `ChildProcess`, the posix_spawn launcher that replaces Foundation's `Process`: exit statuses, signals,
/// redirection, the working directory, the environment, and that no descriptor of the parent leaks in.
@Suite struct ChildProcessTests {
    /// A scratch directory removed when the test ends.
    final class Scratch {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
        func path(_ name: String) -> String { url.appendingPathComponent(name).path }
        func read(_ name: String) -> String {
            String(decoding: FileManager.default.contents(atPath: path(name)) ?? Data(), as: UTF8.self)
        }
        deinit { try? FileManager.default.removeItem(at: url) }
    }

    @Test func exitStatusOutputEnvironmentAndDirectoryAreThoseOfTheChild() throws {
        let scratch = try Scratch()
        let child = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "pwd; echo \"$GREETING\"; echo oops >&2; exit 7"],
            environment: ["GREETING": "hello"], currentDirectory: scratch.url.path,
            standardOutput: .file(scratch.path("out")), standardError: .file(scratch.path("err")))
        #expect(child.waitUntilExit() == .exited(7))
        #expect(child.terminationStatus == 7)
        #expect(!child.isRunning)
        let lines = scratch.read("out").split(separator: "\n").map(String.init)
        #expect(lines.count == 2)
        #expect(
            lines.first.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }
                == scratch.url.resolvingSymlinksInPath().path)
        #expect(lines.last == "hello")
        #expect(scratch.read("err") == "oops\n")
    }

    @Test func aSignalledChildReportsTheSignalAndTheShellStatus() throws {
        let child = try ChildProcess(executable: "/bin/sleep", arguments: ["30"], environment: [:])
        #expect(child.isRunning)
        #expect(child.terminationStatus == -1)
        child.send(SIGTERM)
        #expect(child.wait(timeout: 10))
        #expect(child.termination == .signalled(SIGTERM))
        #expect(child.termination?.shellStatus == 128 + SIGTERM)
        child.send(SIGKILL)  // after the reaping: must not reach another process
    }

    @Test func noDescriptorOfTheParentIsInherited() throws {
        let scratch = try Scratch()
        // A descriptor without close-on-exec, like a test's listening socket.
        let leaked = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(leaked > 2)
        defer { close(leaked) }
        let child = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "ls /proc/self/fd"], environment: [:],
            standardOutput: .file(scratch.path("out")))
        #expect(child.waitUntilExit() == .exited(0))
        let descriptors = Set(scratch.read("out").split(separator: "\n").compactMap { Int32($0) })
        #expect(!descriptors.contains(leaked), "inherited: \(descriptors.sorted())")
        #expect(descriptors.isSuperset(of: [0, 1, 2]))
    }

    @Test func aMissingExecutableIsAnErrorNamingIt() {
        #expect(throws: ChildProcess.SpawnError.self) {
            _ = try ChildProcess(executable: "/nonexistent/tool", arguments: [], environment: [:])
        }
        do {
            _ = try ChildProcess(executable: "/nonexistent/tool", arguments: [], environment: [:])
        } catch {
            #expect("\(error)".contains("/nonexistent/tool"))
        }
    }

    @Test func manyChildrenStartAndEndWhileOthersPoll() throws {
        let children = try (0..<40).map { index in
            try ChildProcess(executable: "/bin/sh", arguments: ["-c", "exit \(index % 5)"], environment: [:])
        }
        for (index, child) in children.enumerated() {
            #expect(child.waitUntilExit() == .exited(Int32(index % 5)))
        }
    }
}
