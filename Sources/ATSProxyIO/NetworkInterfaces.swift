import ATSPolicy
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The machine's own addresses, for telling a phone which proxy address to enter.
public enum NetworkInterfaces {
    /// Non-loopback IPv4 addresses of interfaces that are up (LAN candidates), in interface order.
    public static func lanIPv4Addresses() -> [IPAddress] {
        addresses { flags, ip in flags & Int32(IFF_LOOPBACK) == 0 && ip.family == .v4 }
    }

    /// Every address of every interface that is up, IPv4 and IPv6 (loopback and link-local included): the
    /// addresses at which a connection reaches this machine.
    public static func allAddresses() -> [IPAddress] {
        addresses { _, _ in true }
    }

    /// The distinct IPv4 and IPv6 addresses of interfaces that are up and that `keep` accepts (given the
    /// interface's flags), in interface order: one walk of `getifaddrs` for both questions above.
    private static func addresses(where keep: (Int32, IPAddress) -> Bool) -> [IPAddress] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var result: [IPAddress] = []
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = Int32(entry.pointee.ifa_flags)
            guard flags & Int32(IFF_UP) != 0, let address = entry.pointee.ifa_addr else { continue }
            var ip: IPAddress?
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                ip = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                    withUnsafeBytes(of: pointer.pointee.sin_addr) { IPAddress(bytes: Array($0)) }
                }
            case AF_INET6:
                ip = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    withUnsafeBytes(of: pointer.pointee.sin6_addr) { IPAddress(bytes: Array($0)) }
                }
            default:
                ip = nil
            }
            if let ip, keep(flags, ip), !result.contains(ip) { result.append(ip) }
        }
        return result
    }
}
