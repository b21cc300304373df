import ATSPolicy
import ATSProxyCore
import Foundation
import Testing

@testable import ATSWeb

/// A record for `url` with the given result (the other fields are typical values).
func sampleRecord(
    _ url: String, result: RequestRecord.Result = .completed, errorCode: Int? = nil, streamError: StreamError? = nil,
    status: Int? = 200, atsRequired: Bool = true
) -> RequestRecord {
    RequestRecord(
        time: Date(timeIntervalSince1970: 1_700_000_000), clientAddress: "127.0.0.1:50000", taskID: "ABC.1",
        method: "GET", url: url, httpProtocol: "http/1.1", source: .urlsession, result: result,
        atsRequired: atsRequired, ruleChain: ["NSAppTransportSecurity (default)"], rule: "the rule",
        fix: errorCode == nil ? nil : "add NSExceptionAllowsInsecureHTTPLoads", errorCode: errorCode,
        streamError: streamError, status: status,
        requestHeaders: [HTTPField(name: "Cookie", value: "a=b"), HTTPField(name: "Accept", value: "*/*")],
        responseHeaders: [HTTPField(name: "Content-Type", value: "text/plain")], bytesFromClient: 0,
        bytesToClient: 12, durationMilliseconds: 3.5)
}

@Suite struct FlowRingTests {
    @Test func keepsTheNewestFlowsInOrderAndCountsIDsOn() {
        var ring = FlowRing(capacity: 3)
        for index in 1...5 { ring.append(sampleRecord("http://h\(index).example/")) }
        #expect(ring.count == 3)
        #expect(ring.flows(after: 0).map(\.id) == [3, 4, 5])
        #expect(ring.flows(after: 3).map(\.id) == [4, 5])
        #expect(ring.flows(after: 5).isEmpty)
        #expect(ring.flows(after: 0, limit: 2).map(\.id) == [3, 4])
        #expect(
            ring.flows(after: 0).map(\.record.url) == [
                "http://h3.example/", "http://h4.example/", "http://h5.example/",
            ])
    }

    @Test func partlyFilledRingReturnsWhatItHas() {
        var ring = FlowRing(capacity: 10)
        ring.append(sampleRecord("http://a.example/"))
        ring.append(sampleRecord("http://b.example/"))
        #expect(ring.flows(after: 0).map(\.id) == [1, 2])
        #expect(ring.flows(after: 1).map(\.id) == [2])
    }

    @Test func appendingToAFullRingHandsBackTheFlowItPushedOut() {
        var ring = FlowRing(capacity: 2)
        #expect(ring.appendEvicting(sampleRecord("http://a.example/")) == nil)
        #expect(ring.appendEvicting(sampleRecord("http://b.example/")) == nil)
        let evicted = ring.appendEvicting(sampleRecord("http://c.example/"))
        #expect(evicted?.id == 1 && evicted?.record.url == "http://a.example/")
        #expect(ring.appendEvicting(sampleRecord("http://d.example/"))?.id == 2)
        #expect(ring.flows(after: 0).map(\.record.url) == ["http://c.example/", "http://d.example/"])
        #expect(ring.append(sampleRecord("http://e.example/")) == 5)
    }

    @Test func storeNotifiesOnceWhenArmedAndNotAtAllOtherwise() {
        let store = FlowStore(capacity: 4)
        let calls = Counter()
        store.setListener { calls.increment() }
        store.record(sampleRecord("http://a.example/"))
        #expect(calls.value == 0)
        #expect(store.armNotification(seen: 1))
        store.record(sampleRecord("http://b.example/"))
        store.record(sampleRecord("http://c.example/"))
        #expect(calls.value == 1)
        // Something newer than what the caller saw: nothing is armed, the caller reads again.
        #expect(!store.armNotification(seen: 2))
        #expect(store.newestID == 3)
    }
}

/// A thread-safe counter for callbacks.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func increment() { lock.withLock { count += 1 } }
}
