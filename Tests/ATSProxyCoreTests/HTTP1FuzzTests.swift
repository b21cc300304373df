import ATSTestSupport
import Testing

@testable import ATSProxyCore

/// Deterministic mutation fuzzing: hostile variants of valid messages must never crash the parser,
/// and the events must not depend on how the bytes were split into chunks.
@Suite struct HTTP1FuzzTests {
    /// Bytes that matter to HTTP/1 framing, favoured by the mutator.
    static let interesting: [UInt8] = Array("\r\n :;,\"\\\t0fF-xX".utf8) + [0, 0x7F, 0x80, 0xFF]

    static func mutate(_ input: [UInt8], using generator: inout SplitMix) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &generator) where !bytes.isEmpty {
            let position = Int.random(in: 0..<bytes.count, using: &generator)
            let byte =
                Bool.random(using: &generator)
                ? interesting.randomElement(using: &generator)! : UInt8.random(in: 0...255, using: &generator)
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: bytes[position] = byte
            case 1: bytes.insert(byte, at: position)
            default: bytes.remove(at: position)
            }
        }
        return bytes
    }

    @Test(arguments: HTTP1ParserTests.validCases)
    func mutatedMessagesParseTheSameInAnyChunking(_ testCase: HTTP1ParserTests.Case) {
        var generator = SplitMix(state: UInt64(truncatingIfNeeded: testCase.name.utf8.count * 7919))
        let original = Array(http: testCase.raw)
        for _ in 0..<150 {
            let bytes = Self.mutate(original, using: &generator)
            let methods = testCase.methods.isEmpty && testCase.role == .response ? ["GET"] : testCase.methods
            let whole = HTTP1ParseRun(bytes, role: testCase.role, methods: methods, closeAtEnd: true)
            let chunkSize = Int.random(in: 1...5, using: &generator)
            let split = HTTP1ParseRun(
                bytes, role: testCase.role, methods: methods, chunkSize: chunkSize, closeAtEnd: true)
            #expect(whole.normalized == split.normalized, "\(bytes) in chunks of \(chunkSize)")
        }
    }

    @Test func randomGarbageNeverCrashes() {
        var generator = SplitMix(state: 42)
        for role in [HTTP1Parser.Role.request, .response] {
            for _ in 0..<300 {
                let count = Int.random(in: 0..<200, using: &generator)
                var bytes = (0..<count).map { _ in Self.interesting.randomElement(using: &generator)! }
                if Bool.random(using: &generator) {
                    bytes = Array(http: role == .request ? "GET / HTTP/1.1\r\n" : "HTTP/1.1 200 OK\r\n") + bytes
                }
                let methods = role == .response ? ["GET", "GET"] : []
                let run = HTTP1ParseRun(bytes, role: role, methods: methods, chunkSize: 3, closeAtEnd: true)
                // The input ended (closeAtEnd): the last event must say where the message stands.
                let terminal =
                    run.events.last.map { event -> Bool in
                        switch event {
                        case .messageEnd, .failed, .upgraded: true
                        case .request, .response, .body, .trailers: false
                        }
                    } ?? true
                #expect(terminal, "input ended mid-message without an event saying so: \(run.events.suffix(2))")
            }
        }
    }
}
