import ATSPolicy
import Testing

@testable import ATSProxyCore

/// Playbooks for the pool's decisions: which established connection a request gets, what is kept, what is
/// evicted, and what shutdown lets go of.
@Suite("UpstreamDirectory")
struct UpstreamDirectoryTests {
    static let keyA = UpstreamKey(host: "a.test", port: 443, requirements: nil, permissive: false)
    static let keyB = UpstreamKey(host: "b.test", port: 443, requirements: nil, permissive: false)
    static let keyA1 = UpstreamKey(host: "a.test", port: 443, requirements: nil, permissive: false, http1Only: true)

    @Test("nothing established: connect; a parked connection is handed out once, the warmest first")
    func parkedLastInFirstOut() {
        var directory = UpstreamDirectory(keepsIdle: true)
        #expect(directory.acquire(Self.keyA) { _ in true } == .connect)
        guard case .parked(let first, nil) = directory.park(Self.keyA, shareable: true),
            case .parked(let second, nil) = directory.park(Self.keyA, shareable: true)
        else { Issue.record("parking failed"); return }
        #expect(directory.parkedCount == 2)
        #expect(directory.acquire(Self.keyB) { _ in true } == .connect)  // another key never gets them
        #expect(directory.acquire(Self.keyA1) { _ in true } == .connect)  // nor an HTTP/1.1-only request
        #expect(directory.acquire(Self.keyA) { _ in true } == .parked(second))
        #expect(directory.acquire(Self.keyA) { _ in true } == .parked(first))
        #expect(directory.acquire(Self.keyA) { _ in true } == .connect)
        #expect(directory.parkedCount == 0)
    }

    @Test("a shared HTTP/2 link with room comes before parked connections; a full one does not")
    func linkBeforeParked() {
        var directory = UpstreamDirectory(keepsIdle: true)
        guard case .parked(let idle, nil) = directory.park(Self.keyA, shareable: true) else {
            Issue.record("parking failed")
            return
        }
        let older = directory.addLink(Self.keyA, shareable: true)
        let newer = directory.addLink(Self.keyA, shareable: true)
        #expect(directory.acquire(Self.keyA) { _ in true } == .channel(on: older))
        #expect(directory.acquire(Self.keyA) { $0 == newer } == .channel(on: newer))
        #expect(directory.acquire(Self.keyA) { _ in false } == .parked(idle))
        directory.removeLink(older)
        #expect(directory.acquire(Self.keyA) { _ in true } == .channel(on: newer))
        directory.removeLink(newer)
        #expect(directory.acquire(Self.keyA) { _ in true } == .connect)
    }

    @Test("an unshareable connection or link is never offered; with no idle time nothing is parked")
    func unshareable() {
        var directory = UpstreamDirectory(keepsIdle: true)
        #expect(directory.park(Self.keyA, shareable: false) == .refused)
        _ = directory.addLink(Self.keyA, shareable: false)
        #expect(directory.sharedLinkCount == 0)
        #expect(directory.acquire(Self.keyA) { _ in true } == .connect)
        var keepsNothing = UpstreamDirectory(keepsIdle: false)
        #expect(keepsNothing.park(Self.keyA, shareable: true) == .refused)
    }

    @Test("a full key evicts its oldest; a full loop refuses the newcomer")
    func limits() {
        var directory = UpstreamDirectory(keepsIdle: true, maximumParkedPerKey: 2, maximumParked: 3)
        guard case .parked(let oldest, nil) = directory.park(Self.keyA, shareable: true),
            case .parked(_, nil) = directory.park(Self.keyA, shareable: true)
        else { Issue.record("parking failed"); return }
        guard case .parked(_, let evicted) = directory.park(Self.keyA, shareable: true) else {
            Issue.record("parking failed")
            return
        }
        #expect(evicted == oldest)
        #expect(directory.parkedCount == 2)
        guard case .parked(_, nil) = directory.park(Self.keyB, shareable: true) else {
            Issue.record("parking failed")
            return
        }
        #expect(directory.park(Self.keyB, shareable: true) == .refused)
        #expect(directory.parkedCount == 3)
    }

