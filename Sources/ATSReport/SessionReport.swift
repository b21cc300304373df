import ATSPolicy
import ATSProxyCore
import ATSTLS
import Foundation
import Synchronization

/// Why a report could not be written.
public struct SessionReportError: Error, Sendable, CustomStringConvertible, Equatable {
    public let path: String
    public let reason: String

    public var description: String { "report directory \(path): \(reason)" }
}

/// Accumulates the finished requests of one proxy session and writes the session report:
/// `report.json`, `report.html` and `junit.xml` (issue 6, item 3), with the App trust section of
/// `--challenge` and `--af-policy` (issue 19): a challenged connection's record goes to that section
/// only and moves no ATS figure.
///
/// Thread-safe: `record` may be called from any thread; the state sits behind a `Mutex`, and the
/// writers work on a snapshot. Memory is bounded per host (distinct loads, verdicts and TLS
/// parameter sets are capped), so a long session does not grow without limit.
///
/// Usage (CLI): `checkWritable(directory:)` at start, one `SessionReport` per run, `record(_:)`
/// for every `RequestRecord`, `write(to:)` at exit and on SIGUSR1, `updatePolicy` on SIGHUP.
public final class SessionReport: Sendable {
    /// The policy the report compares the traffic with.
    public struct Policy: Sendable {
        public var configuration: ATSConfiguration
        public var options: EvaluationOptions
        /// One line naming the configuration source.
        public var sourceSummary: String
        /// The loaded source, when known: lets `ATSLinter` report ignored keys exactly.
        public var source: LoadedInfoPlist?

        public init(
            configuration: ATSConfiguration, options: EvaluationOptions, sourceSummary: String,
            source: LoadedInfoPlist? = nil
        ) {
            self.configuration = configuration
            self.options = options
            self.sourceSummary = sourceSummary
            self.source = source
        }
    }

    /// Caps that keep the accumulator bounded.
    static let maximumLoadsPerHost = 256
    static let maximumVerdictsPerHost = 32
    static let maximumTLSSetsPerHost = 16
    static let maximumHosts = 4096

    private let state: Mutex<State>
    private let clock: @Sendable () -> Date
    /// The last plist `minimalDictionaryPlist` built and the revision of the state it was built from.
    private let plistCache = Mutex<(revision: Int, text: String)?>(nil)

    /// A report for `policy`; `clock` stamps the documents.
    public init(policy: Policy, clock: @escaping @Sendable () -> Date = { Date() }) {
        state = Mutex(State(policy: policy))
        self.clock = clock
    }

    /// A report for a loaded configuration.
    public convenience init(
        configuration: ATSConfiguration, options: EvaluationOptions = EvaluationOptions(),
        sourceSummary: String = LoadedInfoPlist.none.summary, source: LoadedInfoPlist? = nil
    ) {
        self.init(
            policy: Policy(
                configuration: configuration, options: options, sourceSummary: sourceSummary, source: source))
    }

    /// A report for the proxy's current policy snapshot.
    public convenience init(snapshot: PolicyStore.Snapshot, source: LoadedInfoPlist? = nil) {
        self.init(
            policy: Policy(
                configuration: snapshot.evaluator.configuration, options: snapshot.evaluator.options,
                sourceSummary: snapshot.sourceSummary, source: source))
    }

    /// Replaces the policy the traffic is compared with (after a reload).
    public func updatePolicy(_ policy: Policy) {
        state.withLock {
            $0.policy = policy
            $0.dictionaryRevision += 1
        }
    }

    /// Hosts the proxy answers itself (the CA onboarding name): never app traffic, never reported.
    public static let proxyOwnHosts: Set<String> = ["ats-proxy.invalid"]

    /// Adds one finished request (requests to the proxy's own onboarding name are ignored).
    public func record(_ record: RequestRecord) {
        if Self.proxyOwnHosts.contains(record.host) { return }
        state.withLock { $0.add(record) }
    }

