import ATSPolicy
import ATSProxyCore
import ATSProxyIO
import ATSReport
import ATSTLS
import ATSWeb
import Foundation

/// What `ObservationOptions` switched on for one running proxy: the TLS key log handed to both TLS
/// contexts, the flow ring that feeds the live page and the HAR, and the web server.
///
/// Built before the proxy starts (the key log must be attached to the contexts before their first
/// handshake); `startWeb` runs once the proxy is listening. Immutable after `startWeb`; the flow
/// store and web server are thread-safe themselves.
final class SessionObservation: @unchecked Sendable {
    let keyLog: TLSKeyLog?
    /// The ring of flows, when the page or the HAR needs one (nil: nothing is recorded).
    let store: FlowStore?
    /// The Prometheus metrics of `/metrics`, only with `--web` (nil: no metric is ever touched).
    let metrics: ProxyMetrics?
    let harPath: String?
    private let webAddress: ListenAddress?
    private let allowSecrets: Bool
    private var web: WebServer?
    /// The web view's bound address, once started.
    private(set) var webBound: SocketAddress?

    /// Opens the key log and creates the flow ring as the options ask. Returns nil when nothing
    /// was asked for, so that the proxy carries no trace of this feature.
    static func make(_ options: ObservationOptions, allowSecrets: Bool) throws -> SessionObservation? {
        let keyLogPath = options.keyLogPath
        guard keyLogPath != nil || options.keepsFlows else { return nil }
        let keyLog: TLSKeyLog?
        do {
            keyLog = try keyLogPath.map { try TLSKeyLog(path: $0) }
        } catch {
            throw CLIError.usage("--keylog: \(error)")
        }
        if let har = options.har { try Self.checkWritable(har) }
        return SessionObservation(
            keyLog: keyLog, store: options.keepsFlows ? FlowStore(capacity: options.webFlows) : nil,
            metrics: options.web != nil ? ProxyMetrics() : nil,
            harPath: options.har, webAddress: options.web.flatMap(ListenAddress.init(parsing:)),
            allowSecrets: allowSecrets)
    }

    private init(
        keyLog: TLSKeyLog?, store: FlowStore?, metrics: ProxyMetrics?, harPath: String?, webAddress: ListenAddress?,
        allowSecrets: Bool
    ) {
        self.keyLog = keyLog
        self.store = store
        self.metrics = metrics
        self.harPath = harPath
        self.webAddress = webAddress
        self.allowSecrets = allowSecrets
    }

    /// The HAR of the flows in the ring.
    func harData() -> Data {
        let builder = HARBuilder(allowSecrets: allowSecrets, creatorVersion: ATSProxyVersion.text)
        return (try? builder.data(store?.flows() ?? [])) ?? Data()
    }

    /// Starts the web view (when asked) on an event loop of its own, of the proxy's backend.
    /// - Parameters:
    ///   - report: the `--report` session report, fed on the request path already; without one the
    ///     page's dictionary and report downloads come from a report of its own, fed from the ring
    ///     on the web loop when asked for, so that the page adds nothing to the request path.
    ///   - makeReport: an empty report under the loaded policy (used when `report` is nil).
    ///   - autoConfig: `/proxy.pac` on the web view (its listener addresses are set once the proxy is bound).
    ///   - ignored: the host filter's count of connections left alone so far, which the downloads show as
    ///     the report written at exit does.
    ///   - recheck: the upstream check `/api/verify` runs again for a TLS failure (as `ats-proxy verify` does); nil:
    ///     the page has no verify action.
    func startWeb(
        report: SessionReport?, makeReport: @escaping @Sendable () -> SessionReport,
        ignored: @escaping @Sendable () -> HostFilter.Ignored, title: String, caPEM: [UInt8],
        allowList: ClientAllowList?, backend: EventLoopBackend, autoConfig: WebAutoConfig? = nil,
        recheck: (@Sendable (RequestTarget, PolicyContext) -> UpstreamVerdict)? = nil
    ) throws {
        guard let webAddress, let store else { return }
        let source =
            report.map(ReportSource.shared) ?? ReportSource.fromRing(RingReport(store: store, report: makeReport()))
        let report: @Sendable () -> SessionReport = {
            let current = source.current()
            current.setIgnored(ignored())
            return current
        }
        var configuration = WebServer.Configuration(address: webAddress, allowList: allowList)
        configuration.allowSecrets = allowSecrets
        var content = WebContent(
            title: title, har: { [self] in harData() }, reportJSON: { (try? report().jsonData()) ?? Data() },
            reportHTML: { report().html() }, minimalDictionary: { source.current().minimalDictionaryPlist() },
            caPEM: caPEM)
        content.autoConfig = autoConfig
        content.metrics = metrics
        if let recheck {
            content.verify = { Self.verification(of: report().document(), recheck: recheck) }
        }
        let server = WebServer(configuration: configuration, store: store, content: content, backend: backend)
        do {
            webBound = try server.start()
        } catch {
            throw CLIError.usage("--web \(webAddress): \(error)")
        }
        web = server
    }

