import Foundation
import Testing

@testable import ATSProxyIO

/// `PendingWrites` on its own, without a socket: coalescing, the vectors handed to `writev`, partial writes, and
/// freeing. The connection-level behaviour (fast path, batching, watermarks) stays in `TCPConnectionTests`.
@Suite struct PendingWritesTests {
    /// The bytes the vectors describe, in order (what `writev` would send).
    static func unsent(_ queue: borrowing PendingWrites) -> [UInt8] {
        var bytes: [UInt8] = []
        _ = queue.withVectors { vectors in
            for vector in vectors {
                bytes += UnsafeRawBufferPointer(start: vector.iov_base, count: vector.iov_len)
            }
            return 0
        }
        return bytes
    }

    static func append(_ queue: inout PendingWrites, _ text: String, minimumCapacity: Int = 16) {
        Array(text.utf8).withUnsafeBytes { queue.append($0, minimumCapacity: minimumCapacity) }
    }

    @Test func smallWritesShareAChunkUntilItIsFull() {
        var queue = PendingWrites()
        Self.append(&queue, "abcd", minimumCapacity: 8)
        Self.append(&queue, "efgh")
        #expect(queue.chunkCount == 1)
        Self.append(&queue, "ij")
        #expect(queue.chunkCount == 2, "a full chunk takes no more bytes")
        #expect(queue.queuedBytes == 10)
        #expect(Self.unsent(queue) == Array("abcdefghij".utf8))
        queue.removeAll()
        #expect(queue.isEmpty && queue.queuedBytes == 0)
    }

    @Test func partialWritesAdvanceInsideAndAcrossChunks() {
        var queue = PendingWrites()
        Self.append(&queue, "0123", minimumCapacity: 4)
        Self.append(&queue, "4567", minimumCapacity: 4)
        Self.append(&queue, "89", minimumCapacity: 4)
        queue.consume(3)
        #expect(Self.unsent(queue) == Array("3456789".utf8))
        #expect(queue.chunkCount == 3)
        queue.consume(2)
        #expect(Self.unsent(queue) == Array("56789".utf8), "the first chunk is freed once sent")
        #expect(queue.chunkCount == 2)
        #expect(queue.queuedBytes == 5)
        queue.consume(5)
        #expect(queue.isEmpty && queue.queuedBytes == 0)
        #expect(queue.maxQueuedBytes == 10)
    }

    @Test func oneWritevTakesAtMostSixteenChunks() {
        var queue = PendingWrites()
        for index in 0..<20 { Self.append(&queue, "\(index % 10)", minimumCapacity: 1) }
        #expect(queue.chunkCount == 20)
        let handed = queue.withVectors { $0.count }
        #expect(handed == PendingWrites.maximumVectors)
        queue.consume(16)
        #expect(Self.unsent(queue) == Array("6789".utf8))
        queue.removeAll()
    }

    @Test func emptyAppendsQueueNothing() {
        var queue = PendingWrites()
        [UInt8]().withUnsafeBytes { queue.append($0, minimumCapacity: 16) }
        #expect(queue.isEmpty && queue.queuedBytes == 0 && queue.chunkCount == 0)
    }
}