    /// Records what the host filter left alone (a count only: those hosts are never judged).
    public func setIgnored(_ ignored: HostFilter.Ignored) {
        state.withLock { $0.ignored = ignored }
    }

    /// Requests recorded so far.
    public var requestCount: Int { state.withLock { $0.requests } }

    /// Requests that broke ATS so far (what `ats-proxy exec` turns into exit status 3).
    public var violationCount: Int { state.withLock { $0.violations } }

    /// `--challenge`: forged servers the client accepted so far (challenged connections it sent a request through).
    public var challengeFindingCount: Int { state.withLock { $0.appTrust.challengeFindings } }

    /// The report as a value.
    public func document() -> SessionReportDocument {
        let snapshot = state.withLock { state in
            var copy = state
            // The copy does not need the cache, and must not share it: the next `record` would copy it.
            copy.known = [:]
            return copy
        }
        return snapshot.document(generatedAt: clock())
    }

    /// The minimal dictionary as the Info.plist fragment to paste: the same text as
    /// `document().minimalDictionary.plist`, rebuilt only when something it is built from (a host,
    /// a distinct load, a cleartext request count, the policy) changed since the last call, and
    /// then without the rest of the document. For the live page, which shows it as traffic flows.
    public func minimalDictionaryPlist() -> String {
        let inputs = state.withLock { state -> State.DictionaryInputs? in
            if let cached = plistCache.withLock({ $0 }), cached.revision == state.dictionaryRevision { return nil }
            return state.dictionaryInputs()
        }
        guard let inputs else { return plistCache.withLock { $0?.text } ?? "" }
        let text = inputs.plist()
        plistCache.withLock { cache in
            if (cache?.revision ?? -1) < inputs.revision { cache = (inputs.revision, text) }
        }
        return text
    }

    /// `report.json`.
    public func jsonData() throws -> Data { try Self.encode(document()) }

    /// `report.html`.
    public func html() -> String { ReportHTMLWriter.render(document()) }

    /// `junit.xml`.
    public func junitXML() -> String { ReportJUnitWriter.render(document()) }

    /// Writes `report.json`, `report.html` and `junit.xml` into `directory` (created if missing),
    /// each atomically.
    public func write(to directory: String) throws {
        try Self.checkWritable(directory: directory)
        let document = document()
        let url = URL(fileURLWithPath: directory, isDirectory: true)
        let files: [(String, Data)] = [
            ("report.json", try Self.encode(document)),
            ("report.html", Data(ReportHTMLWriter.render(document).utf8)),
            ("junit.xml", Data(ReportJUnitWriter.render(document).utf8)),
        ]
        for (name, data) in files {
            do {
                try data.write(to: url.appendingPathComponent(name), options: .atomic)
            } catch {
                throw SessionReportError(path: directory, reason: "cannot write \(name): \(error.localizedDescription)")
            }
        }
    }

    /// Fails now, not at exit, when `directory` cannot hold the report: creates it if missing and
    /// writes and removes a probe file.
    public static func checkWritable(directory: String) throws {
        let manager = FileManager.default
        guard !directory.isEmpty else { throw SessionReportError(path: directory, reason: "empty path") }
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw SessionReportError(path: directory, reason: "exists and is not a directory")
            }
        } else {
            do {
                try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw SessionReportError(path: directory, reason: "cannot create it: \(error.localizedDescription)")
            }
        }
        let probe = URL(fileURLWithPath: directory, isDirectory: true).appendingPathComponent(
            ".ats-proxy-write-check-\(UUID().uuidString)")
        guard manager.createFile(atPath: probe.path, contents: Data("ok\n".utf8)) else {
            throw SessionReportError(path: directory, reason: "is not writable")
        }
        try? manager.removeItem(at: probe)
    }

    static func encode(_ document: SessionReportDocument) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(document)
        data.append(0x0A)
        return data
    }
}

// MARK: - Accumulated state

