import Foundation

/// Why a certificate misses Apple's CT policy (the first rule it breaks, in the order of `AppleCTPolicy`).
public enum CTShortfall: Sendable, Hashable {
    /// Fewer SCTs count than the lifetime needs (`counted` after the per-operator limit).
    case tooFewSCTs
    /// Enough SCTs, but too many from one operator: only `counted` count after the per-operator limit.
    case operatorDiversity
    /// No counted SCT comes from an RFC 6962 log (only static-ct-api ones).
    case noRFC6962Log
    /// No embedded SCT comes from a currently approved log (only from retired ones).
    case noCurrentlyApprovedLog
}

/// Which of the policy's two ways the certificate satisfied.
public enum CTCompliancePath: String, Sendable, Hashable {
    /// Two SCTs from currently approved logs of distinct operators, one delivered in the TLS
    /// extension or an OCSP staple.
    case delivered
    /// Embedded SCTs: the number the lifetime needs, with at most one or two per operator.
    case embedded
}

/// The outcome of `AppleCTPolicy.evaluate`.
public struct CTPolicyResult: Sendable, Hashable {
    /// nil when the certificate complies.
    public let shortfall: CTShortfall?
    /// The way it complied (nil when it does not).
    public let path: CTCompliancePath?
    /// SCTs that count (distinct logs, after the per-operator limit of the embedded path).
    public let counted: Int
    /// SCTs the embedded path needs for this lifetime.
    public let required: Int
    /// The lifetime in days as Apple measures it.
    public let lifetimeDays: Int

    public var complies: Bool { shortfall == nil }
}

/// Apple's Certificate Transparency policy (apple/apple-root-program `ct/ct-policy.md`, version 1.0,
/// 2025-04-21), as a pure function:
///
/// - An SCT counts only when it validated against its log's key, the log is in the list, the SCT is not
///   from the future, the certificate's notAfter lies in the log's `temporal_interval` (sharded logs), and
///   the log was approved for it: qualified, usable and readonly logs are "currently approved"; a retired
///   log is "once approved" for SCTs issued before its retirement time; pending and rejected logs never
///   count. Each log counts once.
/// - Delivered path: two SCTs from currently approved logs, at least one of them delivered in the TLS
///   extension or an OCSP staple. ats-proxy also requires the two to come from distinct operators (the
///   diversity Apple's table asks of embedded SCTs; the policy text names none for this path).
/// - Embedded path: at least one embedded SCT from a currently approved log, and embedded SCTs from once-
///   or currently approved logs numbering 2 (lifetime ≤ 180 days, at most 1 per operator counting) or 3
///   (181 days and more, at most 2 per operator counting). The table stops at 398 days; longer
///   lifetimes are held to the 3-SCT row (such certificates fail Apple's 398-day cap anyway).
/// - Either way at least one counted SCT must come from an RFC 6962 log (not only static-ct-api logs).
///
/// Lifetime: notBefore through notAfter inclusive (RFC 5280), in days of 86,400 seconds where any part
/// of a day counts as a day.
public enum AppleCTPolicy {
    /// The lifetime in days Apple's table is read with.
    public static func lifetimeDays(notBefore: Date, notAfter: Date) -> Int {
        let seconds = notAfter.timeIntervalSince(notBefore) + 1
        return max(0, Int((seconds / 86400).rounded(.up)))
    }

    /// (SCTs needed, most SCTs per operator counting) for an embedded-SCT certificate of `days`.
    public static func embeddedRequirement(lifetimeDays days: Int) -> (required: Int, perOperator: Int) {
        days <= 180 ? (2, 1) : (3, 2)
    }

    /// One SCT as the policy sees it.
    struct Candidate {
        let logID: String
        let operatorName: String
        let kind: CTLogKind
        let approval: CTApproval
        let embedded: Bool
    }

