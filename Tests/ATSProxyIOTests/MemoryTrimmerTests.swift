import Dispatch
import Foundation
import Synchronization
import Testing

@testable import ATSProxyIO

/// `MemoryTrimmer`: memory goes back to the system once a burst of closes is over, not during it, not for a
/// few closes, and not more often than its interval allows (issue 17, finding 6).
@Suite struct MemoryTrimmerTests {
    /// Counts releases.
    final class Releases: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// Reports `closes` connection closes on `loop`, spaced by `spacing`.
    static func close(_ closes: Int, on loop: EventLoop, trimmer: MemoryTrimmer, spacing: Double = 0) {
        for _ in 0..<closes {
            let done = DispatchSemaphore(value: 0)
            loop.execute {
                trimmer.connectionClosed(on: loop)
                done.signal()
            }
            done.wait()
            if spacing > 0 { Thread.sleep(forTimeInterval: spacing) }
        }
    }

    static func waitFor(_ expected: Int, _ releases: Releases, seconds: Double = 5) -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        while releases.value < expected && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        return releases.value
    }

    @Test func aBurstOfClosesIsTrimmedOnceItIsOver() {
        let loop = EventLoop()
        let releases = Releases()
        let policy = MemoryTrimmer.Policy(burst: 4, quiet: .milliseconds(150), minimumInterval: .zero)
        let trimmer = MemoryTrimmer(policy: policy, release: { releases.add() })
        // Closes keep coming (every 50 ms, under the quiet time): no trim while the burst lasts.
        Self.close(8, on: loop, trimmer: trimmer, spacing: 0.05)
        #expect(releases.value == 0)
        #expect(Self.waitFor(1, releases) == 1)
        Thread.sleep(forTimeInterval: 0.3)
        #expect(releases.value == 1)
        #expect(trimmer.trims == 1)
    }

    @Test func aFewClosesAreNoBurst() {
        let loop = EventLoop()
        let releases = Releases()
        let policy = MemoryTrimmer.Policy(burst: 10, quiet: .milliseconds(50), minimumInterval: .zero)
        let trimmer = MemoryTrimmer(policy: policy, release: { releases.add() })
        Self.close(9, on: loop, trimmer: trimmer)
        Thread.sleep(forTimeInterval: 0.3)
        #expect(releases.value == 0)
    }

    @Test func trimsAreRateLimited() {
        let loop = EventLoop()
        let releases = Releases()
        let policy = MemoryTrimmer.Policy(burst: 2, quiet: .milliseconds(30), minimumInterval: .milliseconds(600))
        let trimmer = MemoryTrimmer(policy: policy, release: { releases.add() })
        Self.close(2, on: loop, trimmer: trimmer)
        #expect(Self.waitFor(1, releases) == 1)
        let first = Date()
        // A second burst right away waits for the interval, then trims once.
        Self.close(2, on: loop, trimmer: trimmer)
        #expect(Self.waitFor(2, releases) == 2)
        #expect(Date().timeIntervalSince(first) >= 0.5)
    }

    @Test func theDefaultReleaseRunsWithoutHarm() {
        // malloc_trim(0) found through dlsym on glibc; a no-op elsewhere. It must simply return.
        MemoryTrimmer.releaseFreeMemory()
    }
}