extension SessionReport {
    /// Everything recorded so far.
    struct State: Sendable {
        var policy: Policy
        var hosts: [String: HostAccumulator] = [:]
        var requests = 0
        var violations = 0
        var clientUntrustedCA = 0
        var droppedHosts = 0
        /// `--challenge` and `--af-policy`: the app's own trust decisions, apart from every ATS figure.
        var appTrust = AppTrustAccumulator()
        /// What the host filter left alone (set when the report is written).
        var ignored = HostFilter.Ignored()
        /// The app's loads by outcome word (challenged connections are counted in the app-trust part only).
        var outcomes: [LoadOutcome: Int] = [:]

        init(policy: Policy) { self.policy = policy }

        /// What was derived from records seen recently, by the fields it was derived from: a record
        /// like one of those skips the parsing and classifying and only counts (see `RecordSignature`).
        var known: [RecordSignature: Classification] = [:]
        /// Bumped whenever something the minimal dictionary is built from changes.
        var dictionaryRevision = 0
        /// Entries `known` holds at most before it starts over.
        static let maximumKnown = 1024

        /// Counts `record`. A challenged connection's record goes to the app-trust part only: it is the app's
        /// trust on trial, not a load ATS judged (the proxy presented the TLS; nothing went upstream). Pinning
        /// verdicts ride on ordinary records, which the ATS part counts as usual.
        mutating func add(_ record: RequestRecord) {
            switch record.result {
            case .challengeRefused, .challengeAccepted:
                appTrust.addChallenge(record)
                return
            case .completed, .blockedCleartext, .failed, .refused, .reported, .clientUntrustedCA:
                break
            }
            outcomes[LoadOutcome(record), default: 0] += 1
            if let pinning = record.appTrust?.pinning { appTrust.addPinning(pinning, host: record.host) }
            let signature = RecordSignature(record)
            if let classification = known[signature] {
                count(record, classification)
                return
            }
            let classification = classify(record)
            if known.count >= Self.maximumKnown { known.removeAll(keepingCapacity: true) }
            known[signature] = classification
        }

        /// The slow path: parses and classifies `record`, counts it, and returns what a record with
        /// the same signature would get.
        private mutating func classify(_ record: RequestRecord) -> Classification {
            requests += 1
            let load = ObservedLoad(record: record)
            let violation = load?.kind == .violation || (load == nil && ObservedLoad.kind(of: record) == .violation)
            if violation { violations += 1 }
            if record.result == .clientUntrustedCA { clientUntrustedCA += 1 }
            let host = load?.target.host ?? "(unparsed URL)"
            guard hosts[host] != nil || hosts.count < SessionReport.maximumHosts else {
                droppedHosts += 1
                return Classification(
                    host: host, admitted: false, violation: violation, kind: .ok, isHTTP: false, verdictIndex: nil,
                    tlsIndex: nil)
            }
            if hosts[host] == nil { dictionaryRevision += 1 }
            let added = hosts[host, default: HostAccumulator(host: host)].add(record, load: load)
            if added.newLoad || added.classification.isHTTP { dictionaryRevision += 1 }
            var classification = added.classification
            classification.violation = violation
            return classification
        }

        /// The fast path: a record whose signature was classified before; only counters move.
        private mutating func count(_ record: RequestRecord, _ classification: Classification) {
            requests += 1
            if classification.violation { violations += 1 }
            if record.result == .clientUntrustedCA { clientUntrustedCA += 1 }
            guard classification.admitted else {
                droppedHosts += 1
                return
            }
            hosts[classification.host]?.count(record, classification)
            if classification.isHTTP { dictionaryRevision += 1 }
        }

        /// What `MinimalDictionaryBuilder` needs, copied out of the state.
        struct DictionaryInputs {
            var revision: Int
            var loads: [ObservedLoad]
            var counts: [String: (http: Int, total: Int)]
            var options: EvaluationOptions

