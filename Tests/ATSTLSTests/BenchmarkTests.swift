import ATSDiagnose
import ATSPolicy
import ATSTestSupport
import Dispatch
import Foundation
import Testing

@testable import ATSTLS

/// Measurements for the report; run with ATS_TLS_BENCH=1 (ideally `-c release -Xswiftc -enable-testing`).
@Suite("Benchmarks", .enabled(if: ProcessInfo.processInfo.environment["ATS_TLS_BENCH"] != nil))
struct BenchmarkTests {
    static func threadCPU() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    @Test func mintAndCacheHit() throws {
        let authority = try CertificateAuthority.generate()
        let cache = try LeafCertificateCache(authority: authority)
        let count = 2000
        let wall = DispatchTime.now().uptimeNanoseconds
        let cpu = Self.threadCPU()
        for index in 0..<count { _ = try cache.mint(host: "host\(index).example.com", now: Date()) }
        let mintWall = Double(DispatchTime.now().uptimeNanoseconds - wall) / Double(count) / 1e6
        let mintCPU = (Self.threadCPU() - cpu) / Double(count) * 1e3
        _ = try cache.leaf(for: "hit.example.com")
        let hits = 1_000_000
        let hitStart = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<hits { _ = try cache.leaf(for: "hit.example.com") }
        let hit = Double(DispatchTime.now().uptimeNanoseconds - hitStart) / Double(hits)
        print("BENCH mint wall \(mintWall) ms, cpu \(mintCPU) ms per leaf; cache hit \(hit) ns")
    }

    @Test func upstreamHandshakesPerSecond() throws {
        let server = try TestServer(
            .tls(TestPKI.serverContext(leaf: TestPKI.leaf(TestPKI.leafSpec()), minimum: .tls12)))
        defer { server.stop() }
        let checker = UpstreamChecker(client: TestPKI.client())
        let requirements = Policies.standard.decide(try RequestTarget(parsing: "https://ats.test/")).requirements
        let transport = server.transport
        for _ in 0..<20 {
            _ = checker.attempt(
                requirements: requirements, host: TestPKI.host, url: "https://ats.test/", transport: transport)
        }
        var count = 0
        let start = Date()
        let cpu = Self.threadCPU()
        while Date().timeIntervalSince(start) < 3 {
            let verdict = checker.attempt(
                requirements: requirements, host: TestPKI.host, url: "https://ats.test/", transport: transport)
            #expect(verdict.outcome == .allowed)
            count += 1
        }
        let wall = Date().timeIntervalSince(start)
        let cpuPer = (Self.threadCPU() - cpu) / Double(count)
        print(
            "BENCH upstream TLS1.3 handshake+verify+judge: \(Double(count) / wall)/s wall (sequential, server on another thread), client CPU \(cpuPer * 1e3) ms each = \(1 / cpuPer)/s per core"
        )
    }
}
