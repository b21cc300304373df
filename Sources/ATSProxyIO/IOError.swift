#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failed system call: the call's name and the `errno` it left behind.
///
/// A plain value, `Sendable`, created on whichever thread made the call. `description` is for logs;
/// callers branch on `errno` (or on `isReset`).
public struct IOError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The system call that failed, e.g. `"bind"`.
    public let call: String
    /// The `errno` value observed right after the call.
    public let errno: Int32

    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// Captures the calling thread's current `errno`.
    static func current(_ call: String) -> IOError {
        #if canImport(Glibc)
            IOError(call: call, errno: Glibc.errno)
        #else
            IOError(call: call, errno: Darwin.errno)
        #endif
    }

    /// True when the peer reset the connection (`ECONNRESET`) or it is gone for writing (`EPIPE`).
    public var isReset: Bool { errno == ECONNRESET || errno == EPIPE }

    public var description: String {
        "\(call): \(String(cString: strerror(errno))) (errno \(errno))"
    }
}

/// The thread's current `errno` (Glibc exposes it as a computed variable).
@inline(__always)
func currentErrno() -> Int32 {
    #if canImport(Glibc)
        Glibc.errno
    #else
        Darwin.errno
    #endif
}
