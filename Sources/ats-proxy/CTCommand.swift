import ATSProxyIO
import ATSTLS
import ArgumentParser
import Foundation

/// `ats-proxy ct …`: fetch and show Apple's Certificate Transparency log list.
struct CTCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ct", abstract: "Keep Apple's Certificate Transparency log list (used by run, exec and diagnose).",
        subcommands: [CTUpdateCommand.self, CTStatusCommand.self])
}

/// `ats-proxy ct update [--url URL | --from FILE]`: downloads (or installs) Apple's log list, validates
/// it, and caches it beside the CA. A list that does not validate is refused and the cache is kept.
struct CTUpdateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Download Apple's current CT log list (or install one from a file) into the per-user CA directory.",
        discussion: """
            The list is validated before it replaces the cached one: JSON in Apple's layout, every key a \
            SubjectPublicKeyInfo, every log id the SHA-256 of its key. A refused list leaves the cache as it was.
            Exit status: 0 on success, 1 when the download failed or the list was refused, 2 on usage errors.
            """)

    @Option(name: .long, help: "Where to download the list (default: the list Apple's ct-policy.md links to).")
    var url: String = CTLogListCache.appleListURL

    @Option(name: .long, help: "Install this list file instead of downloading (offline machines).")
    var from: String?

    @Option(name: .long, help: "Extra trusted root (PEM) for the download server (repeatable; for tests).")
    var upstreamCa: [String] = []

    @Option(name: .long, help: "HOST:PORT:ADDR, as curl's --resolve (repeatable).")
    var resolve: [String] = []

    @Option(name: .long, help: "Seconds allowed for the download's connection, handshake and each read.")
    var timeout: Double = 30

    @OptionGroup var ca: CAOptions

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    func run() throws {
        let cache: CTLogListCache
        let data: Data
        let source: String
        do {
            cache = CTLogListCache(directory: try CTLogSelection.directory(ca))
            if let from {
                guard let contents = FileManager.default.contents(atPath: from) else {
                    throw CertificateAuthorityError(path: from, problem: "cannot read")
                }
                (data, source) = (contents, URL(fileURLWithPath: from).standardizedFileURL.path)
            } else {
                var overrides = ResolverOverrides()
                for entry in resolve { try overrides.addResolve(entry) }
                let downloader = CTListDownloader(
                    trust: try TrustStore(systemRoots: true, extraAnchorFiles: upstreamCa), overrides: overrides,
                    timeout: timeout)
                (data, source) = (try downloader.fetch(url), url)
            }
        } catch {
            FileHandle.standardError.write(Data("ats-proxy: error: \(error)\n".utf8))
            throw ExitCode(1)
        }
        do {
            let list = try cache.install(data, source: source)
            print("Installed Apple's CT log list from \(source)")
            print("  \(list.entries.count) logs from \(list.operators.count) operators, cached in \(cache.listPath)")
        } catch {
            FileHandle.standardError.write(
                Data("ats-proxy: error: \(source): \(error); the cached list was kept\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// `ats-proxy ct status`: the cached list's date, age, logs and operators.
struct CTStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show the cached CT log list: date, age, logs and operators.",
        discussion: "Exit status: 0 when a current list is cached, 1 when none is or it is too old.")

    @Option(name: .long, help: "Days after which a cached list counts as none.")
    var ctMaxAge: Int = CTLogListCache.defaultMaximumAgeDays

    @OptionGroup var ca: CAOptions

    func run() throws {
        let cache: CTLogListCache
        do {
            cache = CTLogListCache(directory: try CTLogSelection.directory(ca))
        } catch {
            exitWithError(error)
        }
        let state = cache.state(maximumAgeDays: ctMaxAge)
        for line in CTLogSelection.statusLines(state, cache: cache, maximumAgeDays: ctMaxAge) { print(line) }
        switch state {
        case .fresh: return
        case .missing, .stale, .unusable: throw ExitCode(1)
        }
    }
}

/// The CT log list a run uses: `--ct-log-list FILE` when given, else the list `ct update` cached beside
/// the CA when it is younger than the maximum age, else none (CT is then "not evaluated").
struct CTLogSelection {
    /// The store SCTs are validated against (nil: CT not evaluated).
    let store: CTLogStore?
    /// What the banner says about it.
    let bannerLine: String

    /// The directory `ct update` caches into: `--ca-dir` (or `$ATS_PROXY_CA_DIR`), else the per-user CA
    /// directory. Nothing is created or migrated here.
    static func directory(_ ca: CAOptions) throws -> String {
        if ca.caDir != nil || ProcessInfo.processInfo.environment["ATS_PROXY_CA_DIR"] != nil {
            return CertificateAuthority.resolveDirectory(explicit: ca.caDir)
        }
        return CADirectoryLocator().userDirectory
    }

    /// The list for a run.
    static func resolve(explicitFile: String?, ca: CAOptions, maximumAgeDays: Int, now: Date = Date()) throws
        -> CTLogSelection
    {
        if let explicitFile {
            let store = try CTLogStore.load(file: explicitFile)
            return CTLogSelection(store: store, bannerLine: "CT: \(store.logCount) logs from \(explicitFile)")
        }
        let cache = CTLogListCache(directory: try directory(ca))
        switch cache.state(now: now, maximumAgeDays: maximumAgeDays) {
        case .fresh(let list, let info, let age):
            return CTLogSelection(
                store: try CTLogStore(list: list),
                bannerLine:
                    "CT: Apple's log list of \(day(info.fetched)) (\(list.entries.count) logs, \(list.operators.count) operators, \(age) days old)"
            )
        case .stale(_, let info, let age):
            return CTLogSelection(
                store: nil,
                bannerLine:
                    "\(CTStatus.notEvaluatedText) (the cached list of \(day(info.fetched)) is \(age) days old; the limit is \(maximumAgeDays))"
            )
        case .missing:
            return CTLogSelection(store: nil, bannerLine: "\(CTStatus.notEvaluatedText) (no CT log list cached)")
        case .unusable(let problem):
            return CTLogSelection(store: nil, bannerLine: "\(CTStatus.notEvaluatedText) (\(problem))")
        }
    }

    /// `ct status` lines.
    static func statusLines(_ state: CTLogListCache.State, cache: CTLogListCache, maximumAgeDays: Int) -> [String] {
        func describe(_ list: CTLogList, _ info: CTLogListCache.Info, _ age: Int) -> [String] {
            var lines = [
                "List: \(cache.listPath)",
                "Fetched: \(ISO8601DateFormatter().string(from: info.fetched)) (\(age) days ago) from \(info.source)",
                "Logs: \(list.entries.count) (\(list.entries.filter { $0.facts.kind == .staticCTAPI }.count) static-ct-api)",
                "Operators: \(list.operators.count)",
            ]
            for name in list.operators {
                let logs = list.entries.filter { $0.facts.operatorName == name }
                let states = logs.map(\.facts.state.name)
                let summary = Set(states).sorted().map { state in "\(states.filter { $0 == state }.count) \(state)" }
                lines.append("  \(name): \(summary.joined(separator: ", "))")
            }
            return lines
        }
        switch state {
        case .missing:
            return ["No CT log list in \(cache.directory). \(CTStatus.notEvaluatedText)"]
        case .unusable(let problem):
            return ["The cached CT log list cannot be used: \(problem). \(CTStatus.notEvaluatedText)"]
        case .fresh(let list, let info, let age):
            return describe(list, info, age) + ["Status: current (counts as none after \(maximumAgeDays) days)"]
        case .stale(let list, let info, let age):
            return describe(list, info, age) + [
                "Status: too old (more than \(maximumAgeDays) days): \(CTStatus.notEvaluatedText)"
            ]
        }
    }

    static func day(_ date: Date) -> String { date.formatted(Date.ISO8601FormatStyle().year().month().day()) }
}
