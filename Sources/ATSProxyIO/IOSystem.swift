internal import CATSPoll

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

    /// Keeps glibc's allocator from handing memory back and forth with the kernel. Relaying moves
    /// bytes through transient buffers of 16–128 KiB (decrypted records, encrypted output, read
    /// batches); with glibc's defaults each one came from a fresh mmap or re-grew a trimmed heap,
    /// and the page faults and zeroing cost about as much CPU as the encryption (bulk downloads:
    /// ~5 ms of proxy CPU per MiB, 2.7 ms with this). Up to 1 MiB of freed memory per arena stays
    /// mapped. Idempotent; `EventLoopGroup.init` calls it.
    public static func tuneAllocator() {
        _ = ats_tune_allocator(1 << 20)
    }

    /// The number of online CPUs (at least 1): the default loop count.
    public static var coreCount: Int {
        max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}
