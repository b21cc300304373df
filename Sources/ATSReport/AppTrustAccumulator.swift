import ATSProxyCore
import ATSTLS

/// Collects the app-trust part of a session: per host, the challenge results per kind (`--challenge`) and the
/// pinning verdicts (`--af-policy`). A value; `SessionReport` serializes access.
///
/// Records carry a challenge's kind name and its meaning, not the `ChallengeOutcome` that made them, so this
/// keeps its own tally per (host, kind name) instead of `ChallengeLedger` (whose entries hold outcomes); the
/// verdict rule is the ledger's: a finding as soon as one connection accepted the kind. Bounded: at most
/// `SessionReport.maximumHosts` hosts and `maximumKindsPerHost` kind names per host (records beyond are
/// counted in the totals only).
struct AppTrustAccumulator: Sendable {
    /// Kind names kept per host (the known kinds, with room for names a newer proxy writes).
    static let maximumKindsPerHost = 32

    /// One kind's tally on one host.
    struct Tally: Sendable {
        var passes = 0
        var findings = 0
        var passMeaning: String?
        var findingMeaning: String?
    }

    /// One chain's verdicts on one host.
    struct ChainTally: Sendable {
        var acceptances = 0
        var refusals = 0
        var meaning = ""

        mutating func add(_ verdict: AppTrustRecord.Verdict) {
            if verdict.accepted {
                acceptances += 1
                if refusals == 0 { meaning = verdict.meaning }
            } else {
                if refusals == 0 { meaning = verdict.meaning }
                refusals += 1
            }
        }

        var summary: ChainVerdictSummary {
            ChainVerdictSummary(accepted: refusals == 0, acceptances: acceptances, refusals: refusals, meaning: meaning)
        }
    }

    /// The pinning verdicts on one host.
    struct PinningTally: Sendable {
        var latest: AppTrustRecord.Pinning
        var evaluations = 0
        var real = ChainTally()
        var interception = ChainTally()
    }

    /// Everything kept for one host.
    struct Host: Sendable {
        var challenges: [String: Tally] = [:]
        var pinning: PinningTally?
        var passes = 0
        var findings = 0
    }

    private(set) var hosts: [String: Host] = [:]
    /// Challenged connections refused and accepted, over every host (also those beyond the caps).
    private(set) var challengePasses = 0
    private(set) var challengeFindings = 0

    var isEmpty: Bool { hosts.isEmpty }

    /// Adds one challenged connection's record (`challengeRefused` or `challengeAccepted`).
    mutating func addChallenge(_ record: RequestRecord) {
        let finding: Bool
        switch record.result {
        case .challengeAccepted: finding = true
        case .challengeRefused: finding = false
        case .completed, .blockedCleartext, .failed, .refused, .reported, .clientUntrustedCA:
            preconditionFailure("AppTrustAccumulator.addChallenge with a \(record.result.rawValue) record")
        }
        if finding { challengeFindings += 1 } else { challengePasses += 1 }
        let name = record.appTrust?.challenge ?? "unknown"
        let meaning = record.appTrust?.challengeMeaning ?? record.rule
        guard admit(record.host) else { return }
        var host = hosts[record.host, default: Host()]
        if finding { host.findings += 1 } else { host.passes += 1 }
        if host.challenges[name] != nil || host.challenges.count < Self.maximumKindsPerHost {
            var tally = host.challenges[name, default: Tally()]
            if finding {
                tally.findings += 1
                if tally.findingMeaning == nil { tally.findingMeaning = meaning }
            } else {
                tally.passes += 1
                if tally.passMeaning == nil { tally.passMeaning = meaning }
            }
            host.challenges[name] = tally
        }
        hosts[record.host] = host
    }

    /// Adds one upstream connection's pinning verdicts for `host`.
    mutating func addPinning(_ pinning: AppTrustRecord.Pinning, host name: String) {
        guard admit(name) else { return }
        var host = hosts[name, default: Host()]
        var tally = host.pinning ?? PinningTally(latest: pinning)
        tally.latest = pinning
        tally.evaluations += 1
        tally.real.add(pinning.realChain)
        tally.interception.add(pinning.interceptionChain)
        host.pinning = tally
        hosts[name] = host
    }

    private func admit(_ host: String) -> Bool {
        hosts[host] != nil || hosts.count < SessionReport.maximumHosts
    }

    /// The section: `atsStatus` gives a host's ATS status, nil for a host ATS never judged.
    func section(atsStatus: (String) -> HostStatus?) -> AppTrustSection {
        let reports = hosts.map { name, host in Self.report(name, host, atsStatus: atsStatus(name)) }
            .sorted { lhs, rhs in
                if lhs.status != rhs.status { return lhs.status > rhs.status }
                if lhs.challengeFindings != rhs.challengeFindings {
                    return lhs.challengeFindings > rhs.challengeFindings
                }
                return lhs.host < rhs.host
            }
        return AppTrustSection(summary: Self.summary, hosts: reports)
    }

    static let summary =
        "Whether the app itself refuses forged servers (--challenge: a pass per kind the client refused, a finding per kind it accepted and sent a request through, answered 502 and never forwarded) and whether its AFSecurityPolicy (--af-policy) accepts the real server's chain and the proxy's. Challenged connections are not app requests: they are in no ATS figure."

    static func report(_ name: String, _ host: Host, atsStatus: HostStatus?) -> AppTrustHostReport {
        let challenges = host.challenges.sorted { lhs, rhs in
            let left = order(lhs.key)
            let right = order(rhs.key)
            return left != right ? left < right : lhs.key < rhs.key
        }.map { name, tally -> ChallengeResult in
            let kind = ChallengeKind(name: name)
            let finding = tally.findings > 0
            return ChallengeResult(
                kind: name, category: kind?.category.rawValue, presents: kind?.presents,
                verdict: finding ? .finding : .pass, passes: tally.passes, findings: tally.findings,
                meaning: (finding ? tally.findingMeaning : tally.passMeaning) ?? "")
        }
        let pinning = host.pinning.map { tally in
            PinningSummary(
                policy: tally.latest.policy, scenario: tally.latest.scenario,
                scenarioMeaning: tally.latest.scenarioMeaning, evaluations: tally.evaluations,
                realChain: tally.real.summary, interceptionChain: tally.interception.summary)
        }
        var status = AppTrustStatus.pass
        if pinning?.interceptionChain.accepted == false { status = .pinningRefusesInterception }
        if pinning?.realChain.accepted == false { status = .pinningRefusesRealChain }
        if challenges.contains(where: { $0.verdict == .finding }) { status = .challengeFinding }
        return AppTrustHostReport(
            host: name, status: status, atsStatus: atsStatus, pinning: pinning, challenges: challenges,
            challengePasses: host.passes, challengeFindings: host.findings)
    }

    /// A kind's place in the report: the declaration order, unknown names last.
    private static func order(_ name: String) -> Int {
        guard let kind = ChallengeKind(name: name), let index = ChallengeKind.allCases.firstIndex(of: kind) else {
            return ChallengeKind.allCases.count
        }
        return index
    }
}
