import ATSHTTP2
import ATSPolicy
import Foundation

/// Responses: a lane's parts submitted as its stream's HEADERS, DATA and trailers, the response back-pressure
/// across streams, and the answers the frontend makes itself.
extension HTTP2Frontend {
    // MARK: - Responses

    /// Response parts the lane relayed from its upstream: submitted as the stream's HEADERS, DATA and trailers.
    func responseParts(lane: Int32, _ parts: [HTTPPart]) {
        guard let id = laneStream[lane], streams[id] != nil else { return }
        respond(lane: lane, stream: id, parts)
    }

    /// Submits response parts for stream `id` (a lane's parts carry no end after an interim head).
    func respond(lane: Int32, stream id: Int32, _ events: [HTTPPart]) {
        guard var stream = streams[id] else { return }
        for event in events {
            switch event {
            case .response(let head, let framing):
                let fields =
                    [HTTP2Header(":status", String(head.status))]
                    + HTTP2Message.h2Fields(fromHTTP1: head.headers.map { HTTP2Header($0.name, $0.value) })
                if head.isInterim {
                    if head.status != 101 { try? session.submitInformational(stream: id, headers: fields) }
                    continue
                }
                // A HEAD answer has no body on the stream, whatever its framing says (RFC 9110 §9.3.2).
                let endStream = framing == .none || stream.method == "HEAD"
                do {
                    try session.submitResponse(stream: id, headers: fields, endStream: endStream)
                    stream.response = endStream ? .ended : .streaming
                } catch {
                    stream.response = .ended
                    try? session.resetStream(stream: id, error: .internalError)
                }
            case .body(let slice):
                guard stream.response == .streaming else { continue }
                try? session.submitData(stream: id, bytes: Array(slice), endStream: false)
            case .trailers(let trailers):
                guard stream.response == .streaming else { continue }
                let fields = HTTP2Message.h2Fields(fromHTTP1: trailers.map { HTTP2Header($0.name, $0.value) })
                try? session.submitTrailers(stream: id, headers: fields)
                stream.response = .ended
            case .messageEnd:
                switch stream.response {
                case .pending:
                    // The end of an interim (1xx) response: the final one follows.
                    break
                case .streaming:
                    try? session.submitData(stream: id, bytes: [], endStream: true)
                    stream.response = .ended
                case .ended:
                    break
                }
            case .upgraded, .request, .failed:
                // No HTTP/1.1 upgrade can cross an HTTP/2 stream; anything else is a broken lane.
                if stream.response != .ended {
                    stream.response = .ended
                    try? session.resetStream(stream: id, error: .internalError)
                }
            }
        }
        if stream.response == .streaming && !stream.upstreamPaused
            && session.bufferedOutboundBytes(stream: id) > Self.responseHighWatermark
        {
            stream.upstreamPaused = true
            pausedStreams += 1
            output.commands.append(.stream(lane, .pauseUpstreamReads))
        }
        streams[id] = stream
    }

    /// After the session sent what the client's windows allow, a stream with bytes left and no window left is one
    /// the client is not reading. Those streams pause once the connection as a whole holds too much (a stream
    /// with an open window is never paused for the others); paused streams resume when their own buffer is low
    /// and the client reads them again (buffer empty or window open) or the connection fell below its low mark.
    func updateResponsePauses() {
        let total = session.bufferedOutboundTotal
        let overConnectionMark = total > Self.connectionResponseHighWatermark
        guard pausedStreams > 0 || overConnectionMark else { return }
        for (id, stream) in streams {
            guard let lane = stream.lane else { continue }
            let buffered = session.bufferedOutboundBytes(stream: id)
            if stream.upstreamPaused {
                guard buffered <= Self.responseLowWatermark,
                    buffered == 0 || total <= Self.connectionResponseLowWatermark || session.sendWindow(stream: id) > 0
                else { continue }
                streams[id]?.upstreamPaused = false
                pausedStreams -= 1
                output.commands.append(.stream(lane, .resumeUpstreamReads))
            } else if overConnectionMark && buffered > 0 && stream.response == .streaming
                && session.sendWindow(stream: id) == 0
            {
                streams[id]?.upstreamPaused = true
                pausedStreams += 1
                output.commands.append(.stream(lane, .pauseUpstreamReads))
            }
        }
    }

    /// Enforces `connectionResponseCap`: when the connection holds more response bytes than that, resets the
    /// streams the client is not reading (bytes buffered, no send window), largest first, until what is left is at
    /// most `connectionResponseHighWatermark`. Returns whether it reset any (their frames are still to be sent).
    func capBufferedResponses() -> Bool {
        var total = session.bufferedOutboundTotal
        guard total > Self.connectionResponseCap else { return false }
        let unread = streams.compactMap { id, stream -> (id: Int32, bytes: Int)? in
            guard stream.response == .streaming, session.sendWindow(stream: id) == 0 else { return nil }
            let bytes = session.bufferedOutboundBytes(stream: id)
            return bytes > 0 ? (id, bytes) : nil
        }
        var reset = false
        for (id, bytes) in unread.sorted(by: { $0.bytes > $1.bytes }) {
            guard total > Self.connectionResponseHighWatermark else { break }
            streams[id]?.response = .ended
            try? session.resetStream(stream: id, error: .enhanceYourCalm)
            tally.streamsOverBudget += 1
            total -= bytes
            reset = true
        }
        return reset
    }

    /// A response the proxy makes itself for a stream no lane serves (421, 405), logged as refused with `code`.
    func answerLocally(
        stream id: Int32, status: Int, number: Int, head: HTTP2RequestHead, text: String, code: NSURLErrorCode
    ) {
        let body = Array((text + "\n").utf8)
        let fields = [
            HTTP2Header(":status", String(status)), HTTP2Header("content-type", "text/plain; charset=utf-8"),
            HTTP2Header("content-length", String(body.count)),
        ]
        do {
            try session.submitResponse(stream: id, headers: fields, endStream: false)
            try session.submitData(stream: id, bytes: body, endStream: true)
            streams[id]?.response = .ended
        } catch {
            try? session.resetStream(stream: id, error: .internalError)
        }
        let url = "\(head.scheme.isEmpty ? "https" : head.scheme)://\(head.authority)\(head.path)"
        let record = template.client.record(
            task: number, time: now, method: head.method, url: url, result: .refused,
            rule: text.replacingOccurrences(of: "ats-proxy: ", with: ""), errorCode: code.rawValue, status: status,
            requestHeaders: head.headers.map { RequestRecord.HeaderField(name: $0.name, value: $0.value) },
            bytesToClient: body.count, route: template.route)
        output.commands.append(.log(record))
    }
}
