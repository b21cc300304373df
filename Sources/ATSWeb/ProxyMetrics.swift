import ATSProxyCore
import CoreMetrics
import Foundation
import Prometheus
import Synchronization

/// The proxy's Prometheus metrics, served as `/metrics` on the `--web` listener. Created only with `--web`
/// (the proxy's record observer then feeds it beside the flow ring), so a proxy without the web view touches no
/// metric object. Counters and the latency histogram go through swift-metrics' API into a registry of this
/// session's own (not the process-wide bootstrap); the open-connection gauge is read when scraped.
///
/// Series (all prefixed `ats_proxy_`):
/// - `requests_total{outcome, route}`: finished requests by `LoadOutcome` (its slug: `allowed`,
///   `allowed-by-exception`, `blocked`, `network-error`, …) and `ProxyRoute` (`absolute-form`, `CONNECT+TLS`,
///   `CONNECT+HTTP`, …; `local` for the proxy's own onboarding host);
/// - `ats_violations_total{code}`: loads that broke ATS (`LoadOutcome.breaksATS`) by NSURLError code (`-1022`,
///   `-1200 [3:-9836]`);
/// - `handshake_failures_total{kind}`: TLS failures by code, and `client-untrusted-ca` for clients that refused
///   the proxy's certificate;
/// - `challenge_findings_total` and `challenge_passes_total` (`--challenge`);
/// - `request_duration_seconds`: a histogram of request durations;
/// - `open_connections`: client connections open now.
///
/// Thread-safe: recording takes one lock to find (or make once) the counters of a label set.
public final class ProxyMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let counters = Mutex<[String: CoreMetrics.Counter]>([:])
    private let duration: CoreMetrics.Timer
    private let openConnections: Prometheus.Gauge
    private let connectionCount = Mutex<(@Sendable () -> Int)?>(nil)

    /// Request-duration buckets, in seconds: 5 ms to 30 s.
    public static let durationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        .seconds(30),
    ]

    public init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = Self.durationBuckets
        self.registry = registry
        self.factory = factory
        duration = CoreMetrics.Timer(label: "ats_proxy_request_duration_seconds", factory: factory)
        openConnections = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                namespace: "ats_proxy", metricName: "open_connections", unitName: "",
                helpText: "Client connections the proxy has open now."))
    }

    /// Tells the metrics how to count the open client connections (read at each scrape).
    public func setConnectionCount(_ count: @escaping @Sendable () -> Int) {
        connectionCount.withLock { $0 = count }
    }

    /// Counts one finished request.
    public func record(_ record: RequestRecord) {
        let outcome = LoadOutcome(record)
        increment("ats_proxy_requests_total", [("outcome", outcome.slug), ("route", Self.route(of: record))])
        if LoadOutcome.breaksATS(record) {
            increment("ats_proxy_ats_violations_total", [("code", LoadOutcome.code(of: record) ?? "none")])
        }
        switch outcome {
        case .challengeFinding:
            increment("ats_proxy_challenge_findings_total", [])
        case .challengePassed:
            increment("ats_proxy_challenge_passes_total", [])
        case .allowed, .allowedByException, .blocked, .failed, .networkError, .reported, .passthrough, .ignored:
            break
        }
        if let kind = Self.handshakeFailureKind(record) {
            increment("ats_proxy_handshake_failures_total", [("kind", kind)])
        }
        if record.durationMilliseconds.isFinite && record.durationMilliseconds >= 0 {
            duration.recordNanoseconds(Int64(record.durationMilliseconds * 1_000_000))
        }
    }

    /// The exposition text (Prometheus text format 0.0.4) of every series.
    public func exposition() -> [UInt8] {
        openConnections.set(Double(connectionCount.withLock { $0 }?() ?? 0))
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }

    /// How the request reached the proxy, for the `route` label: `local` for the proxy's own onboarding host,
    /// else the record's `ProxyRoute` (`unknown` for a record without one). The one place the label is derived.
    static func route(of record: RequestRecord) -> String {
        if record.host == OnboardingSite.host { return "local" }
        return record.route?.rawValue ?? "unknown"
    }

    /// The kind of a failed TLS handshake: its code (`-1200 [3:-9836]`, `-1202`), or `client-untrusted-ca`; nil
    /// for anything else.
    static func handshakeFailureKind(_ record: RequestRecord) -> String? {
        if record.result == .clientUntrustedCA { return "client-untrusted-ca" }
        guard record.result == .failed, let code = record.errorCode, (-1206 ... -1200).contains(code) else {
            return nil
        }
        return LoadOutcome.code(of: record)
    }

    private func increment(_ name: String, _ labels: [(String, String)]) {
        let key = ([name] + labels.map { "\($0.0)=\($0.1)" }).joined(separator: "\u{1F}")
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(label: name, dimensions: labels, factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }
}