    @Test("a parked connection that closed is not offered again; unknown entries are ignored")
    func unpark() {
        var directory = UpstreamDirectory(keepsIdle: true)
        guard case .parked(let first, nil) = directory.park(Self.keyA, shareable: true),
            case .parked(let second, nil) = directory.park(Self.keyA, shareable: true)
        else { Issue.record("parking failed"); return }
        directory.unpark(second)
        directory.unpark(second)
        #expect(directory.acquire(Self.keyA) { _ in true } == .parked(first))
        directory.unpark(first)  // handed out already: nothing changes
        #expect(directory.parkedCount == 0)
    }

    @Test("shutdown returns everything to close and keeps nothing afterwards")
    func shutdown() {
        var directory = UpstreamDirectory(keepsIdle: true)
        guard case .parked(let idle, nil) = directory.park(Self.keyA, shareable: true) else {
            Issue.record("parking failed")
            return
        }
        let link = directory.addLink(Self.keyB, shareable: true)
        let closing = directory.shutdown()
        #expect(closing.parked == [idle] && closing.links == [link])
        #expect(directory.isShuttingDown)
        #expect(directory.park(Self.keyA, shareable: true) == .refused)
        _ = directory.addLink(Self.keyB, shareable: true)
        #expect(directory.sharedLinkCount == 0)
        #expect(directory.acquire(Self.keyB) { _ in true } == .connect)
    }

    // MARK: - Connects in flight

    final class Owner: Sendable {}
    static let owners = (Owner(), Owner())
    static func requester(_ owner: Owner, _ lane: Int32) -> UpstreamDirectory.Requester {
        .init(owner: ObjectIdentifier(owner), lane: lane)
    }

    @Test("requests behind a connect in flight wait for it and are handed back when it settles")
    func waitersAreHandedBackOnSettle() {
        var directory = UpstreamDirectory(keepsIdle: true)
        let opener = Self.requester(Self.owners.0, 1)
        let waiters = [Self.requester(Self.owners.0, 3), Self.requester(Self.owners.1, 0)]
        #expect(directory.connecting(Self.keyA, mayBecomeLink: true, requester: opener) == .open)
        for waiter in waiters {
            #expect(directory.connecting(Self.keyA, mayBecomeLink: true, requester: waiter) == .wait)
        }
        // Another key, and a connection that cannot become a link, are not held.
        #expect(directory.connecting(Self.keyB, mayBecomeLink: true, requester: waiters[0]) == .open)
        #expect(directory.connecting(Self.keyA1, mayBecomeLink: false, requester: waiters[0]) == .connect)
        #expect(directory.waitingCount == 2)
        // Only the opener settles the key.
        #expect(directory.settle(Self.keyA, opener: waiters[0]).isEmpty)
        #expect(directory.settle(Self.keyA, opener: opener) == waiters)
        #expect(directory.settle(Self.keyA, opener: opener).isEmpty)
        // The key is free again: the next request opens.
        #expect(directory.connecting(Self.keyA, mayBecomeLink: true, requester: waiters[1]) == .open)
    }

    @Test("at most maximumWaitersPerPendingLink wait; a waiter that leaves is not handed back")
    func waitersAreBounded() {
        var directory = UpstreamDirectory(keepsIdle: true)
        let opener = Self.requester(Self.owners.0, 0)
        #expect(directory.connecting(Self.keyA, mayBecomeLink: true, requester: opener) == .open)
        for lane in 1...Int32(UpstreamDirectory.maximumWaitersPerPendingLink) {
            #expect(
                directory.connecting(Self.keyA, mayBecomeLink: true, requester: Self.requester(Self.owners.1, lane))
                    == .wait)
        }
        #expect(
            directory.connecting(Self.keyA, mayBecomeLink: true, requester: Self.requester(Self.owners.1, 1000))
                == .connect)
        directory.stopWaiting(Self.keyA, requester: Self.requester(Self.owners.1, 1))
        let handedBack = directory.settle(Self.keyA, opener: opener)
        #expect(handedBack.count == UpstreamDirectory.maximumWaitersPerPendingLink - 1)
        #expect(!handedBack.contains(Self.requester(Self.owners.1, 1)))
        #expect(directory.waitingCount == 0)
    }

    @Test("after shutdown nothing waits")
    func noWaitingAfterShutdown() {
        var directory = UpstreamDirectory(keepsIdle: true)
        _ = directory.shutdown()
        #expect(
            directory.connecting(Self.keyA, mayBecomeLink: true, requester: Self.requester(Self.owners.0, 0))
                == .connect)
    }
}
