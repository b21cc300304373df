internal import COpenSSL
import Foundation

/// Which API a CT log implements. Both kinds issue SCTs in RFC 6962's format and validate the same way;
/// Apple's policy asks that at least one counted SCT come from an RFC 6962 log.
public enum CTLogKind: String, Sendable, Hashable, Codable {
    /// An RFC 6962 log (`logs` in the list).
    case rfc6962 = "rfc6962"
    /// A static-ct-api ("tiled") log (`tiled_logs` in the list).
    case staticCTAPI = "static-ct-api"
}

/// A log's state in Apple's log program, with the time it entered it (Apple's "Certificate
/// Transparency log program": pending, qualified, usable, readonly, retired, rejected).
public enum CTLogState: Sendable, Hashable {
    case pending(since: Date)
    case qualified(since: Date)
    case usable(since: Date)
    case readonly(since: Date)
    case retired(at: Date)
    case rejected(since: Date)

    /// How Apple's policy counts an SCT of this log issued at `sctTime`: qualified, usable and readonly
    /// logs are "currently approved"; a retired log is "once approved" for SCTs issued before its
    /// retirement and nothing after; pending and rejected logs never count.
    public func approval(forSCTAt sctTime: Date) -> CTApproval {
        switch self {
        case .qualified, .usable, .readonly: .current
        case .retired(let at): sctTime < at ? .once : .none
        case .pending, .rejected: .none
        }
    }

    /// The state's name as the list spells it.
    public var name: String {
        switch self {
        case .pending: "pending"
        case .qualified: "qualified"
        case .usable: "usable"
        case .readonly: "readonly"
        case .retired: "retired"
        case .rejected: "rejected"
        }
    }

    /// The time the log entered the state.
    public var since: Date {
        switch self {
        case .pending(let date), .qualified(let date), .usable(let date), .readonly(let date), .retired(let date),
            .rejected(let date):
            date
        }
    }
}

/// How an SCT's log counts towards Apple's policy.
public enum CTApproval: Sendable, Hashable {
    /// From a currently approved log (qualified, usable, readonly).
    case current
    /// From a once-approved log (retired after the SCT was issued).
    case once
    /// Does not count.
    case none
}

/// What the policy needs to know about the log behind one SCT.
public struct CTLogFacts: Sendable, Hashable {
    public let description: String
    public let operatorName: String
    public let kind: CTLogKind
    public let state: CTLogState
    /// The log accepts only certificates whose notAfter falls in `[start, end)` (sharded logs).
    public let temporalInterval: Range<Date>?

    public init(
        description: String, operatorName: String, kind: CTLogKind, state: CTLogState,
        temporalInterval: Range<Date>? = nil
    ) {
        self.description = description
        self.operatorName = operatorName
        self.kind = kind
        self.state = state
        self.temporalInterval = temporalInterval
    }
}

/// One log of the list: its key, its id, and its facts.
public struct CTLogListEntry: Sendable, Hashable {
    /// DER SubjectPublicKeyInfo.
    public let key: [UInt8]
    /// SHA-256 of `key` (checked when the list is read).
    public let logID: [UInt8]
    public let facts: CTLogFacts

    /// The log id in lower-case hex, as `SCTDetails.logIDHex` spells it.
    public var logIDHex: String { hexString(logID) }
}

/// Why a log list was refused: what is wrong and where.
public struct CTLogListError: Error, Sendable, CustomStringConvertible {
    public let problem: String

    public init(_ problem: String) { self.problem = problem }

    public var description: String { "not a usable CT log list: \(problem)" }
}

/// Apple's CT log list (the JSON file Apple's `ct/ct-policy.md` links to; the v3 log-list layout:
/// `operators[]` with `name`, `logs[]` and `tiled_logs[]`, each log with a base64 `key`
/// (SubjectPublicKeyInfo), a base64 `log_id`, one `state` with its `timestamp`, and an optional
/// `temporal_interval`). `parse` is strict: every log must have a key that decodes as a
/// SubjectPublicKeyInfo, an id that is the key's SHA-256, exactly one known state and valid dates;
/// a list without a single log is refused. Immutable value.
public struct CTLogList: Sendable {
    /// The list's own version string, when it has one.
    public let version: String?
    /// `log_list_timestamp`, when present.
    public let listTimestamp: Date?
    public let entries: [CTLogListEntry]

    public init(version: String?, listTimestamp: Date?, entries: [CTLogListEntry]) {
        self.version = version
        self.listTimestamp = listTimestamp
        self.entries = entries
    }

    /// Operator names, in list order, without repeats.
    public var operators: [String] {
        var names: [String] = []
        for entry in entries where !names.contains(entry.facts.operatorName) { names.append(entry.facts.operatorName) }
        return names
    }

