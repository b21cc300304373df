import ATSPolicy

extension SocketAddress {
    /// The address as a client types it: an IPv4-mapped IPv6 address (`[::ffff:192.168.1.5]:8080`, what a
    /// dual-stack socket reports for an IPv4 peer) as its IPv4 address (`192.168.1.5:8080`); others unchanged.
    public var clientFacing: SocketAddress {
        guard let mapped = ip.mappedIPv4 else { return self }
        return SocketAddress(ip: mapped, port: port)
    }
}
