@testable import ATSProxyCore

/// Drives an `HTTP1Parser` the way a connection would, for playbook tests: feeds bytes in chunks of
/// a given size, resumes after every message, collects upgrade bytes, and records the largest
/// amount of input the parser ever held.
struct HTTP1ParseRun {
    var events: [HTTPPart] = []
    var maximumBuffered = 0
    var largestBodyEvent = 0

    init(
        _ bytes: [UInt8], role: HTTP1Parser.Role = .request, methods: [String] = [], chunkSize: Int = Int.max,
        closeAtEnd: Bool = false
    ) {
        var parser = HTTP1Parser(role: role)
        for method in methods { parser.requestSent(method: method) }
        var upgradeBytes: [UInt8]?
        var offset = 0
        var stopped = false
        while offset < bytes.count {
            let end = min(bytes.count, offset + min(chunkSize, bytes.count - offset))
            let chunk = bytes[offset..<end]
            offset = end
            if upgradeBytes != nil {
                upgradeBytes?.append(contentsOf: chunk)
                continue
            }
            if stopped { break }
            record(parser.feed(chunk), upgrade: &upgradeBytes, stopped: &stopped)
            maximumBuffered = max(maximumBuffered, parser.bufferedByteCount)
            while parser.isPaused && !stopped {
                record(parser.resume(), upgrade: &upgradeBytes, stopped: &stopped)
                maximumBuffered = max(maximumBuffered, parser.bufferedByteCount)
            }
        }
        if closeAtEnd && upgradeBytes == nil && !stopped {
            record(parser.inputClosed(), upgrade: &upgradeBytes, stopped: &stopped)
        }
        if let upgradeBytes { events.append(.upgraded(remaining: upgradeBytes[...])) }
    }

    private mutating func record(_ new: [HTTPPart], upgrade: inout [UInt8]?, stopped: inout Bool) {
        for event in new {
            switch event {
            case .upgraded(let remaining):
                upgrade = Array(remaining)
            case .failed:
                stopped = true
                events.append(event)
            case .body(let slice):
                largestBodyEvent = max(largestBodyEvent, slice.count)
                events.append(event)
            case .request, .response, .trailers, .messageEnd:
                events.append(event)
            }
        }
    }

    /// The events with consecutive body pieces merged, so that runs with different chunk sizes compare equal.
    var normalized: [HTTPPart] {
        var result: [HTTPPart] = []
        for event in events {
            if case .body(let piece) = event, case .body(let previous)? = result.last {
                result[result.count - 1] = .body(ArraySlice(Array(previous) + Array(piece)))
            } else if case .body(let piece) = event {
                result.append(.body(ArraySlice(Array(piece))))
            } else {
                result.append(event)
            }
        }
        return result
    }

    /// The first failure, if any.
    var failure: HTTP1ParseError? {
        for case .failed(let error) in events { return error }
        return nil
    }
}

extension Array where Element == UInt8 {
    /// The UTF-8 bytes of a test literal.
    init(http text: String) {
        self = Array(text.utf8)
    }
}

/// Shorthand for a body event in expectations.
func body(_ text: String) -> HTTPPart {
    .body(ArraySlice(Array(text.utf8)))
}