    /// Parses and validates `data`; throws `CTLogListError` naming the first problem.
    public static func parse(_ data: Data) throws -> CTLogList {
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch let error as DecodingError {
            throw CTLogListError(Self.describe(error))
        } catch {
            throw CTLogListError("not JSON (\(error))")
        }
        guard !document.operators.isEmpty else { throw CTLogListError("`operators` is empty") }
        var entries: [CTLogListEntry] = []
        var seen = Set<[UInt8]>()
        for (operatorIndex, logOperator) in document.operators.enumerated() {
            let name = logOperator.name.trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { throw CTLogListError("operator \(operatorIndex) has no name") }
            let logs =
                logOperator.logs.map { ($0, CTLogKind.rfc6962) }
                + (logOperator.tiledLogs ?? []).map { ($0, CTLogKind.staticCTAPI) }
            for (index, (log, kind)) in logs.enumerated() {
                let place = "log \(index) of operator \"\(name)\""
                let entry = try Self.entry(log, kind: kind, operatorName: name, place: place)
                guard seen.insert(entry.logID).inserted else { throw CTLogListError("\(place) is listed twice") }
                entries.append(entry)
            }
        }
        guard !entries.isEmpty else { throw CTLogListError("the operators list no logs") }
        let timestamp = try document.logListTimestamp.map { try Self.date($0, "log_list_timestamp") }
        return CTLogList(version: document.version?.value, listTimestamp: timestamp, entries: entries)
    }

    /// Validates one log of the list.
    static func entry(_ log: Document.Log, kind: CTLogKind, operatorName: String, place: String) throws
        -> CTLogListEntry
    {
        guard let key = Data(base64Encoded: log.key).map(Array.init), !key.isEmpty else {
            throw CTLogListError("\(place): `key` is not base64")
        }
        guard Self.isSubjectPublicKeyInfo(key) else {
            throw CTLogListError("\(place): `key` is not a DER SubjectPublicKeyInfo")
        }
        guard let logID = Data(base64Encoded: log.logID).map(Array.init) else {
            throw CTLogListError("\(place): `log_id` is not base64")
        }
        guard logID == sha256(key) else {
            throw CTLogListError("\(place): `log_id` is not the SHA-256 of its key")
        }
        guard log.state.count == 1, let (stateName, body) = log.state.first else {
            throw CTLogListError("\(place): `state` must hold exactly one state")
        }
        let since = try Self.date(body.timestamp, "\(place) state timestamp")
        let state: CTLogState
        switch stateName {
        case "pending": state = .pending(since: since)
        case "qualified": state = .qualified(since: since)
        case "usable": state = .usable(since: since)
        case "readonly": state = .readonly(since: since)
        case "retired": state = .retired(at: since)
        case "rejected": state = .rejected(since: since)
        default: throw CTLogListError("\(place): unknown state \"\(stateName)\"")
        }
        var interval: Range<Date>?
        if let temporal = log.temporalInterval {
            let start = try Self.date(temporal.startInclusive, "\(place) temporal_interval.start_inclusive")
            let end = try Self.date(temporal.endExclusive, "\(place) temporal_interval.end_exclusive")
            guard start < end else { throw CTLogListError("\(place): temporal_interval ends before it starts") }
            interval = start..<end
        }
        let facts = CTLogFacts(
            description: log.description ?? place, operatorName: operatorName, kind: kind, state: state,
            temporalInterval: interval)
        return CTLogListEntry(key: key, logID: logID, facts: facts)
    }

    /// True when `der` is exactly one DER SubjectPublicKeyInfo OpenSSL can use.
    static func isSubjectPublicKeyInfo(_ der: [UInt8]) -> Bool {
        der.withUnsafeBufferPointer { buffer -> Bool in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let key = d2i_PUBKEY(nil, &cursor, buffer.count) else {
                ERR_clear_error()
                return false
            }
            EVP_PKEY_free(key)
            return cursor == buffer.baseAddress.map { $0 + buffer.count }
        }
    }

    /// An RFC 3339 date (`2025-01-01T00:00:00Z`, fractional seconds allowed).
    static func date(_ text: String, _ what: String) throws -> Date {
        let plain = ISO8601DateFormatter()
        if let date = plain.date(from: text) { return date }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) { return date }
        throw CTLogListError("\(what) \"\(text)\" is not an RFC 3339 date")
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return keys.isEmpty ? "the document" : String(keys.drop { $0 == "." })
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context)) lacks `\(key.stringValue)`"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context)) has the wrong type"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not JSON" : "\(path(context)) is malformed"
        @unknown default:
            return "malformed"
        }
    }

    /// The JSON layout (unknown keys are ignored, as newer list versions add some).
    struct Document: Decodable {
        struct StateBody: Decodable {
            let timestamp: String
        }
        struct Interval: Decodable {
            let startInclusive: String
            let endExclusive: String
            enum CodingKeys: String, CodingKey {
                case startInclusive = "start_inclusive"
                case endExclusive = "end_exclusive"
            }
        }
        struct Log: Decodable {
            let description: String?
            let logID: String
            let key: String
            let state: [String: StateBody]
            let temporalInterval: Interval?
            enum CodingKeys: String, CodingKey {
                case description, key, state
                case logID = "log_id"
                case temporalInterval = "temporal_interval"
            }
        }
        struct Operator: Decodable {
            let name: String
            let logs: [Log]
            let tiledLogs: [Log]?
            enum CodingKeys: String, CodingKey {
                case name, logs
                case tiledLogs = "tiled_logs"
            }
        }
        /// A string in Google's lists; accepted as a number too.
        struct Text: Decodable {
            let value: String
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let text = try? container.decode(String.self) {
                    value = text
                } else {
                    value = String(describing: try container.decode(Double.self))
                }
            }
        }
        let version: Text?
        let logListTimestamp: String?
        let operators: [Operator]
        enum CodingKeys: String, CodingKey {
            case version, operators
            case logListTimestamp = "log_list_timestamp"
        }
    }
}
