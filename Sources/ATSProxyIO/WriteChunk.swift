import Foundation

/// A span of queued output in memory the connection allocates and frees itself, so that `writev`
/// can point at it directly. Small writes are appended into the last chunk (write coalescing).
struct WriteChunk {
    let base: UnsafeMutableRawPointer
    private(set) var count: Int
    let capacity: Int

    /// Smallest allocation: small writes that queue up share one chunk.
    static let minimumCapacity = 16 * 1024
    /// Writes are not appended to a chunk that would grow past this.
    static let coalesceLimit = 64 * 1024

    /// Capacity of a chunk held for the end of a batch: room for a response head and a small body,
    /// from malloc's per-thread cache.
    static let batchedCapacity = 1024

    init(copying bytes: UnsafeRawBufferPointer, minimumCapacity: Int) {
        capacity = max(bytes.count, minimumCapacity)
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        count = bytes.count
        if let source = bytes.baseAddress { base.copyMemory(from: source, byteCount: bytes.count) }
    }

    /// Appends when there is room within the coalescing limit; false otherwise.
    mutating func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard count + bytes.count <= min(capacity, Self.coalesceLimit), let source = bytes.baseAddress else {
            return bytes.isEmpty
        }
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
        return true
    }

    func free() { base.deallocate() }
}
