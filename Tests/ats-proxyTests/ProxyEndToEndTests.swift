import ATSTestSupport
import Foundation
import Testing

/// One proxy in front of a TLS origin (`api.example.test`, trusted through `--upstream-ca`) and a
/// plain origin reachable as `legacy.example.test` (cleartext exception) and
/// `plain.example.test` (no exception: ATS blocks it; on the TLS origin's port it reaches the TLS
/// origin, whose leaf also names it, for `--cleartext upgrade`).
struct ProxyStack {
    let directory: TemporaryDirectory
    let pki: TestPKI
    let tlsOrigin: Origin
    let plainOrigin: Origin
    let proxy: ProxyProcess
    /// Origins added by the test, by the host name the proxy resolves to them.
    let extras: [String: Origin]

    /// - Parameters:
    ///   - extraATS: more NSExceptionDomains entries.
    ///   - outerATS: more NSAppTransportSecurity keys (e.g. NSPinnedDomains).
    ///   - extraOrigins: origins the test starts (with this stack's directory and PKI), by host.
    ///   - relativeConfig: the proxy names its Info.plist without the temporary folder (``ProxyProcess``).
    init(
        extraATS: String = "", outerATS: String = "", arguments: [String] = [], environment: [String: String] = [:],
        relativeConfig: Bool = false,
        extraOrigins: (TemporaryDirectory, TestPKI) throws -> [(host: String, origin: Origin)] = { _, _ in [] }
    ) throws {
        directory = try TemporaryDirectory("stack")
        pki = try TestPKI(name: "origin-ca", directory: directory)
        let leaf = try pki.leaf(["api.example.test", "plain.example.test"], file: "api")
        tlsOrigin = try Origin(name: "tls-origin", directory: directory, tls: leaf)
        plainOrigin = try Origin(name: "plain-origin", directory: directory)
        let added = try extraOrigins(directory, pki)
        extras = Dictionary(added.map { ($0.host, $0.origin) }, uniquingKeysWith: { first, _ in first })
        let plist = infoPlist(
            "<key>NSExceptionDomains</key><dict>\(cleartextException("legacy.example.test"))\(extraATS)</dict>"
                + outerATS)
        proxy = try ProxyProcess(
            plist: plist,
            resolve: [
                ("api.example.test", tlsOrigin.port), ("legacy.example.test", plainOrigin.port),
                ("plain.example.test", plainOrigin.port), ("plain.example.test", tlsOrigin.port),
            ] + added.map { ($0.host, $0.origin.port) }, upstreamCAs: [pki.caPath], arguments: arguments,
            environment: environment, relativeConfig: relativeConfig)
    }

    func url(_ host: String, _ path: String = "/hello", scheme: String = "https") -> String {
        "\(scheme)://\(host):\(extras[host]?.port ?? 0)\(path)"
    }

    var api: String { "https://api.example.test:\(tlsOrigin.port)" }
    var legacy: String { "http://legacy.example.test:\(plainOrigin.port)" }
    var plain: String { "http://plain.example.test:\(plainOrigin.port)" }

    func curl(
        _ url: String, _ arguments: [String] = [], writeOut: String = "%{http_code}", timeout: Double = 30
    ) throws -> CurlResult {
        try Curl.fetch(
            url, proxy: proxy, cacert: proxy.caPath, arguments: arguments, writeOut: writeOut, timeout: timeout,
            directory: directory)
    }
}