            /// The fragment, as `document` writes it into `minimalDictionary.plist`.
            func plist() -> String {
                let built = MinimalDictionaryBuilder(loads: loads, options: options, requestCounts: counts).build()
                var entries = built.entries
                entries.sort { $0.key < $1.key }
                return PlistFragmentWriter.fragment(entries, allowsLocalNetworking: built.allowsLocalNetworking)
            }
        }

        func dictionaryInputs() -> DictionaryInputs {
            var counts: [String: (http: Int, total: Int)] = [:]
            for (host, accumulator) in hosts { counts[host] = (accumulator.http, accumulator.requests) }
            return DictionaryInputs(
                revision: dictionaryRevision, loads: hosts.keys.sorted().flatMap { hosts[$0]!.loadList },
                counts: counts, options: policy.options)
        }

        func document(generatedAt: Date) -> SessionReportDocument {
            let options = policy.options
            let inputs = dictionaryInputs()
            let loads = inputs.loads
            let builder = MinimalDictionaryBuilder(loads: loads, options: options, requestCounts: inputs.counts)
            let built = builder.build()
            var entries = built.entries
            entries.sort { $0.key < $1.key }
            var notes = built.notes
            if droppedHosts > 0 {
                notes.append(
                    "\(droppedHosts) requests to hosts beyond the first \(SessionReport.maximumHosts) were counted but not analysed"
                )
            }
            let fragment = PlistFragmentWriter.fragment(entries, allowsLocalNetworking: built.allowsLocalNetworking)
            let reparsed = PlistFragmentWriter.parse(fragment)
            let xmlVerified =
                reparsed.map { builder.verify(configuration: ATSConfigurationParser().parse($0)) } ?? false
            if !xmlVerified { notes.append("the pasted XML fragment did not parse back to the same dictionary") }
            let minimal = MinimalDictionary(
                plist: fragment,
                allowsLocalNetworking: built.allowsLocalNetworking, entries: entries, unfixable: built.unfixable,
                mergeRule: MinimalDictionaryBuilder.mergeRule,
                roundTripVerified: built.roundTripVerified && xmlVerified,
                notes: notes)
            let comparison = ConfigComparer(
                configuration: policy.configuration, options: options, source: policy.source, loads: loads,
                minimal: entries, minimalAllowsLocalNetworking: built.allowsLocalNetworking
            ).compare()
            let hostReports = hosts.values.map { $0.report() }.sorted { lhs, rhs in
                if lhs.status != rhs.status { return lhs.status > rhs.status }
                if lhs.violations != rhs.violations { return lhs.violations > rhs.violations }
                let lhsBad = lhs.blocked + lhs.failed + lhs.reported
                let rhsBad = rhs.blocked + rhs.failed + rhs.reported
                if lhsBad != rhsBad { return lhsBad > rhsBad }
                return lhs.host < rhs.host
            }
            var statuses: [String: HostStatus] = [:]
            for report in hostReports { statuses[report.host] = report.status }
            let appTrustSection = appTrust.section { statuses[$0] }
            let formatter = ISO8601DateFormatter()
            formatter.timeZone = TimeZone(identifier: "UTC")
            return SessionReportDocument(
                schemaVersion: SessionReportDocument.currentSchemaVersion, generator: "ats-proxy",
                generatedAt: formatter.string(from: generatedAt), source: policy.sourceSummary,
                platform: options.platform.description, options: Self.summary(options),
                configuration: Self.summary(policy.configuration),
                totals: Totals(
                    requests: requests, allowed: hostReports.reduce(0) { $0 + $1.allowed },
                    blocked: hostReports.reduce(0) { $0 + $1.blocked },
                    failed: hostReports.reduce(0) { $0 + $1.failed },
                    reported: hostReports.reduce(0) { $0 + $1.reported }, hosts: hostReports.count,
                    violations: violations, ignoredConnections: ignored.connections, ignoredHosts: ignored.hosts,
                    clientUntrustedCA: clientUntrustedCA, challengePasses: appTrust.challengePasses,
                    challengeFindings: appTrust.challengeFindings,
                    pinningRealChainRefused: appTrustSection.hosts.filter { $0.pinning?.realChain.accepted == false }
                        .count,
                    pinningInterceptionRefused: appTrustSection.hosts.filter {
                        $0.pinning?.interceptionChain.accepted == false
                    }.count, outcomes: Self.words(outcomes, ignored: ignored.connections)),
                hosts: hostReports, appTrust: appTrustSection, minimalDictionary: minimal, comparison: comparison)
        }

