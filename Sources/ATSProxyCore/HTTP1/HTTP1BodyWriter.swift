/// Frames an outgoing body for one message: counts a Content-Length body, chunk-encodes a chunked
/// one, passes raw bytes through for until-close and tunnels.
///
/// The connection state machine creates one per message it writes, with the framing it put in the
/// head, then calls `write` per body piece and `finish` once. Writing more than a Content-Length
/// allows, or finishing short of it, is reported as a typed error rather than sent.
public struct HTTP1BodyWriter: Sendable {
    /// Why a body could not be framed as declared.
    public enum Failure: Error, Hashable, Sendable {
        /// More bytes than the declared Content-Length (or any bytes when there is no body).
        case bodyTooLong
        /// `finish` before the declared Content-Length was reached.
        case bodyTooShort(missing: Int)
    }

    /// Where the writer is in the body.
    enum State: Sendable {
        /// Content-Length body with `remaining` bytes still to write.
        case counted(remaining: Int)
        /// Chunked body, last-chunk not yet written.
        case chunked
        /// Raw bytes (until close or tunnel).
        case raw
        /// `finish` was called.
        case finished
    }

    private var state: State

    /// Creates a writer for a body framed as `framing`.
    public init(framing: HTTPBodyFraming) {
        switch framing {
        case .none: state = .counted(remaining: 0)
        case .contentLength(let length): state = .counted(remaining: length)
        case .chunked: state = .chunked
        case .untilClose, .tunnel: state = .raw
        }
    }

    /// Appends the framed form of `data` to `buffer`. A body that passes through unchanged into an
    /// empty `buffer` is not copied when `data` is an array slice spanning its whole array (a
    /// decrypted read, the usual bulk case): `buffer` then shares that array's storage.
    public mutating func write<Data: Collection<UInt8>>(_ data: Data, into buffer: inout [UInt8]) throws(Failure) {
        switch state {
        case .counted(let remaining):
            guard data.count <= remaining else { throw .bodyTooLong }
            Self.pass(data, into: &buffer)
            state = .counted(remaining: remaining - data.count)
        case .chunked:
            HTTP1Serializer.writeChunk(data, into: &buffer)
        case .raw:
            Self.pass(data, into: &buffer)
        case .finished:
            preconditionFailure("HTTP1BodyWriter.write in state \(state)")
        }
    }

    private static func pass<Data: Collection<UInt8>>(_ data: Data, into buffer: inout [UInt8]) {
        if buffer.isEmpty, let slice = data as? ArraySlice<UInt8> {
            buffer = Array(slice)
        } else {
            buffer.append(contentsOf: data)
        }
    }

    /// Whether `finish` ran: the body is over for this writer.
    public var isFinished: Bool {
        if case .finished = state { return true }
        return false
    }

    /// Ends the body: the last-chunk with `trailers` for chunked bodies (trailers are dropped for
    /// other framings, which cannot carry them), a length check for counted ones.
    public mutating func finish(trailers: HTTPFields = [:], into buffer: inout [UInt8]) throws(Failure) {
        switch state {
        case .counted(let remaining):
            state = .finished
            guard remaining == 0 else { throw .bodyTooShort(missing: remaining) }
        case .chunked:
            HTTP1Serializer.writeLastChunk(trailers: trailers, into: &buffer)
            state = .finished
        case .raw:
            state = .finished
        case .finished:
            preconditionFailure("HTTP1BodyWriter.finish in state \(state)")
        }
    }
}
