internal import COpenSSL
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An NSS key-log file (the `SSLKEYLOGFILE` format Wireshark, tshark and curl use): one line per
/// secret, `LABEL <client random hex> <secret hex>`, appended as OpenSSL hands them out during a
/// handshake. Attach it to a context with `TLSContext.logKeys(to:)`; every engine made from that
/// context writes its secrets here, so one file covers both legs of an intercepted connection.
///
/// The file is opened once, for appending, and created with mode 0600 (the secrets decrypt the
/// traffic). Each line goes out in one `write(2)` on an `O_APPEND` descriptor, so lines from
/// handshakes on several threads never interleave; that is what makes the `Sendable` sound (the
/// descriptor is the only state and is never reassigned). `deinit` closes it.
public final class TLSKeyLog: Sendable {
    /// The path given at creation (for the banner).
    public let path: String
    /// Mode bits of the file as found when opened (nil when this opening created it).
    public let existingMode: UInt32?
    private let fd: Int32

    /// Opens (creating with mode 0600 when missing) `path` for appending.
    /// - Throws: `TLSKeyLogError` naming the path and the system error.
    public init(path: String) throws(TLSKeyLogError) {
        var status = stat()
        let existed = stat(path, &status) == 0
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, mode_t(0o600))
        guard fd >= 0 else { throw TLSKeyLogError(path: path, reason: String(cString: strerror(errno))) }
        self.fd = fd
        self.path = path
        self.existingMode = existed ? UInt32(status.st_mode & 0o777) : nil
    }

    deinit { close(fd) }

    /// True when the file existed before and other users may read it (group or world bits).
    public var isReadableByOthers: Bool { (existingMode ?? 0) & 0o077 != 0 }

    /// Appends one line (a newline is added). Short writes on a regular file only happen when the
    /// disk is full; the rest of such a line is dropped rather than retried out of order.
    public func append(_ line: UnsafePointer<CChar>) {
        let length = strlen(line)
        var buffer = [UInt8](repeating: 0, count: length + 1)
        buffer.withUnsafeMutableBytes { raw in
            raw.baseAddress?.copyMemory(from: line, byteCount: length)
            raw[length] = UInt8(ascii: "\n")
            _ = write(fd, raw.baseAddress, raw.count)
        }
    }
}

/// The key-log file could not be opened.
public struct TLSKeyLogError: Error, Sendable, CustomStringConvertible, Equatable {
    public let path: String
    public let reason: String
    public var description: String { "TLS key log \(path): \(reason)" }
}

extension TLSContext {
    /// Sends the secrets of every handshake made with this context to `keyLog` (OpenSSL's keylog
    /// callback). Call while configuring, before the first connection. The context keeps `keyLog`
    /// alive; the callback finds it through the context's ex-data slot 0, which nothing else uses.
    public func logKeys(to keyLog: TLSKeyLog) {
        self.keyLog = keyLog
        _ = SSL_CTX_set_ex_data(pointer, 0, Unmanaged.passUnretained(self).toOpaque())
        SSL_CTX_set_keylog_callback(pointer) { ssl, line in
            guard let ssl, let line, let context = SSL_get_SSL_CTX(ssl),
                let owner = SSL_CTX_get_ex_data(context, 0)
            else { return }
            Unmanaged<TLSContext>.fromOpaque(owner).takeUnretainedValue().keyLog?.append(line)
        }
    }
}
