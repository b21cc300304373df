import ATSPolicy
import ATSProxyCore
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Name-resolution overrides consulted before the system resolver: `--resolve HOST:PORT:ADDR`
/// entries (curl syntax) first, then `--hosts-file` entries (any port).
///
/// An immutable `Sendable` value; build it once at startup (or on reload) and share it.
public struct ResolverOverrides: Sendable, Equatable {
    /// A parse failure, with the offending text and why.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The entry (or `file:line`) that failed.
        public let entry: String
        /// What is wrong with it.
        public let reason: String

        public var description: String { "\(entry): \(reason)" }
    }

    /// `--resolve` entries keyed by lower-cased host and port; `*` host entries under `"*"`.
    public private(set) var pinned: [String: [UInt16: [IPAddress]]] = [:]
    /// Hosts-file entries keyed by lower-cased name, in file order.
    public private(set) var hosts: [String: [IPAddress]] = [:]

    public init() {}

    /// True when no override is configured.
    public var isEmpty: Bool { pinned.isEmpty && hosts.isEmpty }

    /// Adds one `--resolve` value: `HOST:PORT:ADDR[,ADDR...]`, IPv6 addresses in brackets,
    /// optional leading `+` (curl's "temporary" marker, accepted and ignored), host `*` for any.
    public mutating func addResolve(_ text: String) throws(ParseError) {
        var body = Substring(text)
        if body.hasPrefix("+") { body = body.dropFirst() }
        guard let firstColon = body.firstIndex(of: ":") else {
            throw ParseError(entry: text, reason: "expected HOST:PORT:ADDR")
        }
        let host = body[..<firstColon].lowercased()
        let rest = body[body.index(after: firstColon)...]
        guard let secondColon = rest.firstIndex(of: ":") else {
            throw ParseError(entry: text, reason: "expected HOST:PORT:ADDR")
        }
        let portText = rest[..<secondColon]
        guard !host.isEmpty else { throw ParseError(entry: text, reason: "empty host") }
        guard let port = UInt16(portText), port > 0 else {
            throw ParseError(entry: text, reason: "invalid port '\(portText)'")
        }
        let addressList = rest[rest.index(after: secondColon)...]
        var addresses: [IPAddress] = []
        for item in addressList.split(separator: ",", omittingEmptySubsequences: false) {
            var literal = item.trimmingCharacters(in: .whitespaces)
            if literal.hasPrefix("["), literal.hasSuffix("]") {
                literal = String(literal.dropFirst().dropLast())
            }
            guard let address = IPAddress(parsing: literal) else {
                throw ParseError(entry: text, reason: "invalid address '\(item)'")
            }
            addresses.append(address)
        }
        guard !addresses.isEmpty else { throw ParseError(entry: text, reason: "no address") }
        pinned[host, default: [:]][port, default: []].append(contentsOf: addresses)
    }

    /// Adds the entries of an `/etc/hosts`-format text: `ADDRESS NAME [ALIAS...]` per line,
    /// `#` starts a comment, blank lines are skipped. A bad address is an error naming the line.
    public mutating func addHostsFile(contents: String, name: String = "hosts") throws(ParseError) {
        var lineNumber = 0
        for rawLine in contents.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            var line = rawLine
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let first = fields.first else { continue }
            guard let address = IPAddress(parsing: String(first)) else {
                throw ParseError(entry: "\(name):\(lineNumber)", reason: "invalid address '\(first)'")
            }
            guard fields.count >= 2 else {
                throw ParseError(entry: "\(name):\(lineNumber)", reason: "no host name after \(first)")
            }
            for hostName in fields.dropFirst() {
                hosts[hostName.lowercased(), default: []].append(address)
            }
        }
    }

    /// Reads and adds a hosts file.
    public mutating func addHostsFile(path: String) throws(ParseError) {
        let contents: String
        do {
            contents = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ParseError(entry: path, reason: "cannot read: \(error.localizedDescription)")
        }
        try addHostsFile(contents: contents, name: path)
    }

    /// The overriding addresses for `host`:`port`, or nil when no override applies. A host that is
    /// itself an IP literal is never looked up here.
    public func lookup(host: String, port: UInt16) -> [IPAddress]? {
        let key = host.lowercased()
        if let addresses = pinned[key]?[port] { return addresses }
        if let addresses = pinned["*"]?[port] { return addresses }
        if let addresses = hosts[key] { return addresses }
        return nil
    }
}

/// Why an outbound connection could not be made; `failure` is the core's classification, which maps each case to an
/// NSURLError code (`UpstreamConnectFailure.code`).
public enum ConnectError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The name did not resolve (getaddrinfo failure, or no usable address). → -1003
    case dnsFailure(host: String, detail: String)
    /// Every address refused the connection. → -1004
    case refused
    /// No address answered within the timeout. → -1001
    case timedOut
    /// The connection was reset while being established. → -1005
    case reset
    /// Network or host unreachable. → -1004
    case unreachable
    /// Any other socket failure. → -1004
    case other(IOError)
    /// The upstream proxy could not be reached or did not open the tunnel (`UpstreamProxyConnector`);
    /// the detail starts with `UpstreamProxy.detailPrefix` and never holds a secret.
    case upstreamProxy(NSURLErrorCode, detail: String)

    /// The core's classification of this failure (the proxy's own resource limits apart from other socket errors).
    public var failure: UpstreamConnectFailure {
        switch self {
        case .dnsFailure: return .nameNotResolved
        case .refused: return .refused
        case .timedOut: return .timedOut
        case .reset: return .reset
        case .unreachable: return .unreachable
        case .other(let error):
            switch error.errno {
            // EADDRNOTAVAIL on connect: no local port left (the proxy's ephemeral ports), not the server's network.
            case EMFILE, ENFILE, ENOBUFS, ENOMEM, EADDRNOTAVAIL: return .proxyResources(detail: error.description)
            default: return .other(detail: error.description)
            }
        case .upstreamProxy(let code, let detail): return .upstreamProxy(code, detail: detail)
        }
    }

    /// Classifies a connect-time `errno`.
    static func from(errno code: Int32, call: String) -> ConnectError {
        switch code {
        case ECONNREFUSED: return .refused
        case ETIMEDOUT: return .timedOut
        case ECONNRESET, EPIPE, ECONNABORTED: return .reset
        case ENETUNREACH, EHOSTUNREACH, ENETDOWN, EHOSTDOWN: return .unreachable
        default: return .other(IOError(call: call, errno: code))
        }
    }

    public var description: String {
        switch self {
        case .dnsFailure(let host, let detail): return "cannot resolve \(host): \(detail)"
        case .refused: return "connection refused"
        case .timedOut: return "connection timed out"
        case .reset: return "connection reset"
        case .unreachable: return "network unreachable"
        case .other(let error): return error.description
        case .upstreamProxy(_, let detail): return detail
        }
    }
}

