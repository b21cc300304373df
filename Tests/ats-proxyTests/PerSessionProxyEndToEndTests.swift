import ATSTestSupport
import Foundation
import Testing

/// `ATSProxyTesting.session(through:route:)` on Linux, end to end: URLSession (FoundationNetworking) in a child
/// process started without `ats-proxy exec` and without any proxy variable reaches the test origins through the
/// proxy, which records each load; a cleartext load ATS forbids fails with the device's -1022. The same client
/// with a default session goes direct (the names only the proxy resolves do not resolve): the routing came from the
/// per-session call.
@Suite(.serialized) struct PerSessionProxyEndToEndTests {
    @Test func oneSessionThroughTheProxyWithoutExecOrVariables() throws {
        let stack = try ProxyStack()
        let allowed = "\(stack.legacy)/hello?session=1"
        let blocked = "\(stack.plain)/hello?session=1"
        let result = try E2E.run(
            ExecTrustTests.client,
            ["--through", "http-connect", "127.0.0.1", "\(stack.proxy.port)", stack.proxy.caPath, allowed, blocked],
            timeout: 60)
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderrText)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("\(allowed) status 200 ") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("\(blocked) error -1022 ") && !$0.contains(" rule - ") }, "\(lines)")
        let log = stack.proxy.waitForLog("\(blocked) → blocked")
        #expect(
            log.contains("ats-proxy: GET \(allowed) → allowed by exception 200"),
            "the proxy's record of the allowed load: \(log)")
        #expect(log.contains("ats-proxy: GET \(blocked) → blocked -1022"), "\(log)")
        #expect(stack.plainOrigin.requests.filter { $0.contains("session=1") }.count == 1, "only the allowed load")

        let bare = try E2E.run(ExecTrustTests.client, ["--plain", "\(stack.legacy)/hello?session=0"], timeout: 60)
        #expect(bare.stdoutText.contains("error -1003"), "a default session goes direct: \(bare.stdoutText)")
    }

    /// The `.socks5` route on Linux (`socks5h://` for FoundationNetworking's libcurl): the same verdicts through the
    /// proxy's SOCKS5 side, recorded with the SOCKS5 routes.
    @Test func oneSessionThroughSOCKS5() throws {
        let stack = try ProxyStack()
        let allowed = "\(stack.legacy)/hello?socks=1"
        let blocked = "\(stack.plain)/hello?socks=1"
        let result = try E2E.run(
            ExecTrustTests.client,
            ["--through", "socks5", "127.0.0.1", "\(stack.proxy.port)", stack.proxy.caPath, allowed, blocked],
            timeout: 60)
        #expect(result.status == 0, "\(result.stdoutText) \(result.stderrText)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("\(allowed) status 200 ") }, "\(lines)")
        // Through SOCKS5 the -1022 answer is the proxy's 403 inside the tunnel, read as a response.
        #expect(
            lines.contains { $0.hasPrefix("\(blocked) status 403 ") || $0.hasPrefix("\(blocked) error -1022 ") },
            "\(lines)")
        let log = stack.proxy.waitForLog("\(blocked) [via SOCKS5+HTTP] → blocked")
        #expect(log.contains("ats-proxy: GET \(allowed) [via SOCKS5+HTTP] → allowed by exception 200"), "\(log)")
        #expect(stack.plainOrigin.requests.filter { $0.contains("socks=1") }.count == 1, "only the allowed load")
    }
}
