import ATSPolicy
import FuzzSupport

@testable import ATSProxyCore

/// libFuzzer entry point: the input is one request-target, authority, URL, address or CIDR block as text.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestTarget(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzCheck.withInput(data, size, RequestTargetFuzz.run)
}

/// The executable's entry point under SwiftPM's renaming (see `FuzzDriver`).
@_cdecl("fuzz_request_target_main")
public func fuzzRequestTargetMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?)
    -> Int32
{
    FuzzDriver.run(argc, argv, fuzzRequestTarget)
}

/// The request-target parsers: `HTTP1RequestTarget` (origin, absolute, authority and asterisk forms, for GET,
/// CONNECT and OPTIONS), the policy's `RequestTarget` URL parser, `IPAddress` and `CIDRBlock`. Invariants:
/// 1. a parsed request-target, written back (`description`), parses to itself; ports are 0-65535, hosts non-empty;
/// 2. routing and policy agree: the URL the proxy builds from an absolute-form or CONNECT target (as `ProxySession`
///    does), when the policy's parser accepts it, names the same host (lower-cased) and port the request is routed to;
/// 3. `RequestTarget` gives ports 1-65535, lower-case hosts, and its canonical URL parses to the same target;
/// 4. `IPAddress` and `CIDRBlock` round-trip through their text form; a block contains its own network address.
enum RequestTargetFuzz {
    static func run(_ input: [UInt8]) {
        for method in ["GET", "CONNECT", "OPTIONS"] {
            checkHTTP1(input, method: method)
        }
        let text = String(decoding: input, as: UTF8.self)
        checkPolicyTarget(text)
        if let address = IPAddress(parsing: text) {
            FuzzCheck.require(
                address.bytes.count == 4 || address.bytes.count == 16, "address of \(address.bytes.count) bytes")
            FuzzCheck.require(IPAddress(parsing: address.description) == address, "\(address) does not round-trip")
            if let mapped = address.mappedIPv4 {
                FuzzCheck.require(mapped.bytes == Array(address.bytes[12...]), "mapped IPv4 of \(address)")
            }
        }
        if let block = CIDRBlock(parsing: text) {
            FuzzCheck.require(CIDRBlock(parsing: block.description) == block, "\(block) does not round-trip")
            FuzzCheck.require(block.contains(block.network), "\(block) does not contain its network")
        }
    }

    /// Invariants 1 and 2.
    static func checkHTTP1(_ input: [UInt8], method: String) {
        guard let target = try? HTTP1RequestTarget.parse(input[...], method: method) else { return }
        let written = Array(target.description.utf8)
        let again = try? HTTP1RequestTarget.parse(written[...], method: method)
        FuzzCheck.require(
            again == target,
            "\(method) \(target) written as \(target.description) parses as \(String(describing: again))")
        switch target {
        case .origin(let path):
            FuzzCheck.require(path.utf8.first == UInt8(ascii: "/"), "origin-form without /")
        case .asterisk:
            FuzzCheck.require(method == "OPTIONS", "* for \(method)")
        case .authority(let authority):
            FuzzCheck.require(method == "CONNECT" && authority.port != nil, "authority-form for \(method)")
            checkAuthority(authority)
            // As `ProxySession.connect` builds the tunnel's URL: numeric spellings (0177.0.0.1, 2130706433) are
            // routed and judged in their canonical form.
            let host = RequestTarget.canonicalHost(authority.host)
            let port = authority.port ?? 443
            let url = "https://\(RequestTarget.uriHost(host))\(port == 443 ? "" : ":\(port)")/"
            if let policy = try? RequestTarget(parsing: url) {
                FuzzCheck.require(
                    policy.host == host && policy.port == port,
                    "CONNECT \(authority) is routed to \(host):\(port) but judged as \(policy.host):\(policy.port)")
            }
        case .absolute(let scheme, let authority, let pathAndQuery):
            FuzzCheck.require(method != "CONNECT", "absolute-form for CONNECT")
            checkAuthority(authority)
            // As `ProxySession` builds the URL of a forwarded request.
            let path = pathAndQuery.isEmpty ? "/" : (pathAndQuery.hasPrefix("?") ? "/" + pathAndQuery : pathAndQuery)
            let url = "\(scheme.lowercased())://\(authority)\(path)"
            if let policy = try? RequestTarget(parsing: url) {
                let port = authority.port ?? policy.scheme.defaultPort
                // The upstream connection goes to the parsed (canonical) host, which is what is judged.
                FuzzCheck.require(
                    policy.host == RequestTarget.canonicalHost(authority.host) && policy.port == port,
                    "\(target) is sent to \(authority) (Host) but judged as \(policy.host):\(policy.port)")
            }
        }
    }

    static func checkAuthority(_ authority: HTTP1Authority) {
        FuzzCheck.require(!authority.host.isEmpty, "an empty host")
        if let port = authority.port { FuzzCheck.require((0...65535).contains(port), "port \(port)") }
    }

    /// Invariant 3.
    static func checkPolicyTarget(_ text: String) {
        guard let target = try? RequestTarget(parsing: text) else { return }
        FuzzCheck.require((1...65535).contains(target.port), "\(text) gives port \(target.port)")
        FuzzCheck.require(target.host == target.host.lowercased(), "\(text) gives host \(target.host)")
        FuzzCheck.require(!target.host.isEmpty, "\(text) gives an empty host")
        let canonical = RequestTarget(scheme: target.scheme, host: target.host, port: target.port)
        let again = try? RequestTarget(parsing: canonical.url)
        FuzzCheck.require(
            again?.host == target.host && again?.port == target.port && again?.scheme == target.scheme,
            "\(text) → \(canonical.url) parses as \(String(describing: again))")
    }
}
