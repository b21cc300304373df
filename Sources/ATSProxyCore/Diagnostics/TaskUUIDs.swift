import Foundation
import Synchronization

/// Task UUIDs for client connections (the `<UUID>` of CFNetwork's `Task <UUID>.<N>`), made without a
/// system call: Foundation's `UUID()` opens, reads and closes /dev/urandom every time on Linux, three
/// system calls per accepted connection.
///
/// The UUIDs only tie a connection's log lines together; they need to be distinct and look random, not to
/// be unpredictable. Each is a bijective mix of a per-process random seed and a counter, with the version 4
/// and RFC 9562 variant bits set. Thread-safe (an atomic counter).
enum TaskUUIDs {
    /// Random per process.
    private static let seed: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
    }()
    private static let counter = Atomic<UInt64>(0)

    /// A UUID no earlier call in this process returned.
    static func next() -> UUID {
        let count = counter.add(1, ordering: .relaxed).newValue
        let high = mix(seed.0 &+ count)
        let low = mix(seed.1 ^ (count &* 0x9E37_79B9_7F4A_7C15))
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (56 - 8 * index))
            bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (56 - 8 * index))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// The splitmix64 finalizer: a bijection on 64-bit values that scatters neighbouring inputs.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
