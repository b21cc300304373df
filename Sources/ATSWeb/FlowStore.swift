import ATSProxyCore
import Synchronization

/// The session's flows for the live page and the HAR: a `FlowRing` behind a mutex, fed by the
/// proxy's record observer from every event loop.
///
/// Recording costs one lock and one append (and, once the ring is full, releasing the oldest flow). A consumer that wants to hear about new flows arms a
/// one-shot notification (`armNotification`): the next `record` after it calls the listener once
/// and disarms, so a burst of requests costs the recording threads one callback, not one per
/// request, and nothing at all while no page is open.
public final class FlowStore: Sendable {
    private struct State {
        var ring: FlowRing
        var armed = false
    }

    private let state: Mutex<State>
    private let listener = Mutex<(@Sendable () -> Void)?>(nil)

    /// - Parameter capacity: flows kept (`--web-flows`).
    public init(capacity: Int) { state = Mutex(State(ring: FlowRing(capacity: capacity))) }

    /// The ring's capacity.
    public var capacity: Int { state.withLock { $0.ring.capacity } }

    /// Adds a finished request; calls the listener if a notification was armed. The flow this
    /// pushes out of a full ring is released after the lock (freeing a record's strings and arrays
    /// is the longest part of recording, and other loops may be waiting to record).
    public func record(_ record: RequestRecord) {
        let (notify, evicted) = state.withLock { state -> (Bool, Flow?) in
            let evicted = state.ring.appendEvicting(record)
            guard state.armed else { return (false, evicted) }
            state.armed = false
            return (true, evicted)
        }
        withExtendedLifetime(evicted) {}
        if notify { listener.withLock { $0 }?() }
    }

    /// Sets the callback of armed notifications (called on the recording thread; keep it short).
    public func setListener(_ callback: (@Sendable () -> Void)?) { listener.withLock { $0 = callback } }

    /// Arms the one-shot notification unless a flow newer than `seen` is already there, in which
    /// case nothing is armed and false is returned (the caller should read again now).
    public func armNotification(seen: Int) -> Bool {
        state.withLock { state in
            guard state.ring.nextID - 1 <= seen else { return false }
            state.armed = true
            return true
        }
    }

    /// The flows newer than `id`, oldest first, at most `limit`.
    public func flows(after id: Int = 0, limit: Int = .max) -> [Flow] {
        state.withLock { $0.ring.flows(after: id, limit: limit) }
    }

    /// The id of the newest flow recorded (0 before the first).
    public var newestID: Int { state.withLock { $0.ring.nextID - 1 } }

    /// Flows held now.
    public var count: Int { state.withLock { $0.ring.count } }
}
