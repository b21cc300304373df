import ATSSystemTools
import Foundation
import Testing

/// The CA onboarding site fetched through a real proxy process with curl (issue 6 item 1).
@Suite(.serialized) struct OnboardingTests {
    /// A proxy process on a free loopback port with its own CA directory; killed on deinit.
    final class RunningProxy {
        let process: ChildProcess
        let port: Int
        let caDirectory: URL

        init() throws {
            caDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "ats-onboard-\(UUID().uuidString)")
            port = try Self.freePort()
            process = try ChildProcess(
                executable: CLITests.binary.path,
                arguments: ["--listen", "127.0.0.1:\(port)", "--ca-dir", caDirectory.path, "--diagnostics", "0"],
                environment: ProcessInfo.processInfo.environment, standardOutput: .null, standardError: .null)
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if (try? CLITests.runTool("/usr/bin/curl", ["-s", "-o", "/dev/null", "http://127.0.0.1:\(port)/"]))?
                    .status
                    == 0
                {
                    return
                }
                usleep(50_000)
            }
        }

        deinit {
            if process.isRunning {
                process.send(SIGTERM)
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: caDirectory)
        }

        static func freePort() throws -> Int {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            return Int(UInt16(bigEndian: address.sin_port))
        }

        /// curl through the proxy: (status, content type, body).
        func fetch(_ url: String, viaProxy: Bool = true) throws -> (Int, String, Data) {
            let output = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
            defer { try? FileManager.default.removeItem(at: output) }
            var arguments = ["-s", "-o", output.path, "-w", "%{http_code} %{content_type}", "--max-time", "10"]
            if viaProxy { arguments += ["-x", "http://127.0.0.1:\(port)"] }
            let result = try CLITests.runTool("/usr/bin/curl", arguments + [url])
            let parts = result.stdout.split(separator: " ", maxSplits: 1).map(String.init)
            return (
                Int(parts.first ?? "") ?? 0, parts.count > 1 ? parts[1] : "", (try? Data(contentsOf: output)) ?? Data()
            )
        }
    }

    /// With a loopback listener the page must not tell a phone to use 127.0.0.1 (issue 16).
    @Test func loopbackListenerPageTellsAPhoneToListenOnTheNetwork() throws {
        let proxy = try RunningProxy()
        let (status, _, body) = try proxy.fetch("http://ats-proxy.invalid/")
        #expect(status == 200)
        let page = String(decoding: body, as: UTF8.self)
        #expect(!page.contains("Server <code>127.0.0.1</code>"))
        #expect(
            page.contains("listens on loopback only (<code>127.0.0.1:\(proxy.port)</code>), which a phone cannot reach")
        )
        #expect(page.contains("Restart it with <code>--listen 0.0.0.0:\(proxy.port)</code>"))
    }

    @Test func pageAndDownloadsHaveTheRightBytesAndTypes() throws {
        let proxy = try RunningProxy()
        let caPEM = try Data(contentsOf: proxy.caDirectory.appendingPathComponent("ats-proxy-ca.pem"))

        let (status, type, html) = try proxy.fetch("http://ats-proxy.invalid/")
        #expect(status == 200 && type == "text/html; charset=utf-8")
        let page = String(decoding: html, as: UTF8.self)
        #expect(page.contains("xcrun simctl keychain booted add-root-cert"))
        #expect(page.contains("Certificate Trust Settings"))
        #expect(!page.contains("<script src") && !page.contains("<link"))

        let (pemStatus, pemType, pem) = try proxy.fetch("http://ats-proxy.invalid/ats-proxy-ca.pem")
        #expect(pemStatus == 200 && pemType == "application/x-pem-file")
        #expect(pem == caPEM)

        let (derStatus, derType, der) = try proxy.fetch("http://ats-proxy.invalid/ats-proxy-ca.cer")
        #expect(derStatus == 200 && derType == "application/x-x509-ca-cert")
        let base64 = String(decoding: caPEM, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("-----") }
            .joined()
        #expect(der == Data(base64Encoded: base64))

        let (profileStatus, profileType, profile) = try proxy.fetch("http://ats-proxy.invalid/ats-proxy.mobileconfig")
        #expect(profileStatus == 200 && profileType == "application/x-apple-aspen-config")
        let plist = try #require(
            try PropertyListSerialization.propertyList(from: profile, format: nil) as? [String: Any])
        #expect(plist["PayloadType"] as? String == "Configuration")
        let payloads = try #require(plist["PayloadContent"] as? [[String: Any]])
        #expect(payloads.count == 1)
        #expect(payloads.first?["PayloadType"] as? String == "com.apple.security.root")
        #expect(payloads.first?["PayloadContent"] as? Data == der)
    }

    @Test func directGetIsTheSamePageAndUnknownPathsAre404() throws {
        let proxy = try RunningProxy()
        let (status, type, _) = try proxy.fetch("http://127.0.0.1:\(proxy.port)/", viaProxy: false)
        #expect(status == 200 && type == "text/html; charset=utf-8")
        let (missing, _, body) = try proxy.fetch("http://ats-proxy.invalid/etc/passwd")
        #expect(missing == 404)
        #expect(String(decoding: body, as: UTF8.self).hasPrefix("ats-proxy: no such onboarding page"))
        let (direct404, _, _) = try proxy.fetch("http://127.0.0.1:\(proxy.port)/nope", viaProxy: false)
        #expect(direct404 == 404)
    }
}
