import ATSPolicy

/// The set of client address blocks a non-loopback listener accepts (`--allow-client CIDR`).
///
/// An immutable `Sendable` value. IPv4-mapped IPv6 peers (`::ffff:10.1.2.3`, seen on dual-stack
/// sockets) are matched as their IPv4 address.
public struct ClientAllowList: Sendable, Hashable, CustomStringConvertible {
    /// The accepted blocks.
    public let blocks: [CIDRBlock]

    public init(_ blocks: [CIDRBlock]) {
        self.blocks = blocks
    }

    /// Parses CIDR strings (`10.0.0.0/8`, `fd00::/8`); a bare address means a single host. Returns
    /// nil and the offending entry through `invalid` on the first bad entry.
    public init?(parsing entries: [String], invalid: ((String) -> Void)? = nil) {
        var blocks: [CIDRBlock] = []
        for entry in entries {
            if let block = CIDRBlock(parsing: entry) {
                blocks.append(block)
            } else if let address = IPAddress(parsing: entry) {
                blocks.append(CIDRBlock(network: address, prefixLength: address.bytes.count * 8))
            } else {
                invalid?(entry)
                return nil
            }
        }
        self.init(blocks)
    }

    /// Loopback, RFC 1918 private, IPv4 link-local, IPv6 unique-local and link-local ranges: the
    /// default for a non-loopback listener without `--allow-client`.
    public static let privateAndLinkLocal = ClientAllowList(
        parsing: [
            "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
            "::1/128", "fc00::/7", "fe80::/10",
        ])!

    /// True when `address` lies in one of the blocks.
    public func allows(_ address: IPAddress) -> Bool {
        let candidate = address.mappedIPv4 ?? address
        return blocks.contains { $0.contains(candidate) }
    }

    public var description: String { blocks.map(\.description).joined(separator: ", ") }
}
