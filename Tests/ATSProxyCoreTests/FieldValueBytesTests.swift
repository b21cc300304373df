import ATSHTTP2
import ATSTestSupport
import Testing

@testable import ATSProxyCore

/// Field values keep their bytes through decoding and encoding, including bytes that are not UTF-8.
@Suite struct FieldValueBytesTests {
    @Test(arguments: ["", "gzip, deflate", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X)", "café ☕︎ 😀"])
    func validUTF8DecodesAsBeforeAndEncodesToTheSameBytes(text: String) {
        let bytes = Array(text.utf8)
        #expect(FieldValueBytes.string(from: bytes) == String(decoding: bytes, as: UTF8.self))
        #expect(FieldValueBytes.bytes(of: FieldValueBytes.string(from: bytes)) == bytes)
    }

    @Test func latin1AndBrokenSequencesSurviveByteForByte() {
        let cases: [[UInt8]] = [
            [0x63, 0x61, 0x66, 0xE9],  // "café" in Latin-1
            [0xE2, 0x82, 0x41],  // a truncated 3-byte sequence, then "A"
            [0xFF, 0xFE, 0x80, 0xBF],  // never valid in UTF-8
            [0xC3, 0xA9, 0xE9, 0xC3],  // valid "é", Latin-1 "é", a lone lead byte
        ]
        for bytes in cases {
            #expect(FieldValueBytes.bytes(of: FieldValueBytes.string(from: bytes)) == bytes, "\(bytes)")
        }
        #expect(FieldValueBytes.string(from: [0xE2, 0x82, 0x41]).hasSuffix("A"))
        #expect(FieldValueBytes.string(from: [0x63, 0x61, 0x66, 0xE9]).hasPrefix("caf"))
    }

    @Test func everyByteSequenceRoundTrips() {
        var generator = SplitMix(state: 42)
        var sawValidMultiByte = false
        for _ in 0..<2_000 {
            let count = Int(generator.next() % 24)
            // Half ASCII, half 0x80–0xFF: lead and continuation bytes, so valid multi-byte sequences form
            // among broken ones.
            let bytes = (0..<count).map { _ -> UInt8 in
                let value = generator.next()
                return UInt8(truncatingIfNeeded: value & 0x7F) | (value & 0x100 != 0 ? 0x80 : 0)
            }
            let escapesItself = String(validating: bytes, as: UTF8.self)?.unicodeScalars.contains {
                $0.value >= 0x10_FF80 && $0.value <= 0x10_FFFF
            }
            guard escapesItself != true else { continue }
            let text = FieldValueBytes.string(from: bytes)
            // A decoded non-ASCII scalar outside the escape range: a valid multi-byte sequence was kept as UTF-8.
            if text.unicodeScalars.contains(where: { $0.value >= 0x80 && $0.value < 0x10_FF00 }) {
                sawValidMultiByte = true
            }
            #expect(FieldValueBytes.bytes(of: text) == bytes, "\(bytes)")
        }
        #expect(sawValidMultiByte, "the generator never formed a valid multi-byte sequence")
    }

    /// The one-pass escaper agrees with the definition it implements, written the slow way with Swift's own UTF-8
    /// decoder: at each position a valid scalar is kept, otherwise one byte is escaped. Lead bytes C0–FF with every
    /// kind of continuation (overlong, surrogate, past U+10FFFF, truncated) are drawn often.
    @Test func theEscaperAgreesWithSwiftsDecoderOnEveryPosition() {
        func reference(_ bytes: [UInt8]) -> String {
            var scalars = String.UnicodeScalarView()
            var index = 0
            while index < bytes.count {
                var decoder = UTF8()
                var iterator = bytes[index...].makeIterator()
                if case .scalarValue(let scalar) = decoder.decode(&iterator) {
                    scalars.append(scalar)
                    index += UTF8.width(scalar)
                } else {
                    scalars.append(Unicode.Scalar(0x10_FF00 + UInt32(bytes[index]))!)
                    index += 1
                }
            }
            return String(scalars)
        }
        var generator = SplitMix(state: 7)
        let interesting: [UInt8] = [
            0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED,
            0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF,
        ]
        for _ in 0..<5_000 {
            let count = Int(generator.next() % 12)
            let bytes = (0..<count).map { _ in interesting[Int(generator.next() % UInt64(interesting.count))] }
            // Scalar for scalar: String equality would let a canonically equivalent result pass.
            #expect(
                Array(FieldValueBytes.string(from: bytes).unicodeScalars) == Array(reference(bytes).unicodeScalars),
                "\(bytes)")
        }
    }

    @Test func anHTTP1HeadKeepsAnObsTextByteFromParserToSerializer() throws {
        let head = Array("HTTP/1.1 200 OK\r\nX-Latin1: caf".utf8) + [0xE9] + Array("\r\nContent-Length: 0\r\n\r\n".utf8)
        var parser = HTTP1Parser(role: .response)
        parser.requestSent(method: "GET")
        let events = parser.feed(head)
        guard case .response(let parsed, _) = events.first else {
            Issue.record("no response head: \(events)")
            return
        }
        var written: [UInt8] = []
        HTTP1Serializer.writeResponseHead(parsed, into: &written)
        let line = Array("X-Latin1: caf".utf8) + [0xE9, 0x0D, 0x0A]
        #expect(written.indices.contains { written[$0...].starts(with: line) })
    }
}
