import ATSPolicy
import Foundation

/// What one exception entry relaxes; two hosts merge under a parent only when these are equal.
struct Relaxation: Sendable, Hashable {
    var insecureHTTP = false
    var minimumTLS: TLSProtocolVersion?
    var noForwardSecrecy = false

    var isEmpty: Bool { !insecureHTTP && minimumTLS == nil && !noForwardSecrecy }
}

/// Builds the smallest `NSAppTransportSecurity` dictionary that lets every observed load through,
/// starting from the empty dictionary, and proves it by parsing it back and re-evaluating.
///
/// Rules, in order:
/// 1. Per host, the union of what its loads need: cleartext → `NSExceptionAllowsInsecureHTTPLoads`,
///    an old server → the lowest needed `NSExceptionMinimumTLSVersion` (the highest version the
///    server offers), static RSA → `NSExceptionRequiresForwardSecrecy = NO`. A host whose loads
///    already pass under the empty dictionary (local hosts, good HTTPS) gets no entry.
/// 2. Merging: hosts merge into `parent` with `NSIncludesSubdomains = YES` only when every observed
///    host the parent would cover (the parent itself and its observed subdomains, within the
///    `--subdomain-depth` reach) needs exactly the same relaxation, the parent has at least two
///    labels, is not local and is not a two-label public suffix such as `co.uk`, and either the parent itself was observed or at least three
///    observed hosts sit exactly one label below it. Broadest qualifying parent first.
/// 3. `NSAllowsLocalNetworking = YES` only when local hosts were used and the dictionary without it
///    would block them (it never needs an App Review justification).
/// 4. `NSAllowsArbitraryLoads` is never generated: per-host entries always suffice.
/// 5. Loads no key can allow (trust failures, pins, DHE-only servers, a TLS floor the platform
///    enforces) are listed instead.
struct MinimalDictionaryBuilder {
    let loads: [ObservedLoad]
    let options: EvaluationOptions
    let requestCounts: [String: (http: Int, total: Int)]

    static let mergeRule =
        "Hosts merge under a parent domain with NSIncludesSubdomains = YES only when every observed host the parent would cover needs exactly the same relaxation, the parent has at least two labels, is not local and is not a two-label public suffix such as co.uk, and the parent itself was observed or at least three observed hosts sit one label below it; otherwise each host gets its own entry."

    /// The result: the dictionary as a plist value, its entries and the proof.
    struct Output {
        var value: PlistValue
        var entries: [MinimalEntry]
        var allowsLocalNetworking: Bool
        var unfixable: [UnfixableLoad]
        var roundTripVerified: Bool
        var notes: [String]
    }

