import ATSTestSupport
import Foundation
import Testing

/// Settings are never silently ignored: a value of the wrong shape or type, an unknown key or an unknown
/// `ATS_PROXY_*` variable is one line naming its source, the key, what was expected and what was found (exit
/// status 2); and the banner says what the run was told and where each input came from.
@Suite struct SettingsStrictnessTests {
    /// One line, exit status 2, for every command that reads settings.
    static func expectOneLineError(
        _ directory: TemporaryDirectory, environment extra: [String: String] = [:], _ message: String
    ) throws {
        for command in [["run"], ["settings", "show"], ["exec", "--", "true"]] {
            let result = try Invocation.run(
                command, in: directory.path, environment: Invocation.environment(home: directory.path, extra))
            #expect(result.status == 2, "\(command): \(result.stderr)")
            #expect(result.stderr == "ats-proxy: error: \(message)\n", "\(command)")
        }
    }

    @Test func aMappingWhereAnAddressBelongsIsAnErrorNotTheDefault() throws {
        let directory = try TemporaryDirectory("settings-shape")
        _ = try directory.write("ats-proxy.yaml", "listen:\n  host: 0.0.0.0\n  port: 8080\n")
        try Self.expectOneLineError(
            directory,
            "\(directory.file("ats-proxy.yaml")): key 'listen' must be HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080), "
                + "or a list of them, found a mapping (host, port)")
    }

    @Test func aValueOfTheRightTypeButNoAddressNamesTheFileNotAFlag() throws {
        let directory = try TemporaryDirectory("settings-value")
        _ = try directory.write("ats-proxy.yaml", "listen: 1\n")
        try Self.expectOneLineError(
            directory,
            "\(directory.file("ats-proxy.yaml")): key 'listen' must be HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080), "
                + "or a list of them, found '1'")
        let other = try TemporaryDirectory("settings-diagnostics")
        _ = try other.write("ats-proxy.json", #"{"diagnostics": 7}"#)
        try Self.expectOneLineError(
            other, "\(other.file("ats-proxy.json")): key 'diagnostics' must be 0, 1, 2 or 3, found '7'")
    }

    @Test func anUnknownKeyGetsTheClosestName() throws {
        let directory = try TemporaryDirectory("settings-unknown")
        _ = try directory.write("ats-proxy.yaml", "upstream-proxi: http://127.0.0.1:3128\n")
        try Self.expectOneLineError(
            directory,
            "\(directory.file("ats-proxy.yaml")): unknown key 'upstream-proxi' (did you mean 'upstream-proxy'? keys are "
                + "the long option names of 'ats-proxy run'; see 'ats-proxy settings show')")
    }

    @Test func anUnknownVariableIsAnErrorWithTheClosestName() throws {
        let directory = try TemporaryDirectory("settings-env-name")
        try Self.expectOneLineError(
            directory, environment: ["ATS_PROXY_LISTN": "127.0.0.1:9000"],
            "environment variable ATS_PROXY_LISTN is not an ats-proxy setting; did you mean ATS_PROXY_LISTEN? "
                + "(see 'ats-proxy settings show')")
        // The variables exec exports to its command are not settings, and not errors either.
        let table = try Invocation.settings(
            in: directory.path,
            environment: Invocation.environment(
                home: directory.path,
                ["ATS_PROXY_URL": "http://127.0.0.1:1", "ATS_PROXY_CA_BUNDLE": "/x", "ATS_PROXY_TRUST_OVERLAY": "off"]))
        #expect(table["listen"]?.from == "default")
    }

    @Test func aBadVariableValueSaysWhatWasFound() throws {
        let directory = try TemporaryDirectory("settings-env-value")
        try Self.expectOneLineError(
            directory, environment: ["ATS_PROXY_LISTEN": "1"],
            "environment variable ATS_PROXY_LISTEN must be HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080), or a list "
                + "of them, found '1'")
    }

    /// The banner of a run set by a file, a variable and a flag: report mode said as such, the file by path, and
    /// each input with its source.
    @Test func theBannerListsEveryInputWithItsSourceAndTheMode() throws {
        let directory = try TemporaryDirectory("settings-banner")
        let settings = try directory.write("team.yaml", "mode: report\nignore-hosts: ['^noise\\.example:']\n")
        let proxy = try ProxyProcess(
            plist: infoPlist(""), arguments: ["--settings", settings], logToFile: false,
            environment: ["ATS_PROXY_MAX_CONNECTIONS": "77"])
        let banner = proxy.child.stderrText
        #expect(banner.contains(": report mode (ATS violations are let through and logged) for "), "\(banner)")
        #expect(!banner.contains("enforcing"), "\(banner)")
        #expect(banner.contains("  settings file: \(settings)\n"), "\(banner)")
        #expect(banner.contains("    mode report  (settings file \(settings))\n"), "\(banner)")
        #expect(banner.contains("    ignore-hosts (1 value)  (settings file \(settings))\n"), "\(banner)")
        #expect(banner.contains("    max-connections 77  (environment ATS_PROXY_MAX_CONNECTIONS)\n"), "\(banner)")
        #expect(banner.contains("    loops 2  (command line)\n"), "\(banner)")
        #expect(banner.contains("    listen (1 value)  (command line)\n"), "\(banner)")
        #expect(!banner.contains("noise"), "list values are counted, not shown: \(banner)")
    }

    /// A wildcard listener names the client ranges it accepts, and its device instructions never end in a
    /// heading without addresses (a machine without a LAN address says so instead).
    @Test func aWildcardListenerListsItsClientRangesAndNeverDangles() throws {
        // Beside the harness's own loopback listener, on a port of its own; only loopback clients are allowed.
        let port = try E2E.freePort()
        let proxy = try ProxyProcess(
            plist: infoPlist(""), arguments: ["--listen", "0.0.0.0:\(port)", "--allow-client", "127.0.0.1/32"],
            logToFile: false)
        let lines = proxy.child.stderrText.split(separator: "\n").map(String.init)
        #expect(lines.contains("  clients allowed from: 127.0.0.1/32"), "\(lines)")
        if let heading = lines.firstIndex(of: "  devices on this network: set the Wi-Fi HTTP proxy to Manual:") {
            #expect(lines.indices.contains(heading + 1) && lines[heading + 1].hasPrefix("    Server "), "\(lines)")
        } else {
            #expect(lines.contains { $0.hasPrefix("  no LAN address found on this machine") }, "\(lines)")
        }
    }
}
