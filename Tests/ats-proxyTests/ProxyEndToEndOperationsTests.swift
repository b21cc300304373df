import ATSTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Operating the proxy: SIGHUP reload, 1,000 concurrent clients, --max-connections, loops.
@Suite(.serialized) struct ProxyEndToEndOperationsTests {
    @Test func sighupReloadChangesDecisionsWithoutDroppingConnections() throws {
        let stack = try ProxyStack()
        let url = "\(stack.plain)/hello"
        #expect(try stack.curl(url).httpCode == 403)

        // A keep-alive client connected before the reload keeps its connection.
        let client = try RawClient(port: stack.proxy.port)
        let request = "GET \(url) HTTP/1.1\r\nHost: plain.example.test:\(stack.plainOrigin.port)\r\n\r\n"
        client.send(request)
        #expect(client.readResponse()?.head.hasPrefix("HTTP/1.1 403") == true)

        let allowing = infoPlist(
            "<key>NSExceptionDomains</key><dict>\(cleartextException("plain.example.test"))</dict>")
        try Data(allowing.utf8).write(to: URL(fileURLWithPath: stack.proxy.configPath))
        stack.proxy.child.signal(SIGHUP)
        let log = stack.proxy.waitForLog("ats-proxy: reloaded")
        #expect(log.contains("ats-proxy: reloaded"), "\(log)")
        let after = try stack.curl(url)
        #expect(after.httpCode == 200)
        #expect(after.bodyText == "hello from plain-origin\n")
        client.send(request)
        let same = client.readResponse()
        #expect(same?.head.hasPrefix("HTTP/1.1 200") == true, "\(same?.head ?? "connection dropped")")

        // A broken file keeps the previous policy and says why.
        try Data("<plist><dict><key>".utf8).write(to: URL(fileURLWithPath: stack.proxy.configPath))
        stack.proxy.child.signal(SIGHUP)
        let failed = stack.proxy.waitForLog("reload failed, keeping the previous policy")
        #expect(failed.contains("ats-proxy: reload failed, keeping the previous policy"), "\(failed)")
        #expect(try stack.curl(url).httpCode == 200)
        #expect(stack.proxy.isRunning)
    }

    @Test func sigtermLetsInFlightDownloadsFinishThenExits() throws {
        let stack = try ProxyStack(arguments: ["--grace-period", "10"])
        let download = try Child(
            executable: "/usr/bin/curl",
            arguments: [
                "-s", "-S", "--http1.1", "--max-time", "15", "--limit-rate", "4M", "-x",
                "http://\(stack.proxy.address)",
                "--cacert", stack.proxy.caPath, "-o", stack.directory.file("drain.bin"), "-w", "%{http_code}",
                "\(stack.api)/bytes?n=\(6 << 20)",
            ], directory: stack.directory, label: "drain-curl")
        defer { download.stop() }
        // Wait until the transfer is under way, then ask the proxy to stop.
        let started = E2E.poll(timeout: 10) { () -> Bool? in
            let size = (try? FileManager.default.attributesOfItem(atPath: stack.directory.file("drain.bin"))[.size])
            return ((size as? Int) ?? 0) > 0 ? true : nil
        }
        #expect(started == true)
        stack.proxy.child.signal(SIGTERM)
        // New clients are no longer accepted while the download drains.
        let refused = E2E.poll(timeout: 3) { () -> Bool? in (try? RawClient(port: stack.proxy.port)) == nil ? true : nil
        }
        #expect(refused == true, "the listener still accepts after SIGTERM")
        #expect(download.wait(timeout: 15))
        #expect(download.stdoutText == "200", "\(download.stderrText)")
        let size = try FileManager.default.attributesOfItem(atPath: stack.directory.file("drain.bin"))[.size] as? Int
        #expect(size == 6 << 20)
        #expect(stack.proxy.child.wait(timeout: 12), "the proxy did not exit after draining")
        #expect(stack.proxy.child.process.terminationStatus == 0)
    }