    func build() -> Output {
        var notes: [String] = []
        var unfixable: [UnfixableLoad] = []
        var seenUnfixable = Set<String>()
        var floorHosts = Set<String>()
        let floor = options.tls12FloorOn26 && options.platform.has(.tls12AbsoluteFloor)
        for load in loads {
            for reason in load.needs.unfixable where seenUnfixable.insert(load.target.host + "|" + reason).inserted {
                unfixable.append(
                    UnfixableLoad(
                        host: load.target.host, url: load.target.url, code: load.code,
                        reason: "no Info.plist change can allow this: \(reason)",
                        fix: load.fix.flatMap { $0.hasPrefix("no Info.plist change") ? nil : $0 }))
            }
            if floor, let version = load.needs.minimumTLSVersion.flatMap(TLSProtocolVersion.init(plistString:)),
                version < .tls12, floorHosts.insert(load.target.host).inserted
            {
                unfixable.append(
                    UnfixableLoad(
                        host: load.target.host, url: load.target.url, code: load.code,
                        reason:
                            "no Info.plist change can allow this: the server needs \(version.displayName), and \(options.platform) does not honour NSExceptionMinimumTLSVersion below TLS 1.2",
                        fix: "upgrade the server to TLS 1.2 or later"))
            }
            for assumption in load.needs.assumptions where !notes.contains("\(load.target.host): \(assumption)") {
                notes.append("\(load.target.host): \(assumption)")
            }
        }

        // 1. Per-host relaxations, only for hosts the empty dictionary does not already allow.
        var byHost: [String: [ObservedLoad]] = [:]
        for load in loads { byHost[load.target.host, default: []].append(load) }
        var relaxations: [String: Relaxation] = [:]
        let empty = ATSEvaluator(configuration: .empty, options: options)
        for (host, hostLoads) in byHost {
            guard !hostLoads.allSatisfy({ Self.passes($0, under: empty, floor: floor) }) else { continue }
            var relaxation = Relaxation()
            for load in hostLoads {
                relaxation.insecureHTTP = relaxation.insecureHTTP || load.needs.cleartext
                relaxation.noForwardSecrecy = relaxation.noForwardSecrecy || load.needs.forwardSecrecyWaiver
                if let version = load.needs.minimumTLSVersion.flatMap(TLSProtocolVersion.init(plistString:)),
                    !(floor && version < .tls12)
                {
                    relaxation.minimumTLS = min(relaxation.minimumTLS ?? version, version)
                }
            }
            if !relaxation.isEmpty { relaxations[host] = relaxation }
        }

        // 3. Local networking: only when local loads are still blocked and the key fixes that.
        var localNetworking = false
        let localLoads = loads.filter { empty.evaluate($0.target, source: $0.source).localHost != nil }
        if !localLoads.isEmpty {
            var withKey = ATSConfiguration()
            withKey.allowsLocalNetworking = .value(true)
            let keyed = ATSEvaluator(configuration: withKey, options: options)
            let blockedWithout = localLoads.filter { !Self.passes($0, under: empty) }
            if !blockedWithout.isEmpty && blockedWithout.allSatisfy({ Self.passes($0, under: keyed) }) {
                localNetworking = true
                for load in blockedWithout { relaxations[load.target.host] = nil }
            }
        }

        // 2. Merge, then prove; fall back to unmerged entries if the merged form fails.
        let unmerged = relaxations.map {
            Entry(key: $0.key, includesSubdomains: false, relaxation: $0.value, covered: [$0.key])
        }
        let merged = merge(relaxations, observed: Set(byHost.keys))
        var chosen = merged
        var verified = verify(entries: merged, localNetworking: localNetworking)
        if !verified && merged != unmerged {
            chosen = unmerged
            verified = verify(entries: unmerged, localNetworking: localNetworking)
            notes.append("merging under parent domains failed the round trip, so every host has its own entry")
        }
        if !verified {
            let configuration = ATSConfigurationParser().parse(
                Self.plistValue(chosen, localNetworking: localNetworking))
            let evaluator = ATSEvaluator(configuration: configuration, options: options)
            for load in loads where !Self.passes(load, under: evaluator, floor: floor) {
                guard seenUnfixable.insert(load.target.host + "|still-fails").inserted else { continue }
                unfixable.append(
                    UnfixableLoad(
                        host: load.target.host, url: load.target.url, code: load.code,
                        reason:
                            "no Info.plist change can allow this: the load still fails under the generated dictionary (\(load.rule.isEmpty ? "see the host's verdicts" : load.rule))",
                        fix: nil))
            }
            notes.append("some observed loads still fail under this dictionary; they are listed as unfixable")
        }
        chosen.sort { $0.key < $1.key }
        let value = Self.plistValue(chosen, localNetworking: localNetworking)
        let entries = chosen.map { entry in
            MinimalEntry(
                key: entry.key, includesSubdomains: entry.includesSubdomains,
                allowsInsecureHTTPLoads: entry.relaxation.insecureHTTP,
                minimumTLSVersion: entry.relaxation.minimumTLS?.rawValue,
                requiresForwardSecrecy: entry.relaxation.noForwardSecrecy ? false : nil,
                coveredHosts: entry.covered.sorted(), justifications: justifications(entry))
        }
        unfixable.sort { ($0.host, $0.reason) < ($1.host, $1.reason) }
        return Output(
            value: value, entries: entries, allowsLocalNetworking: localNetworking, unfixable: unfixable,
            roundTripVerified: verified, notes: notes)
    }

    // MARK: - Entries and merging

    /// An entry being built.
    struct Entry: Equatable {
        var key: String
        var includesSubdomains: Bool
        var relaxation: Relaxation
        var covered: [String]
    }

    func merge(_ relaxations: [String: Relaxation], observed: Set<String>) -> [Entry] {
        var remaining = relaxations
        var entries: [Entry] = []
        let mergeable = relaxations.keys.filter { Self.isMergeableName($0) }
        var candidates = Set<String>()
        for host in mergeable {
            var labels = host.split(separator: ".").map(String.init)
            while labels.count > 2 {
                labels.removeFirst()
                candidates.insert(labels.joined(separator: "."))
            }
        }
        let ordered = candidates.sorted {
            let lhs = $0.split(separator: ".").count
            let rhs = $1.split(separator: ".").count
            return lhs != rhs ? lhs < rhs : $0 < $1
        }
        for parent in ordered where Self.isMergeableName(parent) {
            let covered = observed.filter { host in
                guard host == parent || host.hasSuffix("." + parent) else { return false }
                if host == parent { return true }
                let depth = host.split(separator: ".").count - parent.split(separator: ".").count
                switch options.subdomainDepth {
                case .any: return true
                case .one: return depth == 1
                }
            }
            guard let first = covered.first, let relaxation = remaining[first] else { continue }
            guard covered.allSatisfy({ remaining[$0] == relaxation }) else { continue }
            let children = covered.filter {
                $0 != parent && $0.split(separator: ".").count == parent.split(separator: ".").count + 1
            }
            guard covered.contains(parent) || children.count >= 3 else { continue }
            for host in covered { remaining[host] = nil }
            entries.append(
                Entry(key: parent, includesSubdomains: true, relaxation: relaxation, covered: covered.sorted()))
        }
        for (host, relaxation) in remaining {
            entries.append(Entry(key: host, includesSubdomains: false, relaxation: relaxation, covered: [host]))
        }
        return entries.sorted { $0.key < $1.key }
    }

