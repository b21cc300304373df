import Foundation
import Testing

@testable import ATSProxyTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What each route becomes: the proxy URL FoundationNetworking's libcurl reads, and the proxy dictionary older
/// Apple systems read (the dictionary is built everywhere; only Apple platforms use it).
@Suite struct ATSProxyRouteTests {
    @Test func anEndpointWithoutExecIsCheckedAndBracketFree() throws {
        let proxy = try #require(ATSProxyEnvironment(host: "[::1]", port: 8080, caCertificatePath: "/ca.pem"))
        #expect(proxy.host == "::1")
        #expect(proxy.proxyURL.absoluteString == "http://[::1]:8080")
        #expect(ATSProxyEnvironment(host: "127.0.0.1", port: 0, caCertificatePath: "/ca.pem") == nil)
        #expect(ATSProxyEnvironment(host: "127.0.0.1", port: 65536, caCertificatePath: "/ca.pem") == nil)
        #expect(ATSProxyEnvironment(host: "", port: 8080, caCertificatePath: "/ca.pem") == nil)
    }

    @Test func linuxVariablesNameTheRoutesScheme() throws {
        let proxy = try #require(ATSProxyEnvironment(host: "127.0.0.1", port: 8080, caCertificatePath: "/ca.pem"))
        let expected: [ATSProxyRoute: String] = [
            .httpConnect: "http://127.0.0.1:8080", .tlsToProxy: "https://127.0.0.1:8080",
            .socks5: "socks5h://127.0.0.1:8080",
        ]
        for route in ATSProxyRoute.allCases {
            let variables = ATSProxySessionRoute.environment(route, proxy: proxy)
            #expect(variables.map(\.0) == ["http_proxy", "https_proxy"])
            #expect(variables.allSatisfy { $0.1 == expected[route] }, "\(route): \(variables)")
        }
        let v6 = try #require(ATSProxyEnvironment(host: "::1", port: 9, caCertificatePath: "/ca.pem"))
        #expect(ATSProxySessionRoute.environment(.socks5, proxy: v6).first?.1 == "socks5h://[::1]:9")
    }

    @Test func dictionariesForOlderAppleSystems() throws {
        let proxy = try #require(ATSProxyEnvironment(host: "10.0.0.2", port: 8080, caCertificatePath: "/ca.pem"))
        let http = try ATSProxySessionRoute.dictionary(.httpConnect, proxy: proxy)
        #expect(http["HTTPSProxy"] as? String == "10.0.0.2" && http["HTTPSPort"] as? Int == 8080)
        #expect(http["HTTPProxy"] as? String == "10.0.0.2" && http["HTTPEnable"] as? Int == 1)
        let socks = try ATSProxySessionRoute.dictionary(.socks5, proxy: proxy)
        #expect(socks["SOCKSProxy"] as? String == "10.0.0.2" && socks["SOCKSPort"] as? Int == 8080)
        #expect(socks["SOCKSEnable"] as? Int == 1 && socks["HTTPProxy"] == nil)
        #expect(throws: ATSProxyTesting.Unavailable.self) {
            try ATSProxySessionRoute.dictionary(.tlsToProxy, proxy: proxy)
        }
    }
}