    @Test func thousandConcurrentConnections() throws {
        let limit = E2E.raiseFileLimit(to: 8192)
        #expect(limit >= 4096, "RLIMIT_NOFILE \(limit)")
        let stack = try ProxyStack()
        let start = Date()
        let result = try E2E.run(
            "/usr/bin/python3",
            [
                E2E.fixture("concurrency_client.py"), "--port", "\(stack.proxy.port)", "--url", "\(stack.legacy)/hello",
                "--expect", "hello from plain-origin\\n", "--count", "1000", "--deadline", "20",
            ], timeout: 25)
        #expect(result.stdoutText.contains("OPEN 1000"), "\(result.stdoutText) \(result.stderrText)")
        #expect(result.stdoutText.contains("OK 1000"), "\(result.stdoutText) \(result.stderrText.suffix(2000))")
        #expect(Date().timeIntervalSince(start) < 25)
        #expect(stack.proxy.isRunning)
        #expect(try stack.curl("\(stack.api)/hello").httpCode == 200)
    }

    /// Out of file descriptors (`EMFILE`): the listener pauses and says so instead of spinning or
    /// dying, a client already connected is still served, and new clients are served again once
    /// descriptors are free.
    @Test func runningOutOfDescriptorsPausesAcceptingAndRecovers() throws {
        let stack = try ProxyStack()
        let pid = stack.proxy.child.pid
        let request =
            "GET \(stack.legacy)/hello HTTP/1.1\r\nHost: legacy.example.test:\(stack.plainOrigin.port)\r\n\r\n"
        let veteran = try RawClient(port: stack.proxy.port)
        veteran.send(request)
        #expect(veteran.readResponse()?.head.hasPrefix("HTTP/1.1 200") == true)

        // Leave the proxy a handful of descriptors above what it holds now (util-linux prlimit:
        // glibc's prlimit() is not visible to Swift).
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        let originalSoft = try #require(Self.softFileLimit(pid: pid))
        let squeeze = try E2E.run("/usr/bin/prlimit", ["--pid", "\(pid)", "--nofile=\(open + 6):"], timeout: 10)
        #expect(squeeze.status == 0, "\(squeeze.stderrText)")
        #expect(Self.softFileLimit(pid: pid) == "\(open + 6)")

        // More idle clients than fit: the kernel's backlog holds the ones the proxy cannot take.
        var idle = try (0..<24).map { _ in try RawClient(port: stack.proxy.port, timeout: 5) }
        let log = stack.proxy.waitForLog("accept paused")
        #expect(log.contains("accept paused for 100 ms"), "\(log.suffix(2000))")
        #expect(stack.proxy.isRunning)
        // The pooled upstream connection serves the veteran without a new descriptor.
        veteran.send(request)
        #expect(veteran.readResponse()?.head.hasPrefix("HTTP/1.1 200") == true)

        idle.removeAll()
        let restore = try E2E.run("/usr/bin/prlimit", ["--pid", "\(pid)", "--nofile=\(originalSoft):"], timeout: 10)
        #expect(restore.status == 0, "\(restore.stderrText)")
        let served = E2E.poll(timeout: 10) { () -> Bool? in
            (try? stack.curl("\(stack.legacy)/hello").httpCode) == 200 ? true : nil
        }
        #expect(served == true)
        #expect(stack.proxy.isRunning)
    }

