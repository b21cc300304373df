import ATSTLS
import Foundation

/// `--system-services-hosts`: the hosts whose upstream handshakes are also judged by the iOS/macOS 27
/// system-services profile (`SystemServicesProfile`), apart from the app's ATS verdict. Patterns have the
/// host filters' syntax: regular expressions searched, case-insensitively, in `host:port`.
///
/// The verdict is made once per upstream handshake. It rides with the connection's TLS facts under
/// `factKey` (so that requests on a reused or pooled connection carry it too) and is lifted out into the
/// record's own `systemServices` field when the record is made (`split`).
public struct SystemServicesSetting: Sendable {
    /// The reserved TLS-facts key the encoded verdict travels under; never shown as a TLS fact.
    public static let factKey = "_systemServices"

    public let hosts: HostFilter
    public let profile: SystemServicesProfile

    public init(hosts: HostFilter, profile: SystemServicesProfile) {
        self.hosts = hosts
        self.profile = profile
    }

    /// Whether `host:port` is a system-services host.
    public func applies(host: String, port: Int) -> Bool { hosts.matchesPattern(host: host, port: port) }

    /// `facts` with `verdict` encoded under `factKey`.
    static func adding(_ verdict: SystemServicesVerdict, to facts: [String: String]?) -> [String: String]? {
        guard var facts, let data = try? JSONEncoder().encode(verdict) else { return facts }
        facts[factKey] = String(decoding: data, as: UTF8.self)
        return facts
    }

    /// The TLS facts without the encoded verdict, and the verdict they carried (if any).
    static func split(_ facts: [String: String]?) -> (tls: [String: String]?, verdict: SystemServicesVerdict?) {
        guard var facts, let encoded = facts.removeValue(forKey: factKey) else { return (facts, nil) }
        return (facts, try? JSONDecoder().decode(SystemServicesVerdict.self, from: Data(encoded.utf8)))
    }
}
