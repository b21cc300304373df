import ATSProxyCore
import Testing

@testable import ATSProxyIO

#if canImport(Glibc)
    import Glibc
#endif

/// `ConnectError.failure`: the core gets the cause, not a code and text it would have to read back.
@Suite struct ConnectErrorClassificationTests {
    @Test("running out of descriptors or memory is the proxy's limit, not the server's refusal")
    func resourceErrorsAreTheProxys() {
        for code in [EMFILE, ENFILE, ENOBUFS, ENOMEM] {
            let failure = ConnectError.from(errno: code, call: "socket").failure
            guard case .proxyResources(let detail) = failure else {
                Issue.record("errno \(code) classified as \(failure)")
                continue
            }
            #expect(detail.hasPrefix("socket"))
            #expect(failure.code == .cannotConnectToHost)
        }
    }

    @Test func theOtherCausesKeepTheirOwnCase() {
        #expect(ConnectError.from(errno: ECONNREFUSED, call: "connect").failure == .refused)
        #expect(ConnectError.from(errno: ETIMEDOUT, call: "connect").failure == .timedOut)
        #expect(ConnectError.from(errno: ECONNRESET, call: "connect").failure == .reset)
        #expect(ConnectError.from(errno: ENETUNREACH, call: "connect").failure == .unreachable)
        let other = ConnectError.from(errno: EACCES, call: "connect").failure
        #expect(
            { if case .other(let detail) = other { detail.hasPrefix("connect") } else { false } }(), "\(other)")
        #expect(ConnectError.dnsFailure(host: "x", detail: "y").failure == .nameNotResolved)
        #expect(ConnectError.upstreamProxy(.timedOut, detail: "z").failure == .upstreamProxy(.timedOut, detail: "z"))
    }
}