/// Resolves host names to socket addresses: IP literals directly, then `ResolverOverrides`, then
/// (unless disabled) `getaddrinfo` on a concurrent worker queue so no loop ever blocks.
///
/// Threading: immutable after `init` and `Sendable`; `resolve` may be called on any loop and
/// delivers its result on that loop.
public final class Resolver: Sendable {
    /// Overrides consulted before the system resolver.
    public let overrides: ResolverOverrides
    /// When false, names without an override fail with `.dnsFailure` (hermetic tests).
    public let useSystemResolver: Bool
    private let workers = DispatchQueue(label: "ats-proxy.resolver", attributes: .concurrent)
    /// Addresses dropped from every answer (the proxy host's own, for clients on other machines); a name
    /// left without any fails to resolve, with `refusal` as the detail.
    private let refuses: (@Sendable (IPAddress) -> Bool)?
    private let refusal: String

    public init(overrides: ResolverOverrides = ResolverOverrides(), useSystemResolver: Bool = true) {
        self.overrides = overrides
        self.useSystemResolver = useSystemResolver
        refuses = nil
        refusal = ""
    }

    private init(_ base: Resolver, refusing: @escaping @Sendable (IPAddress) -> Bool, because refusal: String) {
        overrides = base.overrides
        useSystemResolver = base.useSystemResolver
        refuses = refusing
        self.refusal = refusal
    }

    /// A resolver with the same overrides that never answers with an address `predicate` matches: a name that
    /// resolves only to such addresses fails as unresolvable (detail: `refusal`), before any connection is
    /// tried, so nothing is learnt about the ports behind it.
    public func refusing(because refusal: String, _ predicate: @escaping @Sendable (IPAddress) -> Bool) -> Resolver {
        Resolver(self, refusing: predicate, because: refusal)
    }

    /// Resolves `host` (a name or an IP literal, IPv6 with or without brackets) for `port` and
    /// calls `completion` on `loop` with the addresses in preference order (as getaddrinfo ranks
    /// them, or override order).
    public func resolve(
        host: String, port: UInt16, on loop: EventLoop,
        completion: @escaping (Result<[SocketAddress], ConnectError>) -> Void
    ) {
        let bound = LoopBound(completion, loop: loop)
        if let immediate = resolveWithoutSystem(host: host, port: port) {
            let answer = screened(immediate, host: host)
            loop.execute { bound.value(answer) }
            return
        }
        workers.async { [self] in
            let result = screened(Self.systemLookup(host: host, port: port), host: host)
            loop.execute { bound.value(result) }
        }
    }

    /// `result` without the refused addresses (see `refusing`).
    private func screened(_ result: Result<[SocketAddress], ConnectError>, host: String)
        -> Result<[SocketAddress], ConnectError>
    {
        guard let refuses, case .success(let addresses) = result else { return result }
        let kept = addresses.filter { !refuses($0.ip) }
        if kept.isEmpty { return .failure(.dnsFailure(host: host, detail: refusal)) }
        return .success(kept)
    }

    /// The answer that needs no system lookup: a literal, an override, or (system resolver off)
    /// a DNS failure. nil means "ask getaddrinfo".
    func resolveWithoutSystem(host: String, port: UInt16) -> Result<[SocketAddress], ConnectError>? {
        var name = host
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if let literal = IPAddress(parsing: name) {
            return .success([SocketAddress(ip: literal, port: port)])
        }
        if let addresses = overrides.lookup(host: name, port: port) {
            return .success(addresses.map { SocketAddress(ip: $0, port: port) })
        }
        if !useSystemResolver {
            return .failure(.dnsFailure(host: name, detail: "no override and system resolver disabled"))
        }
        return nil
    }

    /// Blocking `getaddrinfo` (TCP, any family, `AI_ADDRCONFIG`); runs on a worker thread.
    static func systemLookup(host: String, port: UInt16) -> Result<[SocketAddress], ConnectError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        hints.ai_flags = AI_ADDRCONFIG
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            let detail =
                rc == EAI_SYSTEM ? String(cString: strerror(currentErrno())) : String(cString: gai_strerror(rc))
            return .failure(.dnsFailure(host: host, detail: detail))
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let sa = entry.pointee.ai_addr, let address = SocketAddress(UnsafePointer(sa)),
                !addresses.contains(address)
            {
                addresses.append(address)
            }
            cursor = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else {
            return .failure(.dnsFailure(host: host, detail: "no IPv4 or IPv6 address"))
        }
        return .success(addresses)
    }
}