/// Statuses, headers and bodies through the proxy with curl and Python's http.client.
@Suite(.serialized) struct ProxyEndToEndHTTPTests {
    @Test func interceptedHTTPSStatusesHeadersAndBodies() throws {
        let stack = try ProxyStack()
        let hello = try stack.curl("\(stack.api)/hello")
        #expect(hello.exitCode == 0, "\(hello.stderr)")
        #expect(hello.httpCode == 200)
        #expect(hello.bodyText == "hello from tls-origin\n")
        #expect(hello.headers["x-origin"] == "tls-origin")
        #expect(hello.headers["content-length"] == "22")

        let notFound = try stack.curl("\(stack.api)/status/404")
        #expect(notFound.httpCode == 404)
        #expect(notFound.headers["x-custom"] == "value")
        #expect(notFound.bodyText == "status 404\n")
        #expect(notFound.headers["x-ats-error"] == nil)

        // The origin has no PUT handler: its own 501 passes through.
        let put = try stack.curl("\(stack.api)/status/201", ["-X", "PUT", "--data", "x"])
        #expect(put.httpCode == 501)
        #expect(put.headers["x-ats-error"] == nil)

        let noContent = try stack.curl("\(stack.api)/status/204")
        #expect(noContent.httpCode == 204)
        #expect(noContent.body.isEmpty)
        #expect(noContent.headers["x-custom"] == "value")

        let head = try stack.curl("\(stack.api)/hello", ["-I"])
        #expect(head.httpCode == 200)
        #expect(head.headers["content-length"] == "22")
        #expect(head.body.isEmpty || head.bodyText.hasPrefix("HTTP/1.1 200"))

        // The origin saw the intercepted requests with the right Host.
        let requests = stack.tlsOrigin.requests
        #expect(requests.contains("GET /hello Host=api.example.test:\(stack.tlsOrigin.port)"), "\(requests)")
        #expect(requests.contains("GET /status/404 Host=api.example.test:\(stack.tlsOrigin.port)"))
    }

    @Test func allowedCleartextIsForwardedWithAbsoluteFormRewritten() throws {
        let stack = try ProxyStack()
        let result = try stack.curl("\(stack.legacy)/hello?x=1")
        #expect(result.httpCode == 200)
        #expect(result.bodyText == "hello from plain-origin\n")
        #expect(stack.plainOrigin.requests == ["GET /hello?x=1 Host=legacy.example.test:\(stack.plainOrigin.port)"])
    }

    @Test func hopByHopHeadersAreRemovedEndToEndHeadersKept() throws {
        let stack = try ProxyStack()
        let result = try stack.curl(
            "\(stack.api)/headers",
            [
                "-H", "Connection: keep-alive, X-Hop", "-H", "X-Hop: secret", "-H", "Keep-Alive: timeout=5",
                "-H", "TE: trailers", "-H", "Proxy-Authorization: Basic Zm9vOmJhcg==", "-H",
                "Proxy-Connection: keep-alive", "-H", "X-End-To-End: kept", "-H", "Authorization: Bearer abc",
            ])
        #expect(result.httpCode == 200, "\(result.stderr)")
        let pairs = (try JSONSerialization.jsonObject(with: result.body) as? [[String]]) ?? []
        let names = Set(pairs.map { $0[0].lowercased() })
        for hop in ["connection", "x-hop", "keep-alive", "te", "proxy-authorization", "proxy-connection"] {
            #expect(!names.contains(hop), "\(hop) reached the origin: \(pairs)")
        }
        #expect(pairs.contains(["X-End-To-End", "kept"]))
        #expect(pairs.contains(["Authorization", "Bearer abc"]))
        #expect(pairs.contains(["Host", "api.example.test:\(stack.tlsOrigin.port)"]))
    }

