import ATSProxyCore

/// One finished request and the number it got when it entered the ring (1, 2, 3, … for the
/// session; the live page's SSE event id and the order of the HAR's entries).
public struct Flow: Sendable {
    public let id: Int
    public let record: RequestRecord
}

/// The last `capacity` flows of the session, oldest first. Appending beyond the capacity drops the
/// oldest, so memory stays bounded by the capacity however long the session runs (a record shares
/// its header arrays with the request that produced it; bodies are never kept). A value; not
/// thread-safe on its own (`FlowStore` guards it).
public struct FlowRing: Sendable {
    /// How many flows are kept at most (at least 1).
    public let capacity: Int
    private var slots: [Flow] = []
    /// Index in `slots` of the oldest flow once the ring is full.
    private var head = 0
    /// The id the next flow gets.
    public private(set) var nextID = 1

    public init(capacity: Int) {
        precondition(capacity > 0, "a flow ring needs room for at least one flow")
        self.capacity = capacity
        slots.reserveCapacity(min(capacity, 1024))
    }

    /// Flows held now.
    public var count: Int { slots.count }

    /// Adds `record` as the newest flow and returns its id.
    @discardableResult
    public mutating func append(_ record: RequestRecord) -> Int {
        _ = appendEvicting(record)
        return nextID - 1
    }

    /// Adds `record` as the newest flow and returns the oldest one it pushed out (nil while the
    /// ring is not full), so that the caller decides where that flow is released.
    public mutating func appendEvicting(_ record: RequestRecord) -> Flow? {
        var flow = Flow(id: nextID, record: record)
        nextID += 1
        guard slots.count == capacity else {
            slots.append(flow)
            return nil
        }
        swap(&slots[head], &flow)
        head = (head + 1) % capacity
        return flow
    }

    /// The flows with an id greater than `id`, oldest first (all of them for 0), at most `limit`.
    public func flows(after id: Int, limit: Int = .max) -> [Flow] {
        let newest = nextID - 1
        guard id < newest, limit > 0 else { return [] }
        let available = min(newest - id, slots.count)
        let start = slots.count - available
        let end = start + min(available, limit)
        var result: [Flow] = []
        result.reserveCapacity(end - start)
        for offset in start..<end { result.append(slots[(head + offset) % slots.count]) }
        return result
    }

    /// Drops every flow (ids keep counting).
    public mutating func removeAll() {
        slots.removeAll(keepingCapacity: false)
        head = 0
    }
}
