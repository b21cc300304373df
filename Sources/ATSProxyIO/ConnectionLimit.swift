import Foundation

/// A budget of live connections, shared by every listener that is given it, so that
/// `--max-connections` holds across several `--listen` addresses.
///
/// Thread-safe: a lock protects the count; listeners acquire on their accept queues and release
/// from the loops where connections close.
public final class ConnectionLimit: @unchecked Sendable {
    /// The most connections admitted at once.
    public let maximum: Int
    private let lock = NSLock()
    private var live = 0

    public init(maximum: Int) {
        precondition(maximum >= 0, "a connection limit cannot be negative")
        self.maximum = maximum
    }

    /// Connections currently admitted.
    public var liveConnections: Int {
        lock.withLock { live }
    }

    /// Admits one connection unless the budget is exhausted.
    func tryAcquire() -> Bool {
        lock.withLock {
            guard live < maximum else { return false }
            live += 1
            return true
        }
    }

    /// Returns one admitted connection's slot.
    func release() {
        lock.withLock {
            precondition(live > 0, "ConnectionLimit released more often than acquired")
            live -= 1
        }
    }
}