        /// Counts by outcome word, as report.json writes them (`ignored` from the host filter's count when given).
        static func words(_ counts: [LoadOutcome: Int], ignored: Int = 0) -> [String: Int] {
            var words: [String: Int] = [:]
            for (outcome, count) in counts where count > 0 { words[outcome.rawValue] = count }
            if ignored > 0 { words[LoadOutcome.ignored.rawValue] = ignored }
            return words
        }

        static func summary(_ options: EvaluationOptions) -> OptionsSummary {
            OptionsSummary(
                subdomainDepth: options.subdomainDepth.rawValue, builtInAppleExceptions: options.builtInAppleExceptions,
                explicitLocalNetworkingNoIsStrict: options.explicitLocalNetworkingNoIsStrict,
                tls12FloorOn26: options.tls12FloorOn26, localNetworks: options.localNetworks.map(\.description),
                trustOverrideHosts: options.trustOverrideHosts)
        }

        static func summary(_ configuration: ATSConfiguration) -> ConfigurationSummary {
            func text(_ setting: BooleanSetting) -> String {
                switch setting {
                case .absent: "absent"
                case .value(let flag): flag ? "YES" : "NO"
                }
            }
            return ConfigurationSummary(
                allowsArbitraryLoads: text(configuration.allowsArbitraryLoads),
                allowsArbitraryLoadsForMedia: text(configuration.allowsArbitraryLoadsForMedia),
                allowsArbitraryLoadsInWebContent: text(configuration.allowsArbitraryLoadsInWebContent),
                allowsLocalNetworking: text(configuration.allowsLocalNetworking),
                exceptionDomains: configuration.exceptionDomains.values.sorted { $0.key < $1.key }.map { entry in
                    ExceptionSummary(
                        key: entry.key, includesSubdomains: entry.includesSubdomains,
                        allowsInsecureHTTPLoads: entry.allowsInsecureHTTPLoads,
                        minimumTLSVersion: entry.minimumTLSVersionSpecified ? entry.minimumTLSVersion.rawValue : nil,
                        requiresForwardSecrecy: entry.requiresForwardSecrecy)
                },
                pinnedDomains: configuration.pinnedDomains.keys.sorted())
        }
    }

    /// Per-host counters and the distinct loads, verdicts and TLS sets seen.
    struct HostAccumulator: Sendable {
        let host: String
        var requests = 0
        var allowed = 0
        var blocked = 0
        var failed = 0
        var reported = 0
        var violations = 0
        var outcomes: [LoadOutcome: Int] = [:]
        var http = 0
        var bytesFromClient = 0
        var bytesToClient = 0
        var durationMilliseconds = 0.0
        var schemes: [String] = []
        var sources: [String] = []
        var routes: [String] = []
        var loads: [String: ObservedLoad] = [:]
        var loadOrder: [String] = []
        /// Distinct verdicts in the order first seen, and where each key sits in that list.
        var verdicts: [VerdictSummary] = []
        var verdictIndex: [String: Int] = [:]
        var tls: [TLSObservation] = []
        /// The system-services verdict kept for the report (a failing one wins over a passing one).
        var systemServices: SystemServicesVerdict?
        /// Responses that offered HTTP/3, and the latest offer.
        var http3Responses = 0
        var http3: HTTP3Advertisement?

        init(host: String) { self.host = host }

        var loadList: [ObservedLoad] { loadOrder.compactMap { loads[$0] } }

