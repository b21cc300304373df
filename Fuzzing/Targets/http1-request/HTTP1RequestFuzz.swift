import FuzzSupport

@testable import ATSProxyCore

/// libFuzzer entry point: the input is what a client writes to the proxy (one or more pipelined requests).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP1Request(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzCheck.withInput(data, size, HTTP1RequestFuzz.run)
}

/// The executable's entry point under SwiftPM's renaming (see `FuzzDriver`).
@_cdecl("fuzz_http1_request_main")
public func fuzzHTTP1RequestMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzDriver.run(argc, argv, fuzzHTTP1Request)
}

/// The HTTP/1.1 request parser with its body framing (Content-Length, chunked with extensions and trailers,
/// pipelining, CONNECT). Invariants:
/// 1. the same bytes give the same messages whole, one byte at a time (up to 256 bytes; in a longer input, a 256-byte window
///    placed at random), and cut at random places;
/// 2. the event grammar holds (head, body, trailers only for chunked, end; nothing after a failure or upgrade;
///    a Content-Length body is exactly that long; no empty body pieces);
/// 3. every complete message, written back with `HTTP1Serializer` and `HTTP1BodyWriter`, parses to itself;
/// 4. an absolute-form request forwarded the way `ProxySession` does (origin-form, HTTP/1.1, hop-by-hop fields
///    removed) parses as one message with the same framing, body and trailers, and one Host naming the target.
enum HTTP1RequestFuzz {
    static func run(_ input: [UInt8]) {
        let whole = HTTP1Drive(role: .request, pieces: [input[...]], closeAtEnd: true)
        FuzzCheck.require(!whole.sawEmptyBody, "an empty body event")
        // The cuts are drawn first, as before the window existed, so a saved input replays with the same cuts.
        var random = FuzzRandom(seed: input)
        let cuts = random.cuts(count: input.count)
        let bytewise = HTTP1Drive(
            role: .request, pieces: input.bytewisePieces(limit: 256, using: &random), closeAtEnd: true)
        FuzzCheck.require(
            bytewise == whole, "byte-at-a-time parse differs: \(bytewise) vs \(whole) for \(FuzzCheck.describe(input))")
        let split = HTTP1Drive(role: .request, pieces: input.pieces(at: cuts), closeAtEnd: true)
        FuzzCheck.require(split == whole, "parse cut at \(cuts) differs: \(split) vs \(whole)")

        let complete = whole.completeMessages
        guard !complete.isEmpty else { return }
        let rewritten = complete.flatMap(HTTP1Writer.bytes)
        let again = HTTP1Drive(role: .request, pieces: [rewritten[...]], closeAtEnd: false)
        FuzzCheck.require(
            again.completeMessages == complete && again.messages.count == complete.count,
            "written back, \(complete) parsed as \(again.messages) (\(again.ending)) from \(FuzzCheck.describe(rewritten))"
        )
        switch again.ending {
        case .open: FuzzCheck.require(complete.last?.framing != .tunnel, "a tunnel head written back did not upgrade")
        case .upgraded(let raw): FuzzCheck.require(raw.isEmpty, "bytes after a tunnel head written back")
        case .failed(let error): FuzzCheck.fail("written-back messages failed: \(error)")
        }
        for message in complete { checkForwarding(message) }
    }

    /// Invariant 4 for one message.
    static func checkForwarding(_ message: HTTP1Drive.Message) {
        guard let head = message.request, message.framing != .tunnel,
            case .absolute(_, let authority, _) = head.target
        else { return }
        var upstream = head.forOrigin()
        upstream.version = .http11
        upstream.headers = HTTP1ProxyHeaders.removingHopByHop(upstream.headers)
        var bytes: [UInt8] = []
        HTTP1Serializer.writeRequestHead(upstream, into: &bytes)
        HTTP1Writer.appendBody(message, framing: message.framing, into: &bytes)
        let forwarded = HTTP1Drive(role: .request, pieces: [bytes[...]], closeAtEnd: false)
        guard forwarded.ending == .open, forwarded.messages.count == 1, let sent = forwarded.messages.first, sent.ended
        else {
            FuzzCheck.fail(
                "forwarded \(head) parsed as \(forwarded.messages) (\(forwarded.ending)) from \(FuzzCheck.describe(bytes))"
            )
        }
        FuzzCheck.require(
            sent.framing == message.framing, "forwarding changed framing \(message.framing) to \(sent.framing)")
        FuzzCheck.require(sent.body == message.body && sent.trailers == message.trailers, "forwarding changed the body")
        let hosts = sent.request?.headers.values("Host") ?? []
        FuzzCheck.require(hosts == [authority.description], "forwarded Host fields \(hosts) for target \(authority)")
    }
}
