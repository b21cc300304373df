import ATSPolicy
import Testing

@testable import ATSProxyCore

/// `--source auto`: the app component is read from the User-Agent's product tokens.
@Suite struct RequestSourceDetectorTests {
    @Test(
        arguments: [
            (nil, RequestSource.urlsession),
            ("", .urlsession),
            ("Tester/1 CFNetwork/1490.0.4 Darwin/23.2.0", .urlsession),
            ("AppleCoreMedia/1.0.0.21C62 (iPhone; U; CPU OS 17_2 like Mac OS X; en_us)", .media),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko)",
                .webkit
            ),
            ("Mozilla/5.0 AppleWebKit/605.1.15 CFNetwork/1490 Darwin/23", .urlsession),
            ("AppleWebKit", .urlsession),
            ("xAppleCoreMedia/", .media),
        ] as [(String?, RequestSource)])
    func userAgentDecidesTheSource(userAgent: String?, expected: RequestSource) {
        #expect(RequestSourceDetector.detect(userAgent: userAgent) == expected)
    }
}