    /// DNS names with at least two labels, not local, not IP literals, and not a common
    /// two-label public suffix such as `co.uk` or `com.au` (no public-suffix list is shipped, so
    /// `co|com|net|org|gov|edu|ac|ne|or|go` under a two-letter country code counts as one).
    static func isMergeableName(_ host: String) -> Bool {
        guard IPAddress(parsing: host) == nil, !host.hasSuffix("."), !host.hasSuffix(".local") else { return false }
        let labels = host.split(separator: ".")
        guard labels.count >= 2 else { return false }
        if labels.count == 2, labels[1].count == 2,
            ["co", "com", "net", "org", "gov", "edu", "ac", "ne", "or", "go"].contains(labels[0])
        {
            return false
        }
        return true
    }

    // MARK: - Proof

    /// Whether `load` passes under `evaluator`: cleartext allowed, or the HTTPS requirements met
    /// by what was observed (version, key exchange, suite). Unfixable parts are not judged.
    static func passes(_ load: ObservedLoad, under evaluator: ATSEvaluator, floor: Bool = false) -> Bool {
        let decision = evaluator.evaluate(load.target, source: load.source)
        switch decision.outcome {
        case .cleartextBlocked: return false
        case .cleartextAllowed: return true
        case .https:
            let requirements = decision.requirements
            if let version = load.serverVersion, requirements.minimumVersion > version, !(floor && version < .tls12) {
                return false
            }
            if load.needs.forwardSecrecyWaiver && requirements.forwardSecrecyRequired { return false }
            if let cipher = load.cipher, let suite = CipherSuite.byIANAName(cipher),
                !requirements.cipherListUnrestricted,
                suite.group != .tls13, !requirements.cipherSuites.contains(where: { $0.code == suite.code })
            {
                return !load.needs.unfixable.isEmpty
            }
            return true
        }
    }

    /// Parses the generated dictionary back and checks every observed load.
    func verify(entries: [Entry], localNetworking: Bool) -> Bool {
        let value = Self.plistValue(entries, localNetworking: localNetworking)
        return verify(configuration: ATSConfigurationParser().parse(value))
    }

    /// Whether every observed load passes under `configuration`.
    func verify(configuration: ATSConfiguration) -> Bool {
        let evaluator = ATSEvaluator(configuration: configuration, options: options)
        let floor = options.tls12FloorOn26 && options.platform.has(.tls12AbsoluteFloor)
        return loads.allSatisfy { Self.passes($0, under: evaluator, floor: floor) }
    }

    // MARK: - Output

    static func plistValue(_ entries: [Entry], localNetworking: Bool) -> PlistValue {
        var root: [String: PlistValue] = [:]
        if localNetworking { root[ATSKey.allowsLocalNetworking] = .bool(true) }
        var domains: [String: PlistValue] = [:]
        for entry in entries {
            var fields: [String: PlistValue] = [:]
            if entry.includesSubdomains { fields[ATSKey.includesSubdomains] = .bool(true) }
            if entry.relaxation.insecureHTTP { fields[ATSKey.exceptionAllowsInsecureHTTPLoads] = .bool(true) }
            if let version = entry.relaxation.minimumTLS {
                fields[ATSKey.exceptionMinimumTLSVersion] = .string(version.rawValue)
            }
            if entry.relaxation.noForwardSecrecy { fields[ATSKey.exceptionRequiresForwardSecrecy] = .bool(false) }
            domains[entry.key] = .dictionary(fields)
        }
        if !domains.isEmpty { root[ATSKey.exceptionDomains] = .dictionary(domains) }
        return .dictionary(root)
    }

    /// App Review notes for an entry (reference §6: cleartext and TLS below 1.2 need one).
    func justifications(_ entry: Entry) -> [String] {
        var notes: [String] = []
        let hosts = entry.covered.joined(separator: ", ")
        if entry.relaxation.insecureHTTP {
            let http = entry.covered.reduce(0) { $0 + (requestCounts[$1]?.http ?? 0) }
            notes.append(
                "\(ATSKey.exceptionAllowsInsecureHTTPLoads): App Review asks for a justification: cleartext HTTP to \(hosts) (\(http) http:// request\(http == 1 ? "" : "s") seen), e.g. the server is run by another entity and does not support HTTPS"
            )
        }
        if let version = entry.relaxation.minimumTLS, version < .tls12 {
            notes.append(
                "\(ATSKey.exceptionMinimumTLSVersion): App Review asks for a justification: \(hosts) supports only \(version.displayName), below TLS 1.2"
            )
        }
        if entry.relaxation.noForwardSecrecy {
            notes.append(
                "\(ATSKey.exceptionRequiresForwardSecrecy): no App Review justification needed; \(hosts) uses static-RSA key exchange"
            )
        }
        if entry.includesSubdomains {
            notes.append("\(ATSKey.includesSubdomains): no justification needed; covers the observed hosts \(hosts)")
        }
        return notes
    }
}
