import Foundation

/// Finds `set` objects in a binary property list before Foundation decodes it.
///
/// Info.plist files never hold sets, and swift-corelibs-foundation crashes (a segmentation fault in the Swift
/// runtime's cast of the bridged NSSet) when it decodes a binary plist that does: the proxy's Info.plist fuzz
/// target found one in a file whose array marker was flipped to a set marker. The scan reads the trailer and the
/// offset table (the `bplist00` layout) and looks at each object's marker byte; a layout it cannot follow is left
/// to Foundation, which reports a corrupt file as an error.
enum BinaryPlistSetScan {
    /// Whether `data` is a binary property list with at least one object of type set (marker `0xC?`).
    static func containsSet(_ data: Data) -> Bool {
        let bytes = [UInt8](data)
        guard bytes.count >= 40, bytes.starts(with: Array("bplist".utf8)) else { return false }
        let trailer = bytes.count - 32
        let offsetSize = Int(bytes[trailer + 6])
        guard (1...8).contains(offsetSize) else { return false }
        let objectCount = integer(bytes, at: trailer + 8, size: 8)
        let tableStart = integer(bytes, at: trailer + 24, size: 8)
        guard let objectCount, let tableStart, objectCount <= UInt64(bytes.count),
            tableStart <= UInt64(trailer),
            UInt64(trailer) - tableStart >= objectCount * UInt64(offsetSize)
        else { return false }
        for index in 0..<Int(objectCount) {
            guard let offset = integer(bytes, at: Int(tableStart) + index * offsetSize, size: offsetSize),
                offset < UInt64(trailer)
            else { continue }
            if bytes[Int(offset)] & 0xF0 == 0xC0 { return true }
        }
        return false
    }

    /// The big-endian unsigned integer of `size` bytes at `position`, or nil when it does not fit in the data.
    private static func integer(_ bytes: [UInt8], at position: Int, size: Int) -> UInt64? {
        guard position >= 0, size <= 8, position + size <= bytes.count else { return nil }
        var value: UInt64 = 0
        for byte in bytes[position..<position + size] { value = value << 8 | UInt64(byte) }
        return value
    }
}
