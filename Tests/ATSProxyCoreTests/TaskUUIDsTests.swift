import Foundation
import Testing

@testable import ATSProxyCore

/// The connection task UUIDs: distinct, version 4 with the RFC 9562 variant, and not a visible count.
@Suite struct TaskUUIDsTests {
    @Test func uuidsAreDistinctVersion4AndScattered() {
        let uuids = (0..<20_000).map { _ in TaskUUIDs.next() }
        #expect(Set(uuids).count == uuids.count)
        for uuid in uuids.prefix(100) {
            let string = uuid.uuidString
            let characters = Array(string)
            #expect(characters[14] == "4", "\(string)")
            #expect("89AB".contains(characters[19]), "\(string)")
        }
        // Neighbours share no long prefix (a counter in plain sight would).
        let first = Array(uuids[0].uuidString)
        let second = Array(uuids[1].uuidString)
        #expect(zip(first, second).prefix(8).contains { $0 != $1 })
        // Every hex digit position other than the fixed ones varies across a few UUIDs.
        let strings = uuids.prefix(64).map { Array($0.uuidString) }
        for position in 0..<36 where ![8, 13, 14, 18, 23].contains(position) {
            #expect(Set(strings.map { $0[position] }).count > 1, "position \(position)")
        }
    }

    @Test func theMixIsABijectionOnASample() {
        var seen = Set<UInt64>()
        for value in 0..<UInt64(50_000) { seen.insert(TaskUUIDs.mix(value)) }
        #expect(seen.count == 50_000)
    }
}
