import FuzzSupport

@testable import ATSProxyCore

/// libFuzzer entry point: one byte naming the methods of four outstanding requests, then what the origin answers.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP1Response(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzCheck.withInput(data, size, HTTP1ResponseFuzz.run)
}

/// The executable's entry point under SwiftPM's renaming (see `FuzzDriver`).
@_cdecl("fuzz_http1_response_main")
public func fuzzHTTP1ResponseMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?)
    -> Int32
{
    FuzzDriver.run(argc, argv, fuzzHTTP1Response)
}

/// The HTTP/1.1 response parser as the proxy uses it upstream (HEAD/CONNECT framing, 1xx, 204/304, chunked with
/// trailers, read-until-close, pipelined answers). Invariants:
/// 1. the same bytes give the same messages whole, one byte at a time, and cut at random places;
/// 2. the event grammar holds (as for requests; interim responses end without a body);
/// 3. every complete response, written back with `HTTP1Serializer` and `HTTP1BodyWriter`, parses to itself;
/// 4. a final response relayed to a client the way `ProxySession` does (as HTTP/1.1, hop-by-hop fields skipped, a
///    read-until-close body re-chunked for a keep-alive client) parses with the framing the proxy meant and the same body.
enum HTTP1ResponseFuzz {
    static let methodNames = ["GET", "HEAD", "POST", "CONNECT"]

    static func run(_ input: [UInt8]) {
        guard let selector = input.first else { return }
        let methods = (0..<4).map { methodNames[Int(selector >> (2 * $0)) & 3] }
        let bytes = Array(input.dropFirst())
        let whole = HTTP1Drive(role: .response, methods: methods, pieces: [bytes[...]], closeAtEnd: true)
        FuzzCheck.require(!whole.sawEmptyBody, "an empty body event")
        if bytes.count <= 8192 {
            let bytewise = HTTP1Drive(
                role: .response, methods: methods, pieces: bytes.pieces(ofSize: 1), closeAtEnd: true)
            FuzzCheck.require(bytewise == whole, "byte-at-a-time parse differs: \(bytewise) vs \(whole)")
        }
        var random = FuzzRandom(seed: input)
        let cuts = random.cuts(count: bytes.count)
        let split = HTTP1Drive(role: .response, methods: methods, pieces: bytes.pieces(at: cuts), closeAtEnd: true)
        FuzzCheck.require(split == whole, "parse cut at \(cuts) differs: \(split) vs \(whole)")

        let complete = whole.completeMessages
        guard !complete.isEmpty else { return }
        let rewritten = complete.flatMap(HTTP1Writer.bytes)
        // A read-until-close body ends with the connection: the rewritten stream is closed too.
        let again = HTTP1Drive(role: .response, methods: methods, pieces: [rewritten[...]], closeAtEnd: true)
        FuzzCheck.require(
            again.completeMessages == complete && again.messages.count == complete.count,
            "written back, \(complete) parsed as \(again.messages) (\(again.ending)) from \(FuzzCheck.describe(rewritten))"
        )
        var outstanding = methods[...]
        for message in complete {
            guard let head = message.response else { continue }
            if head.isInterim { continue }
            let method = outstanding.popFirst() ?? "GET"
            checkRelay(message, head: head, method: method)
        }
    }

    /// Invariant 4 for one final response to a request with `method`.
    static func checkRelay(_ message: HTTP1Drive.Message, head: HTTPResponseHead, method: String) {
        guard message.framing != .tunnel else { return }
        let rechunk = message.framing == .untilClose
        let filter = HTTP1ProxyHeaders.HopByHopFilter(head.headers, options: .init(reframing: rechunk))
        let extra = rechunk ? [HTTPField(name: "Transfer-Encoding", value: "chunked")] : []
        let framing: HTTPBodyFraming = rechunk ? .chunked : message.framing
        var relayedHead = head
        relayedHead.version = .http11
        var bytes: [UInt8] = []
        HTTP1Serializer.writeResponseHead(relayedHead, dropping: filter, appending: extra, into: &bytes)
        HTTP1Writer.appendBody(message, framing: framing, into: &bytes)
        let relayed = HTTP1Drive(role: .response, methods: [method], pieces: [bytes[...]], closeAtEnd: true)
        guard let sent = relayed.messages.first, sent.ended, relayed.messages.count == 1 else {
            FuzzCheck.fail(
                "relayed \(head) (\(method)) parsed as \(relayed.messages) (\(relayed.ending)) from \(FuzzCheck.describe(bytes))"
            )
        }
        FuzzCheck.require(sent.framing == framing, "relaying changed framing \(framing) to \(sent.framing) for \(head)")
        FuzzCheck.require(sent.body == message.body, "relaying changed the body")
        if framing == .chunked {
            FuzzCheck.require(sent.trailers == message.trailers, "relaying changed the trailers")
        }
    }
}
