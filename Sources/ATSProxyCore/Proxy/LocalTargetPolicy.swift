import ATSPolicy

/// Whether a client may make the proxy connect to the machine the proxy runs on. ATS exempts loopback and
/// local names from its rules, so without this a phone on the Wi-Fi could read a service that listens on the
/// proxy host's loopback only (`GET http://127.0.0.1:PORT/`, `CONNECT localhost:PORT`), or map its open ports.
///
/// Clients on the machine itself (loopback) keep every target; other clients are refused targets that name
/// this machine unless `allowsRemoteClients` (`--allow-local-targets`). The decision looks at the name or
/// address as written (legacy IPv4 numbers and IPv4-mapped IPv6 included), before any connection is tried, so
/// the answer is the same for open and closed ports. Immutable value; shared by every session.
public struct LocalTargetPolicy: Sendable {
    /// `--allow-local-targets`: clients on other machines may reach this machine's own services.
    public var allowsRemoteClients = false
    /// The machine's own interface addresses (besides loopback and the unspecified address).
    public var ownAddresses: Set<IPAddress> = []

    public init(allowsRemoteClients: Bool = false, ownAddresses: Set<IPAddress> = []) {
        self.allowsRemoteClients = allowsRemoteClients
        self.ownAddresses = ownAddresses
    }

    /// Whether the request of a client at `clientAddress` (`ip:port` or `[ip]:port`) for `host` is refused.
    public func refuses(host: String, clientAddress: String) -> Bool {
        guard !allowsRemoteClients, !Self.isLoopbackClient(clientAddress) else { return false }
        return namesThisMachine(host)
    }

    /// `localhost` and names under `.localhost` (RFC 6761 §6.3), loopback and unspecified addresses in any
    /// spelling a socket layer accepts, and the machine's own addresses.
    public func namesThisMachine(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        guard let address = IPAddress(parsingHost: name) else { return false }
        return isThisMachine(address)
    }

    /// Loopback, unspecified, or one of `ownAddresses` (IPv4-mapped IPv6 counts as its IPv4 address). The
    /// proxy's resolver drops such answers for clients on other machines, so a name that resolves here (DNS,
    /// `--resolve`, hosts files) is refused as well as a literal.
    public func isThisMachine(_ address: IPAddress) -> Bool {
        let checked = address.mappedIPv4 ?? address
        return checked.isLoopback || checked.isUnspecified || ownAddresses.contains(checked)
    }

    /// Whether `clientAddress` (`ip:port`, `[ip]:port`) is a loopback address; anything unreadable is not.
    public static func isLoopbackClient(_ clientAddress: String) -> Bool {
        var text = Substring(clientAddress)
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return false }
            text = text[text.index(after: text.startIndex)..<close]
        } else if let colon = text.lastIndex(of: ":") {
            text = text[..<colon]
        }
        return IPAddress(parsing: String(text))?.isLoopback ?? false
    }
}
