import ATSProxyTesting
import AppNetworking
import Foundation
import Testing
import XCTest

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Swift Testing: the app's fallback path for a cleartext URL runs under the proxy as on a device.
@Suite struct FeedClientTests {
    @Test func cleartextFeedFallsBackLikeOnADevice() async throws {
        let session = try ATSProxyTesting.session()
        let outcome = await FeedClient(session: session).load(URL(string: "http://example.com/feed.json")!)
        #expect(outcome == .blockedByATS)
    }
}

/// XCTest: the error itself, as URLSession on a device raises it.
final class FeedClientXCTests: XCTestCase {
    func testCleartextLoadRaisesTheDevicesURLError() async throws {
        let session = try ATSProxyTesting.session()
        do {
            _ = try await session.data(from: URL(string: "http://example.com/feed.json")!)
            XCTFail("ATS should have blocked the cleartext load")
        } catch let error as URLError {
            XCTAssertEqual(error.code, .appTransportSecurityRequiresSecureConnection)
            XCTAssertEqual(error.failingURL?.absoluteString, "http://example.com/feed.json")
            XCTAssertNotNil(error.userInfo[ATSDeviceError.ruleKey])
        }
    }
}
