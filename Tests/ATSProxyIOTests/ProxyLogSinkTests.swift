import ATSPolicy
import ATSProxyCore
import Foundation
import Testing

@testable import ATSProxyIO

@Suite("ProxyLogSink batching")
struct ProxyLogSinkTests {
    static func record(_ number: Int) -> RequestRecord {
        RequestRecord(
            time: Date(), clientAddress: "127.0.0.1:1", taskID: "T.\(number)", method: "GET",
            url: "https://a.test/\(number)", httpProtocol: "http/1.1", source: .urlsession, result: .completed,
            atsRequired: true, ruleChain: [], rule: "ATS default", status: 200)
    }

    static func temporaryPath() -> String {
        NSTemporaryDirectory() + "ats-log-\(UUID().uuidString).log"
    }

    static func lines(_ path: String) -> [String] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    @Test("records are written in batches, not one write per record, and flush() writes them all in order")
    func batchedAndOrdered() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        // A batch delay far beyond the test's run: only the size threshold and flush() write, so the count
        // below does not depend on how fast this build formats (a sanitizer build is ten times slower).
        let sink = try ProxyLogSink(
            format: .text, level: .summary, allowSecrets: false, path: path, observer: nil, batchDelay: .seconds(600))
        for number in 0..<2_000 { sink.log(Self.record(number)) }
        sink.flush()
        let lines = Self.lines(path)
        let bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        #expect(lines.count == 4_000)
        let urls = lines.filter { $0.hasPrefix("ats-proxy: GET ") }
        #expect(urls.count == 2_000)
        #expect(urls.first == "ats-proxy: GET https://a.test/0 → allowed 200 (ATS default)")
        #expect(urls.last == "ats-proxy: GET https://a.test/1999 → allowed 200 (ATS default)")
        // One write per record would be 2,000; here a write happens per 64 KiB, plus the final flush().
        #expect(bytes > 0)
        #expect(sink.writesSoFar <= bytes / ProxyLogSink.flushThreshold + 1)
    }

    @Test("a batch is written by itself, without flush(), shortly after its first record")
    func writtenWithoutFlush() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = try ProxyLogSink(format: .text, level: .summary, allowSecrets: false, path: path)
        sink.log(Self.record(1))
        let deadline = Date().addingTimeInterval(10)
        while Self.lines(path).count < 2, Date() < deadline { usleep(10_000) }
        #expect(Self.lines(path).count == 2)
    }

    @Test("notes keep their place after earlier records; JSON lines are whole objects")
    func notesAndJSON() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = try ProxyLogSink(format: .json, level: .summary, allowSecrets: false, path: path)
        sink.log(Self.record(1))
        sink.note("stopping")
        sink.log(Self.record(2))
        sink.flush()
        let lines = Self.lines(path)
        try #require(lines.count == 3)
        #expect(lines[0].contains("\"taskID\":\"T.1\""))
        #expect(lines[1].contains("\"message\":\"stopping\""))
        #expect(lines[2].contains("\"taskID\":\"T.2\""))
        for line in lines { #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil) }
    }

    @Test("records logged from several threads at once all arrive, none cut into another")
    func concurrentLoggers() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = try ProxyLogSink(format: .text, level: .summary, allowSecrets: false, path: path)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for number in 0..<500 { sink.log(Self.record(thread * 1_000 + number)) }
        }
        sink.flush()
        let lines = Self.lines(path)
        #expect(lines.count == 4_000)
        #expect(
            lines.allSatisfy { $0.hasPrefix("[Summary] Task <T>.<") || $0.hasPrefix("ats-proxy: GET https://a.test/") })
        #expect(Set(lines.filter { $0.hasPrefix("ats-proxy") }).count == 2_000)
    }

    @Test("at --diagnostics 0 text records write nothing but still reach the observer")
    func levelOff() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let seen = SessionStats()
        let sink = try ProxyLogSink(
            format: .text, level: .off, allowSecrets: false, path: path, observer: { seen.record($0) })
        for number in 0..<10 { sink.log(Self.record(number)) }
        sink.flush()
        #expect(Self.lines(path).isEmpty)
        #expect(seen.snapshot.requests == 10)
        #expect(sink.writesSoFar == 0)
    }
}