    /// `/api/verify`: the session's loads re-decided under its own minimal dictionary, as `ats-proxy verify --format
    /// json` writes them (a JSON object with an `error` when the report cannot be verified).
    static func verification(
        of document: SessionReportDocument,
        recheck: @escaping @Sendable (RequestTarget, PolicyContext) -> UpstreamVerdict
    ) -> Data {
        guard let options = SessionVerifier.options(of: document),
            let configuration = SessionVerifier.minimalConfiguration(of: document)
        else { return Data(#"{"error":"the session's platform or minimal dictionary does not parse"}"#.utf8) }
        let verifier = SessionVerifier(
            document: document, configuration: configuration, options: options, recheck: recheck)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(verifier.verify(candidate: "the session's minimal dictionary"))) ?? Data("{}".utf8)
    }

    /// Writes the HAR (when --har was given); failures are printed, not fatal.
    func writeHAR() {
        guard let harPath else { return }
        do {
            try Data(harData()).write(to: URL(fileURLWithPath: harPath), options: .atomic)
            FileHandle.standardError.write(Data("ats-proxy: HAR written to \(harPath)\n".utf8))
        } catch {
            FileHandle.standardError.write(Data("ats-proxy: error: cannot write the HAR \(harPath): \(error)\n".utf8))
        }
    }

    /// The page's address as a client on this machine types it (a wildcard listener shows as loopback).
    var webURL: String? {
        guard let webBound else { return nil }
        let host = webBound.isWildcard ? (webBound.ip.family == .v6 ? "[::1]" : "127.0.0.1") : "\(webBound)"
        return webBound.isWildcard ? "http://\(host):\(webBound.port)/" : "http://\(host)/"
    }

    /// Lines for the startup banner.
    var bannerLines: [String] {
        var lines: [String] = []
        if let webURL {
            lines.append(
                "  live flows: \(webURL) (keeps the last \(store?.capacity ?? 0)); through the proxy: http://ats-proxy.invalid/flows"
            )
        }
        if let harPath { lines.append("  HAR: \(harPath) (written at exit and on SIGUSR1)") }
        if let keyLog {
            lines.append(
                "  TLS keys of both legs are being written to \(keyLog.path) (anyone with it can decrypt the traffic)")
            if keyLog.isReadableByOthers {
                lines.append("  warning: \(keyLog.path) is readable by other users; chmod 600 it")
            }
        }
        return lines
    }

    /// Fails early when the HAR cannot be written where asked.
    private static func checkWritable(_ path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let parent = directory.isEmpty ? "." : directory
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: parent, isDirectory: &isDirectory), isDirectory.boolValue,
            FileManager.default.isWritableFile(atPath: parent)
        else { throw CLIError.usage("--har \(path): the directory \(parent) does not exist or is not writable") }
    }
}

/// Where the live page's report comes from: the `--report` one, or one of its own fed from the ring.
enum ReportSource: Sendable {
    case shared(SessionReport)
    case fromRing(RingReport)

    /// The report, brought up to date.
    func current() -> SessionReport {
        switch self {
        case .shared(let report): report
        case .fromRing(let ring): ring.current()
        }
    }
}

/// A session report fed lazily from the flow ring: each flow is recorded once, when the page next
/// asks (for its dictionary panel at most once a second, or a download), on the web loop instead of
/// the request path. Flows that left the ring before that are not in it. Thread-safe (a lock around
/// the cursor and the feeding).
final class RingReport: @unchecked Sendable {
    /// Flows copied out of the ring per hold of its lock, so that the proxy's loops recording new
    /// flows never wait for a long copy.
    static let chunk = 256
    private let store: FlowStore
    private let report: SessionReport
    private let lock = NSLock()
    private var cursor = 0

    init(store: FlowStore, report: SessionReport) {
        self.store = store
        self.report = report
    }

    /// The report with every flow recorded before this call (and after the last one).
    func current() -> SessionReport {
        lock.withLock {
            let through = store.newestID
            while cursor < through {
                let flows = store.flows(after: cursor, limit: min(Self.chunk, through - cursor))
                guard let last = flows.last else { break }
                for flow in flows { report.record(flow.record) }
                cursor = last.id
            }
        }
        return report
    }
}
