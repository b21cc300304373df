import Foundation
import Testing

@testable import ATSProxyCore

/// `/proxy.pac`: the translation of `--ignore-hosts`/`--allow-hosts` patterns into JavaScript, checked by running
/// the generated script in node (V8, the engine of Chromium's PAC resolver) against `HostFilter` itself on the
/// same URLs: wherever a pattern was translated, the script sends a URL direct exactly when the proxy would leave
/// that host alone.
@Suite struct ProxyAutoConfigTests {
    static let node = ["/usr/bin/node", "/usr/local/bin/node"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    @Test func sharedSyntaxIsCarriedOverAndICUOnlySyntaxIsRefused() {
        let kept: [(String, String)] = [
            (#"(^|\.)example\.com:"#, #"(^|\.)example\.com:"#),
            (#"^api\.test:443$"#, #"^api\.test:443$"#),
            (#"\Aapi[0-9]{1,3}\.test:\d+\z"#, #"^api[0-9]{1,3}\.test:\d+$"#),
            (#"(?:cdn|img)-?\w+\.net:(80|443)"#, #"(?:cdn|img)-?\w+\.net:(80|443)"#),
            (#"[^.]+\.internal\b"#, #"[^.]+\.internal\b"#),
            (#"(?<zone>eu|us)\.svc:"#, #"(?<zone>eu|us)\.svc:"#),
            (#"a+?b*?c??\x41\u0042"#, #"a+?b*?c??\x41\u0042"#),
            (#"(?=x)(?!y)(?<=z)(?<!w)"#, #"(?=x)(?!y)(?<=z)(?<!w)"#),
        ]
        for (pattern, source) in kept {
            #expect(PACPatternTranslator.translate(pattern) == .translated(source), "\(pattern)")
        }
        let refused = [
            "(?i)apple", "a++", "a{2}+", "(?>ab)", "(?#note)x", #"\Qa.b\E"#, #"\p{L}+"#, "[[:alpha:]]", "[a-z&&[^e]]",
            "[a--b]", #"(a)\1"#, #"\0101"#, #"\x{41}"#, "[]a]", "é", "a{x}", #"[\b]"#, #"\h"#, "[abc", "x\\",
        ]
        for pattern in refused {
            guard case .refused(let reason) = PACPatternTranslator.translate(pattern) else {
                Issue.record("\(pattern) was translated")
                continue
            }
            #expect(!reason.isEmpty)
        }
    }

    @Test func scriptNamesTheProxyWithADirectFallbackAndTheRefusedPatterns() throws {
        let plain = ProxyAutoConfig(filter: HostFilter()).script(proxy: "192.168.1.5:8080")
        #expect(plain.contains(#"var atsProxy = "PROXY 192.168.1.5:8080; DIRECT";"#))
        #expect(plain.contains("function FindProxyForURL(url, host)"))
        let filter = try HostFilter(mode: .ignore, patterns: [#"(^|\.)apple\.com:"#, "(?i)x++"])
        let config = ProxyAutoConfig(filter: filter)
        #expect(config.refusedPatterns.map(\.pattern) == ["(?i)x++"])
        let script = config.script(proxy: "[fe80::1]:8080")
        #expect(script.contains(#"PROXY [fe80::1]:8080; DIRECT"#))
        #expect(script.contains("// not translated ("))
        #expect(script.contains("(?i)x++"))
        let page = config.page(proxy: "10.0.0.2:9000")
        #expect(page.contentType == "application/x-ns-proxy-autoconfig")
        #expect(page.status == 200)
    }

    /// URLs every filter below is checked on: names, ports (explicit and by scheme), IPv4 and IPv6 literals,
    /// case, user info, and the onboarding name.
    static let urls = [
        "http://example.com/", "https://example.com/", "https://www.example.com:8443/path?q=1",
        "http://api.example.com:8080/x", "https://EXAMPLE.org/", "http://notexample.com/",
        "https://gateway.icloud.com/",
        "https://mzstatic.com/", "https://update.googleapis.com/", "http://clients4.google.com/", "https://gvt1.com/",
        "https://www.mozilla.org/", "https://127.0.0.1:8443/", "http://10.1.2.3/", "https://[::1]:8443/",
        "http://user:pw@intranet.corp:81/", "wss://push.example.net/", "ws://push.example.net:9000/",
        "http://ats-proxy.invalid/", "https://api7.test:443/", "https://api7.test:444/", "https://img-a.net/",
        "https://cdn.net/", "http://eu.svc:80/",
    ]

    @Test(arguments: [
        (HostFilter.Mode.ignore, [#"(^|\.)example\.com:"#, #"^10\."#, #":8443$"#]),
        (HostFilter.Mode.allow, [#"(^|\.)example\.(com|org):"#, #"\Aapi[0-9]{1,3}\.test:443\z"#, #"^\[?::1"#]),
        (HostFilter.Mode.ignore, HostFilter.backgroundServices),
        (HostFilter.Mode.allow, [#"(?:cdn|img)-?\w*\.net:(80|443)$"#, #"(?<zone>eu|us)\.svc:"#, "push"]),
        (HostFilter.Mode.ignore, ["(?i)example", #"intranet\.corp:81"#]),
        (HostFilter.Mode.allow, ["a++", "api"]),
    ])
    func scriptDecidesLikeTheProxyInNode(mode: HostFilter.Mode, patterns: [String]) throws {
        let node = try #require(Self.node, "node is not installed; run scripts/bootstrap test")
        let filter = try HostFilter(mode: mode, patterns: patterns)
        let config = ProxyAutoConfig(filter: filter)
        let proxy = "PROXY 192.168.1.5:8080; DIRECT"
        let answers = try Self.evaluate(config.script(proxy: "192.168.1.5:8080"), urls: Self.urls, node: node)
        let refused = !config.refusedPatterns.isEmpty
        for (url, answer) in zip(Self.urls, answers) {
            let parsed = try #require(URLComponents(string: url))
            let host = try #require(parsed.host).lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            let port = parsed.port ?? (["https", "wss"].contains(parsed.scheme ?? "") ? 443 : 80)
            if host == OnboardingSite.host {
                #expect(answer == proxy, "\(url): the onboarding name goes through the proxy")
                continue
            }
            let ignored = filter.ignores(host: host, port: port)
            if refused {
                // A refused pattern leans towards the proxy: never direct where the proxy would judge the host.
                if !ignored { #expect(answer == proxy, "\(url): \(answer)") }
            } else {
                #expect(answer == (ignored ? "DIRECT" : proxy), "\(url) with \(patterns): \(answer)")
            }
        }
    }

    /// Runs `script` in node with `FindProxyForURL(url, host)` for each URL (host as Chromium passes it: the
    /// URL's host, IPv6 in brackets); returns the answers in order.
    static func evaluate(_ script: String, urls: [String], node: String) throws -> [String] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pac-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pac = directory.appendingPathComponent("proxy.pac")
        try Data(script.utf8).write(to: pac)
        let urlList = String(decoding: try JSONEncoder().encode(urls), as: UTF8.self)
        let harness = """
            const fs = require("fs"); const vm = require("vm");
            const context = vm.createContext({});
            vm.runInContext(fs.readFileSync(process.argv[2], "utf8"), context);
            for (const url of \(urlList)) {
              const host = new URL(url).hostname;
              console.log(context.FindProxyForURL(url, host));
            }
            """
        let harnessPath = directory.appendingPathComponent("run.js")
        try Data(harness.utf8).write(to: harnessPath)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: node)
        process.arguments = [harnessPath.path, pac.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else { throw PACEvaluationError(output: text) }
        return text.split(separator: "\n").map(String.init)
    }

    struct PACEvaluationError: Error, CustomStringConvertible {
        let output: String
        var description: String { "node failed: \(output)" }
    }
}