    /// Judges the SCTs of a certificate valid from `notBefore` to `notAfter`, checked at `time`.
    public static func evaluate(notBefore: Date, notAfter: Date, scts: [SCTDetails], at time: Date) -> CTPolicyResult {
        let days = lifetimeDays(notBefore: notBefore, notAfter: notAfter)
        let (required, perOperator) = embeddedRequirement(lifetimeDays: days)
        let candidates = qualifying(scts, notAfter: notAfter, at: time)
        if delivered(candidates) {
            return CTPolicyResult(
                shortfall: nil, path: .delivered, counted: Set(candidates.map(\.logID)).count, required: required,
                lifetimeDays: days)
        }
        let embedded = embeddedPerLog(candidates)
        let counted = cappedCount(embedded, perOperator: perOperator)
        func result(_ shortfall: CTShortfall?) -> CTPolicyResult {
            CTPolicyResult(
                shortfall: shortfall, path: shortfall == nil ? .embedded : nil, counted: counted, required: required,
                lifetimeDays: days)
        }
        guard counted >= required else {
            return result(embedded.count >= required ? .operatorDiversity : .tooFewSCTs)
        }
        if bestSubset(embedded, required: required, perOperator: perOperator) != nil { return result(nil) }
        if !embedded.contains(where: { $0.kind == .rfc6962 }) { return result(.noRFC6962Log) }
        if !embedded.contains(where: { $0.approval == .current }) { return result(.noCurrentlyApprovedLog) }
        // Each condition holds alone but no single choice meets them all within the operator limit.
        return result(.operatorDiversity)
    }

    /// The SCTs that may count: valid, from a listed log approved for them (every source; a log may
    /// appear twice, once embedded and once delivered).
    static func qualifying(_ scts: [SCTDetails], notAfter: Date, at time: Date) -> [Candidate] {
        scts.compactMap { sct in
            guard sct.status == .valid, let log = sct.log, sct.timestamp <= time else { return nil }
            if let interval = log.temporalInterval, !interval.contains(notAfter) { return nil }
            let approval = log.state.approval(forSCTAt: sct.timestamp)
            guard approval != .none else { return nil }
            return Candidate(
                logID: sct.logIDHex, operatorName: log.operatorName, kind: log.kind, approval: approval,
                embedded: sct.source == .embedded)
        }
    }

    /// The embedded candidates, one per log (a currently approved one first when a log has several).
    static func embeddedPerLog(_ candidates: [Candidate]) -> [Candidate] {
        var chosen: [Candidate] = []
        for candidate in candidates where candidate.embedded {
            if let index = chosen.firstIndex(where: { $0.logID == candidate.logID }) {
                if chosen[index].approval != .current && candidate.approval == .current { chosen[index] = candidate }
            } else {
                chosen.append(candidate)
            }
        }
        return chosen
    }

    /// The delivered path: two currently approved SCTs of distinct operators, one not embedded, and one
    /// of the two from an RFC 6962 log.
    static func delivered(_ candidates: [Candidate]) -> Bool {
        let current = candidates.filter { $0.approval == .current }
        for (index, first) in current.enumerated() {
            for second in current[(index + 1)...] where first.operatorName != second.operatorName {
                let hasDelivered = !first.embedded || !second.embedded
                let hasRFC6962 = first.kind == .rfc6962 || second.kind == .rfc6962
                if hasDelivered && hasRFC6962 { return true }
            }
        }
        return false
    }

    /// How many of `candidates` count when each operator contributes at most `perOperator`.
    static func cappedCount(_ candidates: [Candidate], perOperator: Int) -> Int {
        var perName: [String: Int] = [:]
        for candidate in candidates { perName[candidate.operatorName, default: 0] += 1 }
        return perName.values.reduce(0) { $0 + min($1, perOperator) }
    }

    /// A choice of `required` embedded SCTs within the operator limit that includes a currently approved
    /// log and an RFC 6962 log, or nil. Exhaustive over the (few) candidates; certificates carry a handful.
    static func bestSubset(_ candidates: [Candidate], required: Int, perOperator: Int) -> [Candidate]? {
        let pool = Array(candidates.prefix(16))
        guard pool.count >= required else { return nil }
        for mask in 1..<(1 << pool.count) where mask.nonzeroBitCount == required {
            let chosen = pool.indices.filter { mask & (1 << $0) != 0 }.map { pool[$0] }
            var perName: [String: Int] = [:]
            for candidate in chosen { perName[candidate.operatorName, default: 0] += 1 }
            guard perName.values.allSatisfy({ $0 <= perOperator }) else { continue }
            guard chosen.contains(where: { $0.approval == .current }),
                chosen.contains(where: { $0.kind == .rfc6962 })
            else { continue }
            return chosen
        }
        return nil
    }
}
