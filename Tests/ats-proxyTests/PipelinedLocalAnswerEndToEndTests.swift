import Foundation
import Testing

/// The `proxy-session` fuzz finding against a real proxy process (see `ProxySessionFuzzRegressionTests`): a client
/// pipelines a request the proxy answers itself (the onboarding page) and one it forwards to an origin. Before the
/// fix the second request's exchange was ended twice and the proxy process died on the trap.
@Suite(.serialized) struct PipelinedLocalAnswerEndToEndTests {
    /// A python3 client and origin in one script: the origin listens on 127.0.0.1, the client writes both requests
    /// in one send, reads until both responses are complete (or the proxy closes), and prints what it read.
    static let script = #"""
        import socket, sys, threading
        proxy_port = int(sys.argv[1])
        origin = socket.socket()
        origin.bind(("127.0.0.1", 0))
        origin.listen(1)
        origin_port = origin.getsockname()[1]

        def serve():
            conn, _ = origin.accept()
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            sys.stderr.write("origin got %r\n" % data)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\norigin")
            conn.close()

        threading.Thread(target=serve, daemon=True).start()
        client = socket.create_connection(("127.0.0.1", proxy_port), timeout=10)
        client.sendall(
            b"GET http://ats-proxy.invalid/ HTTP/1.1\r\nHost: ats-proxy.invalid\r\n\r\n"
            + b"GET http://127.0.0.1:%d/next HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (origin_port, origin_port))
        received = b""
        while not received.endswith(b"origin"):
            chunk = client.recv(65536)
            if not chunk:
                break
            received += chunk
        sys.stdout.write(received.decode("utf-8", "replace"))
        """#

    @Test func theOnboardingPageAndAPipelinedForwardedRequestAreBothAnswered() throws {
        let proxy = try OnboardingTests.RunningProxy()
        let result = try CLITests.runTool("/usr/bin/python3", ["-c", Self.script, String(proxy.port)], timeout: 20)
        #expect(result.status == 0)
        // Two complete responses in order: the page, then the origin's (the proxy did not die in between).
        #expect(result.stdout.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(result.stdout.components(separatedBy: "HTTP/1.1 200 OK\r\n").count == 3)
        #expect(result.stdout.contains("ats-proxy"))
        #expect(result.stdout.hasSuffix("origin"))
        #expect(proxy.process.isRunning)
    }
}
