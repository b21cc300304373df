import Foundation
import Synchronization

/// Which hosts the proxy leaves alone, with mitmproxy's semantics: regular expressions searched
/// (unanchored, case-insensitive) in `host:port`. Traffic to an ignored host is tunnelled (CONNECT)
/// or forwarded (plain HTTP) as it is: not intercepted, not judged, not logged or counted as a
/// request; only the number of such connections and their hosts is kept, for the summary and the
/// report.
///
/// Shared by every session of a proxy. The compiled expressions are immutable (NSRegularExpression
/// is safe to use from several threads); the counters sit behind a mutex.
public final class HostFilter: @unchecked Sendable {
    /// What the patterns mean.
    public enum Mode: Sendable, Equatable {
        /// Every host is intercepted and judged.
        case none
        /// Hosts matching any pattern are ignored (`--ignore-hosts`).
        case ignore
        /// Only hosts matching a pattern are intercepted and judged (`--allow-hosts`).
        case allow
    }

    /// A pattern that is not a valid regular expression.
    public struct PatternError: Error, CustomStringConvertible, Sendable {
        public let pattern: String
        public let reason: String
        public var description: String { "'\(pattern)' is not a valid regular expression: \(reason)" }
    }

    /// Connections (CONNECT tunnels and plain requests) left alone so far, and their distinct hosts.
    public struct Ignored: Sendable, Equatable {
        public var connections = 0
        public var hosts = 0

        public init(connections: Int = 0, hosts: Int = 0) {
            self.connections = connections
            self.hosts = hosts
        }
    }

    /// Regular expressions for the background traffic of operating systems and browsers (Apple
    /// services, Chrome and Google update and safe-browsing endpoints, Firefox and Edge services),
    /// which `--ignore-background` adds to the ignore list.
    public static let backgroundServices: [String] = [
        #"(^|\.)(apple|icloud|icloud-content|mzstatic|apple-cloudkit|cdn-apple|aaplimg|apple-dns)\.(com|net|cn):"#,
        #"(^|\.)(update|safebrowsing|optimizationguide-pa|content-autofill|clientservices)\.googleapis\.com:"#,
        #"(^|\.)(clients[0-9]*|accounts|update|tools)\.google\.com:"#, #"(^|\.)gvt1\.com:"#,
        #"(^|\.)(mozilla\.(com|net|org)|firefox\.com|mozaws\.net|mozgcp\.net):"#,
        #"(^|\.)(edge|config\.edge\.skype|smartscreen|nav\.smartscreen)\.microsoft\.com:"#, #"(^|\.)msedge\.net:"#,
    ]

    public let mode: Mode
    public let patterns: [String]
    private let expressions: [NSRegularExpression]
    private let counters = Mutex<(connections: Int, hosts: Set<String>)>((0, []))

    /// No filtering.
    public convenience init() {
        // An empty pattern list cannot fail to compile.
        try! self.init(mode: .none, patterns: [])
    }

    /// Compiles `patterns`; throws ``PatternError`` naming the first invalid one.
    public init(mode: Mode, patterns: [String]) throws {
        self.mode = patterns.isEmpty ? .none : mode
        self.patterns = patterns
        expressions = try patterns.map { pattern in
            do {
                return try NSRegularExpression(pattern: pattern, options: [.caseInsensitive])
            } catch {
                throw PatternError(pattern: pattern, reason: "\(error.localizedDescription)")
            }
        }
    }

    /// Whether traffic to `host:port` is left alone.
    public func ignores(host: String, port: Int) -> Bool {
        switch mode {
        case .none: return false
        case .ignore: return matches(host: host, port: port)
        case .allow: return !matches(host: host, port: port)
        }
    }

    /// Whether a pattern matches `host:port` (false without patterns), whatever the mode: for option lists that
    /// share the filters' syntax (`--system-services-hosts`).
    public func matchesPattern(host: String, port: Int) -> Bool {
        !expressions.isEmpty && matches(host: host, port: port)
    }

    private func matches(host: String, port: Int) -> Bool {
        let subject = "\(host):\(port)"
        let range = NSRange(subject.startIndex..., in: subject)
        return expressions.contains { $0.firstMatch(in: subject, range: range) != nil }
    }

    /// Counts one connection (or plain request) left alone.
    public func countIgnored(host: String) {
        counters.withLock { counters in
            counters.connections += 1
            counters.hosts.insert(host.lowercased())
        }
    }

    /// What was left alone so far.
    public var ignored: Ignored {
        counters.withLock { Ignored(connections: $0.connections, hosts: $0.hosts.count) }
    }
}
