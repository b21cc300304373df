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

    /// splitmix64's finalizer: the reference outputs, and every sampled value recovered by running each
    /// step backwards (a counter mixed twice to one value would fail the round trip).
    @Test func theMixIsSplitmix64AndInvertible() {
        #expect(TaskUUIDs.mix(0) == 0xE220_A839_7B1D_CDAF)
        #expect(TaskUUIDs.mix(1) == 0x910A_2DEC_8902_5CC1)
        var generator = SystemRandomNumberGenerator()
        for value in (0..<1000).map({ _ in UInt64.random(in: .min ... .max, using: &generator) }) + [0, 1, .max] {
            #expect(Self.unmix(TaskUUIDs.mix(value)) == value, "\(value)")
        }
    }

    private static func unmix(_ mixed: UInt64) -> UInt64 {
        var z = unshift(mixed, 31)
        z = unshift(z &* inverse(0x94D0_49BB_1331_11EB), 27)
        z = unshift(z &* inverse(0xBF58_476D_1CE4_E5B9), 30)
        return z &- 0x9E37_79B9_7F4A_7C15
    }

    /// The x of `x ^ (x >> shift)`.
    private static func unshift(_ value: UInt64, _ shift: UInt64) -> UInt64 {
        var result = value
        for _ in 0..<(64 / shift + 1) { result = value ^ (result >> shift) }
        return result
    }

    /// The inverse of an odd number modulo 2^64 (Newton's iteration doubles the correct bits each step).
    private static func inverse(_ odd: UInt64) -> UInt64 {
        var result = odd
        for _ in 0..<6 { result = result &* (2 &- odd &* result) }
        return result
    }
}
