import Foundation

/// A connection's output that the kernel has not taken yet, oldest first: the chunks, how much of the first one is
/// already sent, and the byte counts the watermarks read. It never touches a socket: the owner asks for the vectors
/// to hand to `write`/`writev` (`withVectors`) and reports what the kernel took (`consume`). Learned from swift-nio's
/// `PendingWritesManager`, which keeps the same split between the queue and the syscalls.
///
/// Memory: each chunk is allocated and freed here (`WriteChunk`); small writes are copied into the last chunk while
/// it has room (coalescing). `removeAll` frees everything at once (a closing connection); whatever is left when the
/// queue goes away is freed by its `deinit`. Non-copyable: two copies would own the same chunks and free them twice.
///
/// Not thread-safe: a value owned by one connection on its event loop.
struct PendingWrites: ~Copyable {
    /// The most chunks one `writev` is handed.
    static let maximumVectors = 16

    /// Oldest first; `headOffset` bytes of the first are already sent.
    private var chunks: [WriteChunk] = []
    private var headOffset = 0
    /// Bytes queued and not yet taken by the kernel.
    private(set) var queuedBytes = 0
    /// The largest `queuedBytes` ever observed (for tests and statistics).
    private(set) var maxQueuedBytes = 0

    init() {}

    deinit {
        for chunk in chunks { chunk.free() }
    }

    /// Whether nothing waits.
    var isEmpty: Bool { chunks.isEmpty }

    /// The number of chunks queued (coalescing keeps it small; for tests).
    var chunkCount: Int { chunks.count }

    /// Copies `bytes` to the end of the queue: into the last chunk while it has room, else into a new chunk of at
    /// least `minimumCapacity` bytes.
    mutating func append(_ bytes: UnsafeRawBufferPointer, minimumCapacity: Int) {
        guard !bytes.isEmpty else { return }
        if chunks.isEmpty || !chunks[chunks.count - 1].append(bytes) {
            chunks.append(WriteChunk(copying: bytes, minimumCapacity: minimumCapacity))
        }
        queuedBytes += bytes.count
        maxQueuedBytes = max(maxQueuedBytes, queuedBytes)
    }

    /// Calls `body` with the unsent bytes of up to `maximumVectors` chunks, oldest first (one vector: write it with
    /// `write`; more: `writev`), and returns what `body` returns (the syscall's result). The vectors are valid only
    /// inside `body`. Precondition: not empty.
    func withVectors(_ body: (UnsafeBufferPointer<iovec>) -> Int) -> Int {
        precondition(!chunks.isEmpty, "PendingWrites.withVectors: nothing is queued")
        let count = min(chunks.count, Self.maximumVectors)
        return withUnsafeTemporaryAllocation(of: iovec.self, capacity: count) { vectors in
            for index in 0..<count {
                let chunk = chunks[index]
                let offset = index == 0 ? headOffset : 0
                vectors[index] = iovec(iov_base: chunk.base + offset, iov_len: chunk.count - offset)
            }
            return body(UnsafeBufferPointer(vectors))
        }
    }

    /// Drops the `written` bytes the kernel took from the head of the queue, freeing finished chunks. Precondition:
    /// `0 < written <= queuedBytes`.
    mutating func consume(_ written: Int) {
        precondition(written > 0 && written <= queuedBytes, "PendingWrites.consume: \(written) of \(queuedBytes)")
        queuedBytes -= written
        var left = written
        var finished = 0
        while left > 0 {
            let available = chunks[finished].count - headOffset
            if left < available {
                headOffset += left
                break
            }
            left -= available
            chunks[finished].free()
            finished += 1
            headOffset = 0
        }
        if finished == chunks.count {
            chunks.removeAll(keepingCapacity: chunks.capacity <= Self.maximumVectors)
        } else if finished > 0 {
            chunks.removeFirst(finished)
        }
    }

    /// Frees every chunk and forgets what was queued (a connection that closes drops its output).
    mutating func removeAll() {
        for index in chunks.indices { chunks[index].free() }
        chunks = []
        headOffset = 0
        queuedBytes = 0
    }
}
