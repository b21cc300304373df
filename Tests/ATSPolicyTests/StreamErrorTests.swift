import ATSPolicy
import Foundation
import Testing

/// `StreamError`: the `domain:code` pair a failed load carries, typed, and written as logs have always written it.
@Suite struct StreamErrorTests {
    @Test func parsesAndPrintsTheDomainCodePair() throws {
        let parsed = try #require(StreamError(parsing: "3:-9836"))
        #expect(parsed == .secureTransport(-9836))
        #expect(parsed.description == "3:-9836")
        #expect(parsed.isSecureTransport)
        let posix = try #require(StreamError(parsing: "1:61"))
        #expect(posix.domain == StreamError.Domain.posix && posix.code == 61)
        #expect(!posix.isSecureTransport)
    }

    @Test(arguments: ["", "3", "3:", ":-9836", "3:-98x", "3:-9836:1", "[3:-9836]", " 3:-9836"])
    func refusesTextThatIsNotAPair(_ text: String) {
        #expect(StreamError(parsing: text) == nil)
    }

    /// A record's JSON keeps the string form, so logs written before the type existed decode to the same value.
    @Test func encodesAsTheStringLogsCarry() throws {
        struct Line: Codable, Equatable { var streamError: StreamError? }
        let json = try JSONEncoder().encode(Line(streamError: .secureTransport(-9802)))
        #expect(String(decoding: json, as: UTF8.self) == #"{"streamError":"3:-9802"}"#)
        let old = try JSONDecoder().decode(Line.self, from: Data(#"{"streamError":"12:8"}"#.utf8))
        #expect(old.streamError == StreamError(domain: 12, code: 8))
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(Line.self, from: Data(#"{"streamError":"TLS failed"}"#.utf8))
        }
    }
}
