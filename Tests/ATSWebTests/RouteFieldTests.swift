import ATSProxyCore
import Foundation
import Testing

@testable import ATSWeb

/// The route a load took (`ProxyRoute`) in the HAR (`_atsRoute`) and in the live page's flow events and page.
@Suite struct RouteFieldTests {
    @Test func everyRouteIsTheHAREntrysAtsRouteAndTheFlowEventsRoute() throws {
        let encoder = JSONEncoder()
        for (index, route) in ProxyRoute.allCases.enumerated() {
            let record = sampleRecord("http://plain.example/").updating { $0.route = route }
            let data = try HARBuilder(allowSecrets: false, creatorVersion: "1").data([Flow(id: 1, record: record)])
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            let entry = ((object?["log"] as? [String: Any])?["entries"] as? [[String: Any]])?.first
            #expect(entry?["_atsRoute"] as? String == route.rawValue)

            let event = String(
                decoding: FlowView.event(Flow(id: index, record: record), allowSecrets: false, encoder: encoder),
                as: UTF8.self)
            #expect(event.contains(#""route":"\#(route.rawValue)""#), "\(event)")
        }
        // A record read from an older log has no route: the fields are left out.
        let old = sampleRecord("https://a.example/")
        let entry = HARBuilder(allowSecrets: false, creatorVersion: "1").entry(old)
        #expect(entry._atsRoute == nil)
    }

    @Test func thePageShowsTheRouteInTheDetailPaneAndTheUncommonOnesInTheRow() {
        let page = WebPage.html(title: "t", capacity: 10)
        #expect(page.contains(#"["route",o.route||"—"]"#))
        #expect(page.contains(#"o.route!=="absolute-form"&&o.route!=="CONNECT+TLS""#))
    }
}