    /// The soft `Max open files` value in /proc/PID/limits.
    static func softFileLimit(pid: Int32) -> String? {
        guard let limits = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8),
            let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") })
        else { return nil }
        return line.split(separator: " ").dropFirst(3).first.map(String.init)
    }

    @Test func maxConnectionsAnswers503() throws {
        let stack = try ProxyStack(arguments: ["--max-connections", "2"])
        let first = try RawClient(port: stack.proxy.port)
        let second = try RawClient(port: stack.proxy.port)
        // Both are admitted: they are served.
        for client in [first, second] {
            client.send(
                "GET \(stack.legacy)/hello HTTP/1.1\r\nHost: legacy.example.test:\(stack.plainOrigin.port)\r\n\r\n")
            #expect(client.readResponse()?.head.hasPrefix("HTTP/1.1 200") == true)
        }
        let third = try RawClient(port: stack.proxy.port, timeout: 5)
        let (bytes, closed) = third.readToEnd()
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"), "\(text)")
        #expect(closed)
        let viaCurl = try stack.curl("\(stack.legacy)/hello")
        #expect(viaCurl.httpCode == 503)

        // Once a client leaves, a new one is admitted again.
        _ = consume first
        let admitted = E2E.poll(timeout: 5) { () -> Bool? in
            (try? stack.curl("\(stack.legacy)/hello").httpCode) == 200 ? true : nil
        }
        #expect(admitted == true)
        _ = second
    }

    @Test
    func overLimit503IsWellFramed() throws {
        let stack = try ProxyStack(arguments: ["--max-connections", "1"])
        let first = try RawClient(port: stack.proxy.port)
        first.send("GET \(stack.legacy)/hello HTTP/1.1\r\nHost: legacy.example.test:\(stack.plainOrigin.port)\r\n\r\n")
        #expect(first.readResponse()?.head.hasPrefix("HTTP/1.1 200") == true)
        let second = try RawClient(port: stack.proxy.port, timeout: 5)
        let text = String(decoding: second.readToEnd().bytes, as: UTF8.self)
        let split = try #require(text.range(of: "\r\n\r\n"), "\(text)")
        let head = String(text[..<split.lowerBound])
        let body = text[split.upperBound...]
        // The body is exactly Content-Length bytes long (no stray bytes after the message).
        #expect(head.headerValue("Content-Length") == "\(body.utf8.count)", "\(text.debugDescription)")
    }

    @Test func requestsToTheProxyItselfAreNotLooped() throws {
        let stack = try ProxyStack()
        let port = stack.proxy.port
        for authority in ["127.0.0.1:\(port)", "localhost:\(port)"] {
            let client = try RawClient(port: port, timeout: 5)
            client.send("GET http://\(authority)/loop HTTP/1.1\r\nHost: \(authority)\r\n\r\n")
            let (bytes, _) = client.readToEnd()
            #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 508 "), "\(authority)")

            let tunnel = try RawClient(port: port, timeout: 5)
            tunnel.send("CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n")
            let (connectBytes, closed) = tunnel.readToEnd()
            #expect(String(decoding: connectBytes, as: UTF8.self).hasPrefix("HTTP/1.1 508 "), "CONNECT \(authority)")
            #expect(closed)
        }
        let viaCurl = try stack.curl("http://127.0.0.1:\(port)/x")
        #expect(viaCurl.httpCode == 508)
        #expect(stack.proxy.isRunning)
    }

    /// `--listen 127.0.0.1:0` binds an ephemeral port; requests to that bound port are still the
    /// proxy itself.
    @Test
    func loopDetectionKnowsTheBoundPortOfAnEphemeralListener() throws {
        let directory = try TemporaryDirectory("ephemeral")
        let config = try directory.write("Info.plist", infoPlist(""))
        let child = try Child(
            executable: CLITests.binary.path,
            arguments: [
                "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", directory.file("ca"),
                // Bounds the damage if the request is looped back into the proxy.
                "--max-connections", "50",
            ],
            directory: directory, label: "proxy")
        defer { child.stop() }
        let port = try #require(
            E2E.poll(timeout: 10) { () -> Int? in
                guard
                    let range = child.stderrText.range(
                        of: #"listening on 127\.0\.0\.1:\d+"#, options: .regularExpression)
                else { return nil }
                return Int(child.stderrText[range].split(separator: ":").last ?? "")
            }, "\(child.stderrText)")
        let client = try RawClient(port: port, timeout: 5)
        client.send("GET http://127.0.0.1:\(port)/loop HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        let (bytes, _) = client.readToEnd()
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 508 "), "\(text.prefix(300))")
    }
}
