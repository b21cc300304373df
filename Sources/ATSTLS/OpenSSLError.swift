internal import COpenSSL
internal import COpenSSLShims

/// One entry of OpenSSL's per-thread error queue, copied out so it can travel in a Swift error.
public struct OpenSSLErrorEntry: Sendable, Hashable, CustomStringConvertible {
    /// The packed error code (library and reason).
    public let code: UInt
    /// OpenSSL's library number (e.g. ERR_LIB_SSL).
    public let library: Int32
    /// OpenSSL's reason number (e.g. SSL_R_NO_SHARED_CIPHER).
    public let reason: Int32
    /// OpenSSL's text, e.g. "error:0A000410:SSL routines::sslv3 alert handshake failure".
    public let text: String

    public var description: String { text }

    /// Drains the calling thread's error queue (call on the same thread right after a failure).
    static func drain() -> [OpenSSLErrorEntry] {
        var entries: [OpenSSLErrorEntry] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            entries.append(
                OpenSSLErrorEntry(
                    code: UInt(code), library: ERR_GET_LIB(code), reason: ERR_GET_REASON(code), text: text))
        }
        return entries
    }
}

/// An error from an OpenSSL call that is not a TLS handshake outcome: key generation, parsing,
/// signing, file formats. Carries the operation and the drained OpenSSL error queue.
public struct OpenSSLError: Error, Sendable, CustomStringConvertible {
    /// What the code was doing, e.g. "parse certificate PEM".
    public let operation: String
    /// The OpenSSL error queue at the time of failure (may be empty).
    public let entries: [OpenSSLErrorEntry]

    init(_ operation: String) {
        self.operation = operation
        entries = OpenSSLErrorEntry.drain()
    }

    public var description: String {
        entries.isEmpty ? "\(operation) failed" : "\(operation) failed: \(entries.map(\.text).joined(separator: "; "))"
    }
}

/// Runs an OpenSSL call that returns 1 on success, throwing `OpenSSLError` otherwise.
@inline(__always)
func check(_ result: Int32, _ operation: @autoclosure () -> String) throws {
    if result != 1 { throw OpenSSLError(operation()) }
}

/// Calls into a memory BIO and returns its contents; the BIO is freed.
func withMemoryBIO(_ body: (OpaquePointer) throws -> Void) throws -> [UInt8] {
    guard let bio = BIO_new(BIO_s_mem()) else { throw OpenSSLError("BIO_new") }
    defer { BIO_free(bio) }
    try body(bio)
    var data: UnsafeMutablePointer<CChar>?
    let length = ats_BIO_get_mem_data(bio, &data)
    guard length > 0, let data else { return [] }
    return data.withMemoryRebound(to: UInt8.self, capacity: length) {
        Array(UnsafeBufferPointer(start: $0, count: length))
    }
}

/// Makes a read-only memory BIO over `bytes` for the duration of `body`.
func withReadBIO<T>(_ bytes: [UInt8], _ body: (OpaquePointer) throws -> T) throws -> T {
    try bytes.withUnsafeBytes { raw in
        guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
            throw OpenSSLError("BIO_new_mem_buf")
        }
        defer { BIO_free(bio) }
        return try body(bio)
    }
}

/// SHA-256 of `bytes` through EVP.
func sha256(_ bytes: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    bytes.withUnsafeBytes { raw in
        _ = EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_sha256(), nil)
    }
    return digest
}

/// Lower-case hex.
func hexString(_ bytes: [UInt8], separator: String = "") -> String {
    let digits = Array("0123456789abcdef")
    return bytes.map { String([digits[Int($0 >> 4)], digits[Int($0 & 0xf)]]) }.joined(separator: separator)
}
