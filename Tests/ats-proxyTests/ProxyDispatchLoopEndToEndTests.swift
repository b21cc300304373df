import Foundation
import Testing

/// A representative slice of the end-to-end tests against a proxy started with
/// `--event-loop dispatch` (the other suites run the default epoll backend): a blocked cleartext
/// load, an intercepted HTTPS GET, a checksummed 3 MiB download and an HTTP/2 request.
@Suite(.serialized) struct ProxyDispatchLoopEndToEndTests {
    @Test func dispatchBackendServesBlockedInterceptedBulkAndHTTP2() throws {
        let stack = try ProxyStack(arguments: ["--event-loop", "dispatch"])

        // The flag took effect: the banner names the backend, and no loop thread of the epoll
        // backend exists in the process.
        #expect(stack.proxy.waitForLog("event loops: 2 (dispatch)").contains("event loops: 2 (dispatch)"))
        let pid = stack.proxy.child.process.processIdentifier
        let threadNames = Self.threadNames(pid)
        #expect(!threadNames.isEmpty)
        #expect(!threadNames.contains { $0.hasPrefix("ats-loop.") }, "\(threadNames)")

        let blocked = try stack.curl("\(stack.plain)/hello")
        #expect(blocked.httpCode == 403)
        #expect(blocked.headers["x-ats-error"] == "-1022")
        #expect(stack.plainOrigin.requests.isEmpty)

        let hello = try stack.curl("\(stack.api)/hello")
        #expect(hello.exitCode == 0, "\(hello.stderr)")
        #expect(hello.httpCode == 200)
        #expect(hello.bodyText == "hello from tls-origin\n")

        let size = 3 << 20
        let download = try stack.curl("\(stack.api)/bytes?n=\(size)", timeout: 30)
        #expect(download.exitCode == 0, "\(download.stderr)")
        #expect(download.httpCode == 200)
        #expect(download.body.count == size)
        #expect(try download.bodyMatchesChecksum())

        let h2 = try stack.curl("\(stack.api)/hello", ["--http2"], writeOut: "%{http_code} %{http_version}")
        #expect(h2.exitCode == 0, "\(h2.stderr)")
        #expect(h2.writeOut == "200 2")
        #expect(h2.bodyText == "hello from tls-origin\n")
    }

    /// The kernel's names of a process's threads (`/proc/PID/task/*/comm`, at most 15 bytes each).
    static func threadNames(_ pid: Int32) -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            FileManager.default.contents(atPath: "/proc/\(pid)/task/\(task)/comm").map {
                String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
    }

    /// The default backend's loop threads carry their index in a name the kernel keeps whole.
    @Test func epollLoopThreadsAreNamedWithTheirIndex() throws {
        let stack = try ProxyStack()
        #expect(stack.proxy.waitForLog("event loops: 2 (epoll)").contains("event loops: 2 (epoll)"))
        let names = Self.threadNames(stack.proxy.child.process.processIdentifier)
        #expect(names.contains("ats-loop.0") && names.contains("ats-loop.1"), "\(names)")
    }
}
