import ATSPolicy
import ATSProxyTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The `URLError` ATSProxyTesting builds from the proxy's `X-ATS-*` answers, and the environment it reads.
@Suite struct ATSDeviceErrorTests {
    static func response(_ url: String, status: Int, headers: [String: String]) -> HTTPURLResponse {
        HTTPURLResponse(url: URL(string: url)!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
    }

    @Test func cleartextBlockIsTheDevicesMinus1022() throws {
        let rule = "No exception entry, so ATS is required (the default)."
        let answer = Self.response(
            "http://example.com/feed", status: 403, headers: ["X-ATS-Error": "-1022", "X-ATS-Rule": rule])
        let error = try #require(ATSDeviceError.urlError(for: answer))
        #expect(error.code == .appTransportSecurityRequiresSecureConnection)
        #expect(error.failingURL?.absoluteString == "http://example.com/feed")
        #expect(error.userInfo[ATSDeviceError.failingURLStringKey] as? String == "http://example.com/feed")
        #expect(
            error.localizedDescription
                == "The resource could not be loaded because the App Transport Security policy requires the use of a secure connection."
        )
        #expect(error.userInfo[ATSDeviceError.ruleKey] as? String == rule)
        #expect(error.userInfo[NSLocalizedFailureReasonErrorKey] as? String == rule)
        #expect(error.userInfo[ATSDeviceError.streamErrorCodeKey] == nil, "a -1022 has no stream error on a device")
        #expect(String(describing: error).contains(rule), "the rule is in the description")
        let underlying = try #require(error.userInfo[NSUnderlyingErrorKey] as? NSError)
        #expect(underlying.domain == "kCFErrorDomainCFNetwork" && underlying.code == -1022)
    }

    @Test func tlsFailureCarriesTheStreamError() throws {
        let answer = Self.response(
            "https://old.example.com/", status: 502,
            headers: ["X-ATS-Error": "-1200", "X-ATS-Stream-Error": "3:-9836", "X-ATS-Rule": "TLS 1.1 < 1.2"])
        let error = try #require(ATSDeviceError.urlError(for: answer))
        #expect(error.code == .secureConnectionFailed)
        #expect(error.userInfo[ATSDeviceError.streamErrorDomainKey] as? Int == 3)
        #expect(error.userInfo[ATSDeviceError.streamErrorCodeKey] as? Int == -9836)
        #expect(
            error.userInfo[NSLocalizedRecoverySuggestionErrorKey] as? String
                == "Would you like to connect to the server anyway?")
        let underlying = try #require(error.userInfo[NSUnderlyingErrorKey] as? NSError)
        #expect(underlying.userInfo["_kCFNetworkCFStreamSSLErrorOriginalValue"] as? Int == -9836)
        #expect(underlying.userInfo[ATSDeviceError.streamErrorCodeKey] as? Int == -9836)
    }

    @Test func anOrdinaryAnswerIsNotAnError() {
        let answer = Self.response("https://api.example.com/", status: 403, headers: ["Content-Type": "text/plain"])
        #expect(ATSDeviceError.urlError(for: answer) == nil)
        let garbled = Self.response("https://api.example.com/", status: 502, headers: ["X-ATS-Error": "oops"])
        #expect(ATSDeviceError.urlError(for: garbled) == nil)
    }

    /// The library cannot depend on ATSPolicy (it must stay light for app test targets), so its texts are
    /// checked against the proxy's own for every code the proxy answers with.
    @Test(arguments: NSURLErrorCode.allCases)
    func descriptionsMatchTheProxys(code: NSURLErrorCode) {
        let platform = Platform(family: .iOS, version: OSVersion(18, 0))
        #expect(
            ATSDeviceError.localizedDescription(code: code.rawValue, host: "api.example.com")
                == code.localizedDescription(host: "api.example.com", platform: platform))
    }

    @Test func environmentComesFromExecsVariables() throws {
        let environment = try #require(
            ATSProxyEnvironment(environment: [
                "ATS_PROXY_URL": "http://127.0.0.1:41234", "ATS_PROXY_CA_CERT": "/tmp/ca.pem",
            ]))
        #expect(environment.host == "127.0.0.1" && environment.port == 41234)
        #expect(environment.caCertificatePath == "/tmp/ca.pem")
        let dictionary = environment.connectionProxyDictionary
        #expect(dictionary["HTTPSProxy"] as? String == "127.0.0.1")
        #expect(dictionary["HTTPSPort"] as? Int == 41234)
        #expect(dictionary["HTTPEnable"] as? Int == 1)
        #expect(ATSProxyEnvironment(environment: ["ATS_PROXY_URL": "http://127.0.0.1:1"]) == nil)
        #expect(ATSProxyEnvironment(environment: ["ATS_PROXY_URL": "nonsense", "ATS_PROXY_CA_CERT": "/x"]) == nil)
    }

    @Test func outsideExecTheConfigurationSaysHowToRunTheTests() {
        let error = #expect(throws: ATSProxyTesting.Unavailable.self) {
            _ = try ATSProxyTesting.configuration(environment: nil)
        }
        #expect(error?.description.contains("ats-proxy exec -- swift test") == true)
    }

    @Test func caCertificateDERIsTheFirstPEMBlock() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ats-ca-\(UUID().uuidString).pem").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("junk\n-----BEGIN CERTIFICATE-----\nAAEC\nAw==\n-----END CERTIFICATE-----\n".utf8).write(
            to: URL(fileURLWithPath: path))
        let environment = try #require(
            ATSProxyEnvironment(environment: ["ATS_PROXY_URL": "http://127.0.0.1:8080", "ATS_PROXY_CA_CERT": path]))
        #expect(environment.caCertificateDER() == Data([0, 1, 2, 3]))
    }
}
