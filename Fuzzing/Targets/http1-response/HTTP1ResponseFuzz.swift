import Foundation
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
/// 1. the same bytes give the same messages whole, one byte at a time (up to 256 bytes; in a longer input, a 256-byte window
///    placed at random), and cut at random places;
/// 2. the event grammar holds (as for requests; interim responses end without a body);
/// 3. every complete response, written back with `HTTP1Serializer` and `HTTP1BodyWriter`, parses to itself;
/// 4. a final response relayed to a client the way `ProxySession` does (as HTTP/1.1, hop-by-hop fields skipped, a
///    read-until-close body re-chunked for a keep-alive client) parses with the framing the proxy meant and the same body;
/// 5. its `Alt-Svc` fields, read as the record reads them (`AltSvcParser`, `HTTP3Advertisement`), give alternatives
///    that written back parse to themselves, and an HTTP/3 offer exactly when one of them is `h3`/`h3-NN`.
enum HTTP1ResponseFuzz {
    static let methodNames = ["GET", "HEAD", "POST", "CONNECT"]

    static func run(_ input: [UInt8]) {
        guard let selector = input.first else { return }
        let methods = (0..<4).map { methodNames[Int(selector >> (2 * $0)) & 3] }
        let bytes = Array(input.dropFirst())
        let whole = HTTP1Drive(role: .response, methods: methods, pieces: [bytes[...]], closeAtEnd: true)
        FuzzCheck.require(!whole.sawEmptyBody, "an empty body event")
        // The cuts are drawn first, as before the window existed, so a saved input replays with the same cuts.
        var random = FuzzRandom(seed: input)
        let cuts = random.cuts(count: bytes.count)
        let bytewise = HTTP1Drive(
            role: .response, methods: methods, pieces: bytes.bytewisePieces(limit: 256, using: &random),
            closeAtEnd: true)
        FuzzCheck.require(bytewise == whole, "byte-at-a-time parse differs: \(bytewise) vs \(whole)")
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
            checkAltSvc(head.headers)
        }
    }

    /// Invariant 5.
    static func checkAltSvc(_ headers: HTTPFields) {
        let offer = HTTP3Advertisement(responseHeaders: headers)
        guard headers.contains("alt-svc") else {
            FuzzCheck.require(offer == nil, "an HTTP/3 offer without Alt-Svc")
            return
        }
        let value = headers.values("alt-svc").joined(separator: ",")
        switch AltSvcParser.parse(value) {
        case .clear, .malformed:
            FuzzCheck.require(offer == nil, "an HTTP/3 offer from \(value)")
        case .alternatives(let list):
            FuzzCheck.require(
                !list.isEmpty && list.count <= AltSvcParser.maximumAlternatives, "\(list.count) alternatives")
            let written = list.map(written).joined(separator: ", ")
            FuzzCheck.require(
                AltSvcParser.parse(written) == .alternatives(list), "\(list) written as \(written) does not parse back")
            let http3 = list.filter { AltSvcParser.isHTTP3($0.protocolID) }
            FuzzCheck.require(
                offer?.alternatives.map(\.protocolID) == (http3.isEmpty ? nil : http3.map(\.protocolID)),
                "offer \(String(describing: offer)) for \(list)")
        }
    }

    /// One alternative in `Alt-Svc` syntax: the protocol id percent-encoded outside token bytes, the authority
    /// quoted with `"` and `\\` escaped.
    static func written(_ alternative: AltSvcParser.Alternative) -> String {
        let token = Set("!#$&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        let id = alternative.protocolID.utf8.map {
            token.contains($0) ? String(UnicodeScalar($0)) : String(format: "%%%02X", $0)
        }
        .joined()
        var quoted = ""
        for character in alternative.authority {
            if character == "\"" || character == "\\" { quoted.append("\\") }
            quoted.append(character)
        }
        return "\(id)=\"\(quoted)\"" + (alternative.maxAge.map { "; ma=\($0)" } ?? "")
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
