/// A FIFO of bytes with amortised O(1) append and front removal: the per-stream send buffer of `HTTP2Session`.
///
/// Value type; confined to its owning session like the session itself.
struct ByteQueue {
    /// Storage; bytes before `head` were already read.
    private var storage: [UInt8] = []
    /// Index of the first unread byte.
    private var head = 0

    /// Unread bytes.
    var count: Int { storage.count - head }

    /// Appends `bytes` at the back.
    mutating func append(_ bytes: [UInt8]) {
        if head > 0, head >= storage.count / 2 {
            storage.removeFirst(head)
            head = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// Moves up to `maximum` bytes from the front into `buffer`; returns how many.
    mutating func read(into buffer: UnsafeMutablePointer<UInt8>, maximum: Int) -> Int {
        let n = min(maximum, count)
        guard n > 0 else { return 0 }
        storage.withUnsafeBufferPointer { source in
            buffer.update(from: source.baseAddress! + head, count: n)
        }
        head += n
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        }
        return n
    }
}