    @Test func download20MiBIsChecksummed() throws {
        let stack = try ProxyStack()
        let size = 20 << 20
        let result = try stack.curl("\(stack.api)/bytes?n=\(size)", timeout: 60)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.httpCode == 200)
        #expect(result.body.count == size)
        #expect(try result.bodyMatchesChecksum())
    }

    @Test func upload5MiBIsEchoedAndChecksummed() throws {
        let stack = try ProxyStack()
        let upload = stack.directory.file("upload.bin")
        var bytes = [UInt8](repeating: 0, count: 5 << 20)
        for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 13) }
        try Data(bytes).write(to: URL(fileURLWithPath: upload))
        let uploadHash = try E2E.sha256Hex(ofFile: upload)
        // curl sends Expect: 100-continue for a body this large: the proxy must relay the 100 (or
        // let curl proceed) and stream the body.
        let result = try stack.curl(
            "\(stack.api)/echo", ["--data-binary", "@\(upload)", "-H", "Content-Type: application/octet-stream"],
            timeout: 60)
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.httpCode == 200)
        #expect(result.headers["x-request-length"] == "\(5 << 20)")
        #expect(result.headers["x-request-sha256"] == uploadHash)
        #expect(result.headers["x-request-chunked"] == "no")
        #expect(try E2E.sha256Hex(ofFile: result.bodyPath) == uploadHash)
    }

    @Test func chunkedBodiesInBothDirections() throws {
        let stack = try ProxyStack()
        let upload = stack.directory.file("chunked-upload.bin")
        let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        try Data(bytes).write(to: URL(fileURLWithPath: upload))
        let uploadHash = try E2E.sha256Hex(ofFile: upload)
        let echoed = try stack.curl(
            "\(stack.api)/echo?chunked=1",
            ["--data-binary", "@\(upload)", "-H", "Transfer-Encoding: chunked", "-H", "Expect:"], timeout: 60)
        #expect(echoed.exitCode == 0, "\(echoed.stderr)")
        #expect(echoed.httpCode == 200)
        #expect(echoed.headers["x-request-chunked"] == "yes")
        #expect(echoed.headers["x-request-sha256"] == uploadHash)
        #expect(echoed.headers["transfer-encoding"] == "chunked")
        #expect(try E2E.sha256Hex(ofFile: echoed.bodyPath) == uploadHash)

        let size = 3_000_017
        let download = try stack.curl("\(stack.api)/chunked?n=\(size)", ["--raw"], timeout: 60)
        #expect(download.httpCode == 200)
        #expect(download.headers["transfer-encoding"] == "chunked")
        let decoded = try stack.curl("\(stack.api)/chunked?n=\(size)", timeout: 60)
        #expect(decoded.body.count == size)
        #expect(try decoded.bodyMatchesChecksum())
        #expect(download.body.count > size, "the raw chunked framing reaches the client")

        // Cleartext chunked through an allowed http:// host too.
        let plain = try stack.curl("\(stack.legacy)/chunked?n=100000")
        #expect(plain.body.count == 100_000)
        #expect(try plain.bodyMatchesChecksum())
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() throws {
        let stack = try ProxyStack()
        // curl: five URLs in one invocation reuse the tunnel (num_connects is 0 after the first).
        let urls = (1...5).map { "\(stack.api)/status/\(200 + $0)" }
        let directory = stack.directory
        var arguments = ["-s", "-S", "--http1.1", "--max-time", "30", "-x", "http://\(stack.proxy.address)"]
        arguments += ["--cacert", stack.proxy.caPath, "-w", "%{http_code} %{num_connects}\\n", "-o", "/dev/null"]
        for _ in urls.dropFirst() { arguments += ["-o", "/dev/null"] }
        let result = try E2E.run("/usr/bin/curl", arguments + urls, timeout: 35)
        _ = directory
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines == ["201 1", "202 0", "203 0", "204 0", "205 0"], "\(result.stderrText)")

        // Python http.client: a CONNECT tunnel, then several requests on it, including a POST.
        let script = """
            import http.client, ssl, sys, json
            ctx = ssl.create_default_context(cafile=sys.argv[2])
            c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[1]), context=ctx, timeout=10)
            c.set_tunnel("api.example.test", int(sys.argv[3]))
            out = []
            for i in range(4):
                if i == 2:
                    c.request("POST", "/echo", body=b"x" * 1000)
                else:
                    c.request("GET", "/hello")
                r = c.getresponse()
                body = r.read()
                out.append([r.status, len(body), r.getheader("X-Conn")])
            print(json.dumps(out))
            """
        let python = try E2E.run(
            "/usr/bin/python3",
            ["-c", script, "\(stack.proxy.port)", stack.proxy.caPath, "\(stack.tlsOrigin.port)"], timeout: 30)
        #expect(python.status == 0, "\(python.stderrText)")
        let rows = (try? JSONSerialization.jsonObject(with: python.stdout) as? [[Any]]) ?? []
        #expect(rows.count == 4)
        #expect(rows.map { $0[0] as? Int } == [200, 200, 200, 200])
        #expect(rows.map { $0[1] as? Int } == [22, 22, 1000, 22])
        // The upstream connection is reused for the same (host, port, decision).
        let connections = Set(rows.compactMap { $0[2] as? String })
        #expect(connections.count == 1, "upstream connections used: \(connections)")

        // Absolute-form cleartext keep-alive through Python urllib's proxy handler semantics.
        let plainScript = """
            import http.client, sys
            c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
            url = sys.argv[2]
            statuses = []
            for i in range(3):
                c.request("GET", url + "/hello")
                r = c.getresponse()
                statuses.append((r.status, r.read().decode()))
            print(statuses)
            """
        let plain = try E2E.run(
            "/usr/bin/python3", ["-c", plainScript, "\(stack.proxy.port)", stack.legacy], timeout: 30)
        #expect(
            plain.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
                == Array(
                    repeating: "(200, 'hello from plain-origin\\n')", count: 3
                ).joined(separator: ", ").wrappedInBrackets, "\(plain.stderrText)")
    }

    @Test func clientSessionTicketRidesWithTheFirstResponseAndResumes() throws {
        // TLS 1.3 through a CONNECT tunnel: after the handshake the proxy stays silent (no ticket
        // record of its own, which would cost a write and wake the client), the first response
        // brings a ticket, and a second tunnel resumes with it.
        let stack = try ProxyStack()
        let script = """
            import select, socket, ssl, sys, json
            port, ca, origin = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
            ctx = ssl.create_default_context(cafile=ca)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_3
            def tunnel(session=None):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(f"CONNECT api.example.test:{origin} HTTP/1.1\\r\\nHost: api.example.test:{origin}\\r\\n\\r\\n".encode())
                head = b""
                while not head.endswith(b"\\r\\n\\r\\n"):
                    head += s.recv(1)
                assert head.startswith(b"HTTP/1.1 200"), head
                return ctx.wrap_socket(s, server_hostname="api.example.test", session=session)
            def get(t):
                t.sendall(f"GET /hello HTTP/1.1\\r\\nHost: api.example.test:{origin}\\r\\n\\r\\n".encode())
                data = b""
                while b"hello from" not in data:
                    chunk = t.recv(4096)
                    if not chunk: break
                    data += chunk
                return data.split(b"\\r\\n")[0].decode()
            first = tunnel()
            quiet = select.select([first], [], [], 0.5)[0] == []
            status = get(first)
            session = first.session
            second = tunnel(session)
            status2 = get(second)
            print(json.dumps({"quiet": quiet, "status": status, "ticket": bool(session and session.has_ticket),
                "reused": second.session_reused, "status2": status2}))
            """
        let python = try E2E.run(
            "/usr/bin/python3",
            ["-c", script, "\(stack.proxy.port)", stack.proxy.caPath, "\(stack.tlsOrigin.port)"], timeout: 30)
        #expect(python.status == 0, "\(python.stderrText)")
        let result = (try? JSONSerialization.jsonObject(with: python.stdout) as? [String: Any]) ?? [:]
        #expect(result["quiet"] as? Bool == true, "the proxy sent something before the first request: \(result)")
        #expect(result["status"] as? String == "HTTP/1.1 200 OK", "\(result)")
        #expect(result["ticket"] as? Bool == true, "no session ticket with the first response: \(result)")
        #expect(result["reused"] as? Bool == true, "the second tunnel did not resume: \(result)")
        #expect(result["status2"] as? String == "HTTP/1.1 200 OK", "\(result)")
    }

    @Test func expectContinueIsRelayedBeforeTheBody() throws {
        let stack = try ProxyStack()
        let client = try RawClient(port: stack.proxy.port, timeout: 5)
        client.send(
            "POST \(stack.legacy)/echo HTTP/1.1\r\nHost: legacy.example.test:\(stack.plainOrigin.port)\r\n"
                + "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        // The body is withheld until the interim response arrives.
        let interim = try #require(client.readResponse(), "no 100 Continue")
        #expect(interim.head == "HTTP/1.1 100 Continue", "\(interim.head)")
        client.send("hello")
        let final = try #require(client.readResponse())
        #expect(final.head.hasPrefix("HTTP/1.1 200"), "\(final.head)")
        #expect(final.head.headerValue("X-Request-Length") == "5")
        #expect(String(decoding: final.body, as: UTF8.self) == "hello")
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let stack = try ProxyStack()
        let client = try RawClient(port: stack.proxy.port, timeout: 5)
        let host = "Host: legacy.example.test:\(stack.plainOrigin.port)\r\n"
        client.send(
            "GET \(stack.legacy)/status/201 HTTP/1.1\r\n\(host)\r\n"
                + "POST \(stack.legacy)/echo HTTP/1.1\r\n\(host)Content-Length: 3\r\n\r\nabc"
                + "GET \(stack.legacy)/status/202 HTTP/1.1\r\n\(host)\r\n")
        let first = client.readResponse()
        let second = client.readResponse()
        let third = client.readResponse()
        #expect(first?.head.hasPrefix("HTTP/1.1 201") == true, "\(first?.head ?? "none")")
        #expect(second?.head.hasPrefix("HTTP/1.1 200") == true, "\(second?.head ?? "none")")
        #expect(second.map { String(decoding: $0.body, as: UTF8.self) } == "abc")
        #expect(third?.head.hasPrefix("HTTP/1.1 202") == true, "\(third?.head ?? "none")")
    }

    @Test func oneClientConnectionSwitchesBetweenOrigins() throws {
        let stack = try ProxyStack(extraATS: cleartextException("second.example.test")) { directory, _ in
            [("second.example.test", try Origin(name: "second", directory: directory))]
        }
        let second = stack.url("second.example.test", scheme: "http")
        let client = try RawClient(port: stack.proxy.port, timeout: 5)
        var bodies: [String] = []
        for url in ["\(stack.legacy)/hello", second, "\(stack.legacy)/hello", "\(stack.plain)/hello", second] {
            let host = URL(string: url)?.host ?? ""
            let port = URL(string: url)?.port ?? 80
            client.send("GET \(url) HTTP/1.1\r\nHost: \(host):\(port)\r\n\r\n")
            let response = client.readResponse()
            bodies.append(response.map { String(decoding: $0.body, as: UTF8.self) } ?? "closed")
        }
        #expect(bodies.count == 5)
        #expect(bodies[0] == "hello from plain-origin\n")
        #expect(bodies[1] == "hello from second\n")
        #expect(bodies[2] == "hello from plain-origin\n")
        #expect(bodies[3].contains("NSURLErrorDomain -1022"), "a blocked load on the same connection: \(bodies[3])")
        #expect(bodies[4] == "hello from second\n")
        #expect(stack.plainOrigin.requests.count == 2)
    }

    @Test func laterClientsReuseTheIdleUpstreamConnection() throws {
        // Kept: separate client connections (curl runs) ride on the origin connection an earlier
        // client left idle, through a tunnel (TLS upstream, judged once) and in cleartext. Pools are
        // per event loop and the harness runs two loops that take clients in turn, so runs 1 and 3
        // share a connection, and runs 2 and 4.
        let pooled = try ProxyStack()
        for url in ["\(pooled.api)/hello", "\(pooled.legacy)/hello"] {
            let connections = try (1...4).map { _ in try pooled.curl(url).headers["x-conn"] ?? "none" }
            #expect(!connections.contains("none"))
            #expect(connections[0] == connections[2], "\(url): origin connections \(connections)")
            #expect(connections[1] == connections[3], "\(url): origin connections \(connections)")
            #expect(Set(connections).count == 2, "\(url): origin connections \(connections)")
        }
        // Not kept with --upstream-idle-timeout 0: every client gets its own origin connection.
        let unpooled = try ProxyStack(arguments: ["--upstream-idle-timeout", "0"])
        let connections = try (1...3).map { _ in try unpooled.curl("\(unpooled.api)/hello").headers["x-conn"] ?? "" }
        #expect(Set(connections).count == 3, "origin connections \(connections)")
    }

    @Test(arguments: [
        ["-H", "Authorization: NTLM TlRMTVNTUAABAAAAB4IIogAAAAAAAAAAAAAAAAAAAAAKAGFKAAAADw=="],
        [
            "-H",
            "Authorization: Negotiate YIIGhgYGKwYBBQUCoIIGejCCBnagMDAuBgkqhkiC9xIBAgIGCSqGSIb3EgECAgYKKwYBBAGCNwICHgYKKwYBBAGCNwICCg==",
        ],
    ])
    func aConnectionAuthenticatedWithNTLMOrNegotiateIsNeverHandedToAnotherClient(auth: [String]) throws {
        // One loop, so that every client would meet the same pool. Runs without that authentication share
        // an origin connection; an authenticating request gets a connection of its own (HTTP/1.1 only, keyed
        // apart), which is never parked for anyone else, not even another authenticating client.
        let stack = try ProxyStack(arguments: ["--loops", "1"])
        func run(_ arguments: [String] = []) throws -> String {
            let result = try stack.curl("\(stack.api)/hello", arguments)
            #expect(result.httpCode == 200, "\(result.statusLine) \(result.stderr)")
            usleep(300_000)  // the proxy parks the upstream when it sees the client close
            return result.headers["x-conn"] ?? "none"
        }
        let first = try run()
        let second = try run()
        #expect(first == second && first != "none", "origin connections \(first) \(second)")
        let authenticated = try run(auth)
        #expect(authenticated != second && authenticated != "none", "\(authenticated) \(second)")
        let otherUser = try run(auth)
        #expect(otherUser != authenticated && otherUser != "none", "origin connections \(authenticated) \(otherUser)")
        let anonymous = try run()
        #expect(anonymous == second, "the anonymous pool: \(second) then \(anonymous)")
    }

    @Test func idleClientsHandTheirUpstreamsBackAndThePoolKeepsAtMostItsCap() throws {
        // 40 keep-alive clients each fetch once and stay open. After the 1 s linger their upstreams go back to
        // the pools (two loops, 16 parked per key each): the surplus is closed, and every client's next
        // request still works, on a pooled connection or a new one.
        let stack = try ProxyStack()
        let port = stack.plainOrigin.port
        let request = "GET \(stack.legacy)/hello HTTP/1.1\r\nHost: legacy.example.test:\(port)\r\n\r\n"
        let clients = try (0..<40).map { _ in try RawClient(port: stack.proxy.port) }
        for client in clients {
            client.send(request)
            #expect(client.readResponse()?.head.hasPrefix("HTTP/1.1 200 ") == true)
        }
        let settled = E2E.poll(timeout: 10) { () -> Int? in
            let open = Self.establishedConnections(toPort: port)
            return open <= 32 ? open : nil
        }
        #expect(settled != nil, "origin connections still open: \(Self.establishedConnections(toPort: port))")
        #expect((settled ?? 0) > 0, "idle upstreams are parked, not all closed")
        for client in clients {
            client.send(request)
            #expect(client.readResponse()?.head.hasPrefix("HTTP/1.1 200 ") == true)
        }
    }

    /// Established TCP connections on this host whose remote end is 127.0.0.1:`port` (from /proc/net/tcp).
    static func establishedConnections(toPort port: Int) -> Int {
        // Read to EOF: /proc files report size 0, and String(contentsOfFile:) stops after the first page.
        let data = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() ?? Data()
        let table = String(decoding: data, as: UTF8.self)
        let remote = String(format: "0100007F:%04X", port)
        return table.split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[2] == remote && fields[3] == "01"
        }.count
    }

    /// A field value byte that is not UTF-8 (obs-text, e.g. Latin-1) is relayed as it is, both ways.
    @Test(arguments: ["api", "legacy"])
    func obsTextBytesInHeaderValuesAreRelayedUnchanged(origin: String) throws {
        let stack = try ProxyStack()
        let base = origin == "api" ? stack.api : stack.legacy
        // curl -D writes the response head byte for byte.
        let headPath = stack.directory.file("latin1-head-\(origin)")
        let fetched = try E2E.run(
            "/usr/bin/curl",
            [
                "-s", "-S", "--http1.1", "--max-time", "20", "-x", "http://\(stack.proxy.address)", "--cacert",
                stack.proxy.caPath, "-D", headPath, "-o", "/dev/null", "\(base)/latin1",
            ], timeout: 25)
        #expect(fetched.status == 0, "\(fetched.stderrText)")
        let head = [UInt8](FileManager.default.contents(atPath: headPath) ?? Data())
        let line = Array("X-Latin1: caf".utf8) + [0xE9, 0x0D, 0x0A]
        #expect(head.indices.contains { head[$0...].starts(with: line) }, "\(String(decoding: head, as: UTF8.self))")

        // Request direction: curl reads the header line from a file (arguments cannot carry the byte).
        let headerFile = stack.directory.file("latin1-request-header")
        try Data(Array("X-Latin1: caf".utf8) + [0xE9]).write(to: URL(fileURLWithPath: headerFile))
        let echoed = try stack.curl("\(base)/headers", ["-H", "@\(headerFile)"])
        #expect(echoed.httpCode == 200)
        // The origin decodes header bytes as Latin-1 and answers in JSON: 0xE9 arrives as U+00E9.
        let pairs = try JSONSerialization.jsonObject(with: echoed.body) as? [[String]] ?? []
        #expect(pairs.contains(["X-Latin1", "caf\u{e9}"]), "\(pairs)")
    }

    @Test func http10ClientGetsAnHTTP10CompatibleAnswer() throws {
        let stack = try ProxyStack()
        let result = try stack.curl("\(stack.legacy)/chunked?n=50000", ["--http1.0"])
        #expect(result.httpCode == 200)
        #expect(result.body.count == 50_000)
        #expect(result.headers["transfer-encoding"] == nil, "chunked sent to an HTTP/1.0 client")
        #expect(try result.bodyMatchesChecksum())
    }

    @Test func blockedRequestWithABodyIsAnsweredWithoutReachingTheOrigin() throws {
        let stack = try ProxyStack()
        let upload = stack.directory.file("blocked-upload.bin")
        try Data(repeating: 66, count: 2 << 20).write(to: URL(fileURLWithPath: upload))
        let result = try stack.curl("\(stack.plain)/echo", ["--data-binary", "@\(upload)"])
        #expect(result.httpCode == 403, "\(result.stderr)")
        #expect(result.headers["x-ats-error"] == "-1022")
        #expect(stack.plainOrigin.requests.isEmpty)
        #expect(stack.proxy.isRunning)
    }

    /// Resident memory of a process in bytes (from /proc).
    static func residentBytes(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    /// A client that reads slowly must make the proxy stop reading from the origin, not buffer
    /// the body (issue 4: constant memory whatever the size).
    @Test(arguments: ["legacy", "api"])
    func slowClientDoesNotMakeTheProxyBuffer(host: String) throws {
        let stack = try ProxyStack()
        let base = host == "api" ? stack.api : stack.legacy
        #expect(try stack.curl("\(base)/bytes?n=1000000").httpCode == 200)
        let pid = stack.proxy.child.pid
        let baseline = Self.residentBytes(pid)
        let slow = try Child(
            executable: "/usr/bin/curl",
            arguments: [
                "-s", "--http1.1", "-o", "/dev/null", "--max-time", "4", "--limit-rate", "1M", "-x",
                "http://\(stack.proxy.address)",
                "--cacert", stack.proxy.caPath, "\(base)/bytes?n=\(600 << 20)",
            ], directory: stack.directory, label: "slow-curl")
        defer { slow.stop() }
        var peak = baseline
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline {
            peak = max(peak, Self.residentBytes(pid))
            usleep(100_000)
        }
        slow.stop()
        #expect(peak - baseline < 64 << 20, "RSS grew by \((peak - baseline) >> 20) MiB while the client read slowly")
        #expect(try stack.curl("\(base)/hello").httpCode == 200)
    }

    @Test func urllibThroughTheProxy() throws {
        let stack = try ProxyStack()
        let script = """
            import urllib.request, ssl, sys
            proxy = "http://127.0.0.1:" + sys.argv[1]
            ctx = ssl.create_default_context(cafile=sys.argv[2])
            opener = urllib.request.build_opener(
                urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
                urllib.request.HTTPSHandler(context=ctx))
            print(opener.open(sys.argv[3] + "/hello", timeout=10).read().decode(), end="")
            print(opener.open(sys.argv[4] + "/hello", timeout=10).read().decode(), end="")
            try:
                opener.open(sys.argv[5] + "/hello", timeout=10)
            except urllib.error.HTTPError as e:
                print(e.code, e.headers["X-ATS-Error"])
            """
        let result = try E2E.run(
            "/usr/bin/python3",
            ["-c", script, "\(stack.proxy.port)", stack.proxy.caPath, stack.api, stack.legacy, stack.plain],
            timeout: 30)
        #expect(
            result.stdoutText == "hello from tls-origin\nhello from plain-origin\n403 -1022\n", "\(result.stderrText)")
    }
}

extension String {
    fileprivate var wrappedInBrackets: String { "[\(self)]" }
}