        /// Counts `record` and keeps its load, verdict and TLS set when they are new (within the caps).
        /// Returns how a record with the same signature is to be counted, and whether a load was kept.
        mutating func add(
            _ record: RequestRecord, load: ObservedLoad?
        ) -> (classification: Classification, newLoad: Bool) {
            let kind = load?.kind ?? ObservedLoad.kind(of: record)
            var newLoad = false
            if let load {
                let scheme = load.target.scheme.rawValue
                if !schemes.contains(scheme) { schemes.append(scheme) }
                let key = [
                    scheme, load.target.host, "\(load.target.port)", load.source.rawValue, kind.rawValue,
                    load.code ?? "", load.serverVersion?.rawValue ?? "", load.cipher ?? "", "\(load.needs)",
                ].joined(separator: "|")
                if loads[key] == nil && loadOrder.count < SessionReport.maximumLoadsPerHost {
                    loads[key] = load
                    loadOrder.append(key)
                    newLoad = true
                }
            }
            if !sources.contains(record.source.rawValue) { sources.append(record.source.rawValue) }
            if let route = record.route?.rawValue, !routes.contains(route) { routes.append(route) }
            let code = ObservedLoad.code(of: record)
            let outcome = LoadOutcome(record)
            let verdictKey = "\(record.result.rawValue)|\(outcome.rawValue)|\(code ?? "")|\(record.rule)"
            var verdict = verdictIndex[verdictKey]
            if verdict == nil && verdicts.count < SessionReport.maximumVerdictsPerHost {
                verdicts.append(
                    VerdictSummary(
                        result: record.result.rawValue, outcome: outcome, code: code, kind: kind, count: 0,
                        rule: record.rule, fix: record.fix, exampleURL: record.url, exampleRoute: record.route?.rawValue
                    ))
                verdict = verdicts.count - 1
                verdictIndex[verdictKey] = verdict
            }
            if let verdict = record.systemServices, systemServices == nil || systemServices?.outcome != verdict.outcome,
                systemServices?.outcome != .fail
            {
                systemServices = verdict
            }
            var tlsIndex: Int?
            if let facts = record.tls {
                let observation = TLSObservation(
                    version: facts["version"], cipher: facts["cipher"], keyExchange: facts["keyExchange"],
                    group: facts["group"], leaf: facts["leaf"], leafKey: facts["leafKey"],
                    leafSignature: facts["leafSignature"],
                    chainLength: facts["chainLength"], alpn: facts["alpn"], count: 0)
                tlsIndex = tls.firstIndex { Self.sameFacts($0, observation) }
                if tlsIndex == nil && tls.count < SessionReport.maximumTLSSetsPerHost {
                    tls.append(observation)
                    tlsIndex = tls.count - 1
                }
            }
            let classification = Classification(
                host: host, admitted: true, violation: false, kind: kind, isHTTP: load?.target.scheme == .http,
                verdictIndex: verdict, tlsIndex: tlsIndex)
            count(record, classification)
            return (classification, newLoad)
        }

        /// Moves the counters for `record`, classified as `classification` (by `add`, for this record
        /// or for an earlier one with the same signature).
        mutating func count(_ record: RequestRecord, _ classification: Classification) {
            requests += 1
            bytesFromClient += max(0, record.bytesFromClient)
            bytesToClient += max(0, record.bytesToClient)
            if record.durationMilliseconds.isFinite { durationMilliseconds += max(0, record.durationMilliseconds) }
            outcomes[LoadOutcome(record), default: 0] += 1
            switch record.result {
            case .completed: allowed += 1
            case .blockedCleartext, .refused: blocked += 1
            case .failed, .clientUntrustedCA: failed += 1
            case .challengeRefused, .challengeAccepted:
                preconditionFailure("HostAccumulator.count: a \(record.result.rawValue) record is never an ATS load")
            case .reported: reported += 1
            }
            if classification.kind == .violation { violations += 1 }
            if classification.isHTTP { http += 1 }
            if let index = classification.verdictIndex { verdicts[index].count += 1 }
            if let index = classification.tlsIndex { tls[index].count += 1 }
            if let offer = record.http3 {
                http3Responses += 1
                http3 = offer
            }
        }

