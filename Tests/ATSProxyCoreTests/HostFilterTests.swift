import Testing

@testable import ATSProxyCore

/// The host filter's matching: mitmproxy's regular expressions on host:port, searched, any case.
@Suite struct HostFilterTests {
    @Test func ignoreModeSearchesHostAndPort() throws {
        let filter = try HostFilter(mode: .ignore, patterns: [#"\.example\.com:443$"#, "telemetry"])
        #expect(filter.ignores(host: "api.example.com", port: 443))
        #expect(filter.ignores(host: "API.Example.COM", port: 443))
        #expect(!filter.ignores(host: "api.example.com", port: 8443))
        #expect(filter.ignores(host: "eu.telemetry.vendor.net", port: 80))
        #expect(!filter.ignores(host: "example.org", port: 443))
    }

    @Test func allowModeLeavesEverythingElseAlone() throws {
        let filter = try HostFilter(mode: .allow, patterns: [#"^api\.example\.com:"#])
        #expect(!filter.ignores(host: "api.example.com", port: 443))
        #expect(filter.ignores(host: "cdn.example.com", port: 443))
        #expect(filter.ignores(host: "update.googleapis.com", port: 443))
    }

    @Test func noPatternsIgnoreNothing() throws {
        #expect(!HostFilter().ignores(host: "anything", port: 1))
        #expect(try HostFilter(mode: .allow, patterns: []).mode == .none)
    }

    @Test func invalidPatternNamesIt() {
        #expect(throws: HostFilter.PatternError.self) { try HostFilter(mode: .ignore, patterns: ["(unclosed"]) }
        do {
            _ = try HostFilter(mode: .ignore, patterns: ["ok", "[z-a]"])
        } catch {
            #expect("\(error)".hasPrefix("'[z-a]' is not a valid regular expression"))
        }
    }

    @Test func backgroundServicesCoverOSAndBrowserEndpointsOnly() throws {
        let filter = try HostFilter(mode: .ignore, patterns: HostFilter.backgroundServices)
        for host in [
            "gateway.icloud.com", "gs.apple.com", "is1-ssl.mzstatic.com", "update.googleapis.com",
            "clients2.google.com", "accounts.google.com", "safebrowsing.googleapis.com", "aus5.mozilla.org",
            "firefox.settings.services.mozilla.com", "edge.microsoft.com",
        ] {
            #expect(filter.ignores(host: host, port: 443), "\(host)")
        }
        for host in ["api.example.com", "notapple.com", "www.google.com", "maps.googleapis.com", "microsoft.com"] {
            #expect(!filter.ignores(host: host, port: 443), "\(host)")
        }
    }

    @Test func countsConnectionsAndDistinctHosts() throws {
        let filter = try HostFilter(mode: .ignore, patterns: ["x"])
        filter.countIgnored(host: "a.x")
        filter.countIgnored(host: "A.X")
        filter.countIgnored(host: "b.x")
        #expect(filter.ignored == HostFilter.Ignored(connections: 3, hosts: 2))
    }
}
