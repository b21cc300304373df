import ATSTLS
import FuzzSupport

/// libFuzzer entry point: the input is what a client sends first inside a CONNECT tunnel (TLS records).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTLSHello(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzCheck.withInput(data, size, TLSHelloFuzz.run)
}

/// The executable's entry point under SwiftPM's renaming (see `FuzzDriver`).
@_cdecl("fuzz_tls_hello_main")
public func fuzzTLSHelloMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzDriver.run(argc, argv, fuzzTLSHello)
}

/// The proxy's client-facing TLS engine on a ClientHello. OpenSSL parses the records; the proxy's own code is what
/// runs from its callbacks: the SNI callback (the name, the fallback to the CONNECT host, minting and installing a
/// leaf from the cache) and the ALPN callback (its walk of the client's protocol list, the choice). Invariants:
/// 1. no trap, no memory error (the ALPN walk reads a C buffer);
/// 2. the same bytes give the same outcome whole and one record-ish piece at a time: failed or not, the name served,
///    the protocol chosen;
/// 3. the protocol chosen is one the proxy offers; a name is served only with a leaf installed for it.
enum TLSHelloFuzz {
    /// The proxy's server context with a CA made once for the run (minting per input would dominate).
    static let server: ServerTLSContext = {
        do {
            return try ServerTLSContext(
                leaves: try LeafCertificateCache(authority: try CertificateAuthority.generate()))
        } catch {
            FuzzCheck.fail("cannot set up the server TLS context: \(error)")
        }
    }()

    struct Outcome: Equatable {
        var failed: Bool
        var servedName: String?
        var alpn: String?
    }

    static func handshake(_ pieces: [ArraySlice<UInt8>]) -> Outcome {
        let connection: TLSConnection
        do {
            connection = try server.makeConnection(connectHost: "connect-host.example")
        } catch {
            FuzzCheck.fail("cannot make a server engine: \(error)")
        }
        var failed = false
        for piece in pieces where !failed {
            connection.receive(Array(piece))
            if case .failed = connection.handshake() { failed = true }
            _ = connection.takeOutbound()
        }
        let outcome = Outcome(failed: failed, servedName: connection.servedName, alpn: connection.negotiatedALPN)
        connection.receiveEOF()
        _ = connection.handshake()
        return outcome
    }

    static func run(_ input: [UInt8]) {
        let whole = handshake([input[...]])
        if let alpn = whole.alpn {
            FuzzCheck.require(["h2", "http/1.1"].contains(alpn), "ALPN chose \(alpn)")
        }
        var random = FuzzRandom(seed: input)
        let split = handshake(input.pieces(at: random.cuts(count: input.count, limit: 4)))
        FuzzCheck.require(split == whole, "cut ClientHello gives \(split), whole \(whole)")
    }
}