        static func sameFacts(_ lhs: TLSObservation, _ rhs: TLSObservation) -> Bool {
            var left = lhs
            left.count = rhs.count
            return left == rhs
        }

        func report() -> HostReport {
            let ordered = verdicts.enumerated().sorted { lhs, rhs in
                if lhs.element.kind != rhs.element.kind { return lhs.element.kind > rhs.element.kind }
                if lhs.element.count != rhs.element.count { return lhs.element.count > rhs.element.count }
                return lhs.offset < rhs.offset
            }.map(\.element)
            let status = ordered.map(\.kind).max() ?? .ok
            let worst = ordered.first { $0.kind != .ok }
            var needs = HostNeeds(
                cleartext: false, minimumTLSVersion: nil, forwardSecrecyWaiver: false, assumptions: [], unfixable: [])
            var minimum: TLSProtocolVersion?
            for load in loadList {
                needs.cleartext = needs.cleartext || load.needs.cleartext
                needs.forwardSecrecyWaiver = needs.forwardSecrecyWaiver || load.needs.forwardSecrecyWaiver
                if let version = load.needs.minimumTLSVersion.flatMap(TLSProtocolVersion.init(plistString:)) {
                    minimum = min(minimum ?? version, version)
                }
                for text in load.needs.assumptions where !needs.assumptions.contains(text) {
                    needs.assumptions.append(text)
                }
                for text in load.needs.unfixable where !needs.unfixable.contains(text) { needs.unfixable.append(text) }
            }
            needs.minimumTLSVersion = minimum?.rawValue
            let schemeOrder = ["http", "https"].filter { schemes.contains($0) }
            return HostReport(
                host: host, status: status, requests: requests, allowed: allowed, blocked: blocked, failed: failed,
                reported: reported, violations: violations, outcomes: State.words(outcomes),
                bytesFromClient: bytesFromClient,
                bytesToClient: bytesToClient,
                durationMilliseconds: durationMilliseconds, schemes: schemeOrder, sources: sources, routes: routes,
                verdicts: ordered, tls: tls, failedRule: worst?.rule, fix: worst?.fix, needs: needs,
                systemServices: systemServices,
                http3: http3.map {
                    HostHTTP3(responses: http3Responses, alternatives: $0.alternatives, note: HTTP3Advertisement.note)
                })
        }
    }
}

extension SessionReport {
    /// The fields of a record that everything `State.add` derives from it depends on, apart from the
    /// counters (sizes, duration): two records with equal signatures get the same host, load,
    /// verdict and TLS set, so the second is only counted.
    struct RecordSignature: Hashable, Sendable {
        let url: String
        let source: RequestSource
        let result: RequestRecord.Result
        let atsRequired: Bool
        let errorCode: Int?
        let streamError: StreamError?
        let rule: String
        let fix: String?
        let tls: [String: String]?
        let route: ProxyRoute?

        init(_ record: RequestRecord) {
            url = record.url
            source = record.source
            result = record.result
            atsRequired = record.atsRequired
            errorCode = record.errorCode
            streamError = record.streamError
            rule = record.rule
            fix = record.fix
            tls = record.tls
            route = record.route
        }
    }

    /// How a record of a known signature is counted: the host it went to (and whether that host is
    /// analysed or beyond the host cap), its kind, and where its verdict and TLS set sit in the
    /// host's lists (nil when a cap kept them out; caps never free a place, so that stays true).
    struct Classification: Sendable {
        let host: String
        let admitted: Bool
        var violation: Bool
        let kind: HostStatus
        let isHTTP: Bool
        let verdictIndex: Int?
        let tlsIndex: Int?
    }
}
