import Foundation

/// Invariant checks for fuzz targets: a broken invariant prints what broke and aborts, which libFuzzer reports
/// as a crash and saves the input (`crash-<sha1>`).
public enum FuzzCheck {
    /// Aborts with `message` unless `condition` holds.
    public static func require(
        _ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
    ) {
        guard !condition else { return }
        fail(message(), file: file, line: line)
    }

    /// Aborts with `message`, naming the check's place.
    public static func fail(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
        FileHandle.standardError.write(Data("FUZZ INVARIANT BROKEN at \(file):\(line): \(message)\n".utf8))
        abort()
    }

    /// Runs `body` with the fuzz input as a byte array (the shape the parsers take).
    public static func withInput(_ data: UnsafePointer<UInt8>?, _ size: Int, _ body: ([UInt8]) -> Void) -> Int32 {
        body(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
        return 0
    }

    /// Printable form of bytes for messages: ASCII as is, the rest as `\xNN`, cut at `limit` bytes.
    public static func describe<Bytes: Collection<UInt8>>(_ bytes: Bytes, limit: Int = 400) -> String {
        var text = ""
        for byte in bytes.prefix(limit) {
            switch byte {
            case 0x20...0x7E where byte != UInt8(ascii: "\\"): text.unicodeScalars.append(Unicode.Scalar(byte))
            case 0x0D: text += "\\r"
            case 0x0A: text += "\\n"
            default: text += String(format: "\\x%02X", byte)
            }
        }
        return bytes.count > limit ? text + "…(\(bytes.count) bytes)" : text
    }
}

/// A deterministic generator seeded from the input (SplitMix64), so a saved crash input replays the same run.
public struct FuzzRandom: RandomNumberGenerator {
    private var state: UInt64

    /// Seeds from the bytes of `input` (FNV-1a). Reads contiguous storage directly: a generic iterator over a large
    /// input cost about 4% of a campaign's time.
    public init<Bytes: Sequence<UInt8>>(seed input: Bytes) {
        state = input.withContiguousStorageIfAvailable(Self.fnv1a) ?? Array(input).withUnsafeBufferPointer(Self.fnv1a)
    }

    private static func fnv1a(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        return hash
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }

    /// Cut points for `count` bytes: ascending offsets strictly inside (0, count), at most `limit` of them.
    public mutating func cuts(count: Int, limit: Int = 12) -> [Int] {
        guard count > 1 else { return [] }
        let wanted = Int.random(in: 1...max(1, min(limit, count - 1)), using: &self)
        return Set((0..<wanted).map { _ in Int.random(in: 1..<count, using: &self) }).sorted()
    }
}

extension Array where Element == UInt8 {
    /// The array cut at `offsets` (ascending, inside the array) into consecutive pieces.
    public func pieces(at offsets: [Int]) -> [ArraySlice<UInt8>] {
        var result: [ArraySlice<UInt8>] = []
        var start = 0
        for offset in offsets where offset > start && offset < count {
            result.append(self[start..<offset])
            start = offset
        }
        result.append(self[start...])
        return result
    }

    /// The bytes before `window` in one piece, the window one byte at a time, the rest in one piece: every cut
    /// inside the window, at the cost of `window.count` feeds.
    public func piecesByteAtATime(in window: Range<Int>) -> [ArraySlice<UInt8>] {
        let window = window.clamped(to: 0..<count)
        var result: [ArraySlice<UInt8>] = []
        result.reserveCapacity(window.count + 2)
        if window.lowerBound > 0 { result.append(self[..<window.lowerBound]) }
        for offset in window { result.append(self[offset..<offset + 1]) }
        if window.upperBound < count { result.append(self[window.upperBound...]) }
        return result
    }

    /// The cuts a target checks besides the whole input: an input of up to `limit` bytes one byte at a time (every
    /// cut); a longer one with a window of `limit` bytes one at a time, placed by `random` (the byte-at-a-time parse
    /// of a long input was most of a campaign's time, and the parser state at a cut repeats within a short input).
    public func bytewisePieces(limit: Int, using random: inout FuzzRandom) -> [ArraySlice<UInt8>] {
        guard count > limit else { return piecesByteAtATime(in: 0..<count) }
        let start = Int.random(in: 0...(count - limit), using: &random)
        return piecesByteAtATime(in: start..<start + limit)
    }
}
