#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Process-wide settings the I/O driver needs, applied once at startup from any thread.
public enum IOSystem {
    /// Ignores `SIGPIPE`, so that writing to a socket the peer has reset yields `EPIPE` instead of
    /// killing the process. Idempotent; `EventLoopGroup.init` calls it too.
    public static func ignoreSIGPIPE() {
        _ = signal(SIGPIPE, SIG_IGN)
    }

    /// The number of online CPUs (at least 1): the default loop count.
    public static var coreCount: Int {
        max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}
