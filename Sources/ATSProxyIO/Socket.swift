#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Thin, stateless wrappers over the socket system calls the driver uses. Callable from any thread;
/// they own nothing (the caller owns every fd they return).
enum Socket {
    /// Creates a non-blocking, close-on-exec TCP socket of `family` (`AF_INET`/`AF_INET6`).
    static func makeTCP(family: Int32) throws(IOError) -> Int32 {
        #if canImport(Glibc)
            let type = Int32(SOCK_STREAM.rawValue)
        #else
            let type = SOCK_STREAM
        #endif
        let fd = socket(family, type, 0)
        guard fd >= 0 else { throw IOError.current("socket") }
        setNonBlockingCloseOnExec(fd)
        return fd
    }

    /// Sets `O_NONBLOCK` and `FD_CLOEXEC`. Sockets carry no other status or descriptor flags the
    /// driver relies on, so both are set outright (two syscalls instead of four per connection).
    static func setNonBlockingCloseOnExec(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    /// Prepares a connected socket: non-blocking, close-on-exec, `TCP_NODELAY`.
    static func configureConnected(_ fd: Int32) {
        setNonBlockingCloseOnExec(fd)
        setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
    }

    /// `setsockopt` with an `Int32` value; failures are ignored (best-effort tuning).
    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) {
        var value = value
        _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Reads `SO_ERROR` (the outcome of a non-blocking connect).
    static func pendingError(_ fd: Int32) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else { return currentErrno() }
        return value
    }

    /// Sets `SO_LINGER` to zero so that closing sends RST.
    static func setLingerZero(_ fd: Int32) {
        var value = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &value, socklen_t(MemoryLayout<linger>.size))
    }
}

/// `read(2)`, named so call sites inside classes with their own `read`/`write` stay unambiguous.
@inline(__always)
func sysRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}

/// `write(2)`.
@inline(__always)
func sysWrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(fd, buffer, count)
}

/// `close(2)`.
@inline(__always)
func sysClose(_ fd: Int32) {
    _ = close(fd)
}

/// `shutdown(2)` of the write side.
@inline(__always)
func sysShutdownWrite(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
        shutdown(fd, Int32(SHUT_WR))
    #else
        shutdown(fd, SHUT_WR)
    #endif
}

/// `connect(2)`.
@inline(__always)
func sysConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}
