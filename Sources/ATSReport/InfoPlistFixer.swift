import ATSPolicy
import Foundation

/// Merges a session's minimal dictionary into an app's Info.plist: `ats-proxy fix`. Only relaxes what the
/// session decided: adds exception domains and the keys each needs (a lower `NSExceptionMinimumTLSVersion`, cleartext,
/// the forward-secrecy waiver, `NSAllowsLocalNetworking`), never removes a key and keeps every other key of the
/// plist. Reads and writes with `PropertyListSerialization` in the file's own format (XML stays XML, binary
/// stays binary); an XML result gains the App Review justification of each key it added, as comments.
public struct InfoPlistFixer: Sendable {
    /// A plist that cannot be read or written.
    public struct FixError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The merged plist: its bytes in the original format, an XML rendering of before and after for the diff,
    /// and what changed.
    public struct Fixed: Sendable {
        public let data: Data
        public let format: PropertyListSerialization.PropertyListFormat
        public let beforeXML: String
        public let afterXML: String
        /// One line per key added or changed (`NSExceptionDomains › old.example.com › NSExceptionMinimumTLSVersion`).
        public let changes: [String]
    }

    public let minimal: MinimalDictionary

    public init(minimal: MinimalDictionary) { self.minimal = minimal }

    /// Merges the minimal dictionary into the plist `data`.
    public func fix(_ data: Data) throws -> Fixed {
        var format = PropertyListSerialization.PropertyListFormat.xml
        let parsed: Any
        do {
            parsed = try PropertyListSerialization.propertyList(from: data, options: [], format: &format)
        } catch {
            throw FixError(description: "not a property list: \(error.localizedDescription)")
        }
        guard var root = parsed as? [String: Any] else {
            throw FixError(description: "the root of the property list is not a dictionary")
        }
        var changes: [String] = []
        var ats = root[ATSKey.root] as? [String: Any] ?? [:]
        if root[ATSKey.root] != nil && !(root[ATSKey.root] is [String: Any]) {
            throw FixError(description: "\(ATSKey.root) is not a dictionary; fix it by hand first")
        }
        if minimal.allowsLocalNetworking, (ats[ATSKey.allowsLocalNetworking] as? Bool) != true {
            ats[ATSKey.allowsLocalNetworking] = true
            changes.append("\(ATSKey.allowsLocalNetworking) = YES")
        }
        if !minimal.entries.isEmpty {
            var domains = ats[ATSKey.exceptionDomains] as? [String: Any] ?? [:]
            for entry in minimal.entries {
                let existingKey = domains.keys.first { Self.sameDomain($0, entry.key) } ?? entry.key
                var domain = domains[existingKey] as? [String: Any] ?? [:]
                let place = "\(ATSKey.exceptionDomains) › \(existingKey)"
                if entry.includesSubdomains, (domain[ATSKey.includesSubdomains] as? Bool) != true {
                    domain[ATSKey.includesSubdomains] = true
                    changes.append("\(place) › \(ATSKey.includesSubdomains) = YES")
                }
                if entry.allowsInsecureHTTPLoads, (domain[ATSKey.exceptionAllowsInsecureHTTPLoads] as? Bool) != true {
                    domain[ATSKey.exceptionAllowsInsecureHTTPLoads] = true
                    changes.append("\(place) › \(ATSKey.exceptionAllowsInsecureHTTPLoads) = YES")
                }
                if let wanted = entry.minimumTLSVersion.flatMap(TLSProtocolVersion.init(plistString:)) {
                    let current = (domain[ATSKey.exceptionMinimumTLSVersion] as? String).flatMap(
                        TLSProtocolVersion.init(plistString:))
                    if current.map({ wanted < $0 }) ?? true {
                        domain[ATSKey.exceptionMinimumTLSVersion] = wanted.rawValue
                        changes.append("\(place) › \(ATSKey.exceptionMinimumTLSVersion) = \(wanted.rawValue)")
                    }
                }
                if entry.requiresForwardSecrecy == false,
                    (domain[ATSKey.exceptionRequiresForwardSecrecy] as? Bool) != false
                {
                    domain[ATSKey.exceptionRequiresForwardSecrecy] = false
                    changes.append("\(place) › \(ATSKey.exceptionRequiresForwardSecrecy) = NO")
                }
                domains[existingKey] = domain
            }
            ats[ATSKey.exceptionDomains] = domains
        }
        root[ATSKey.root] = ats
        let before = try Self.xml(parsed)
        var after = try Self.xml(root)
        let output: Data
        if format == .xml {
            after = annotate(after)
            output = Data(after.utf8)
        } else {
            do {
                output = try PropertyListSerialization.data(fromPropertyList: root, format: format, options: 0)
            } catch {
                throw FixError(description: "cannot write the property list: \(error.localizedDescription)")
            }
        }
        return Fixed(data: output, format: format, beforeXML: before, afterXML: after, changes: changes)
    }

    /// Exception-domain keys name the same domain when they differ only in case or a trailing dot.
    static func sameDomain(_ lhs: String, _ rhs: String) -> Bool {
        func normal(_ key: String) -> String {
            var lowered = key.lowercased()
            if lowered.hasSuffix(".") { lowered.removeLast() }
            return lowered
        }
        return normal(lhs) == normal(rhs)
    }

    /// `value` as an XML plist.
    static func xml(_ value: Any) throws -> String {
        do {
            let data = try PropertyListSerialization.data(fromPropertyList: value, format: .xml, options: 0)
            return String(decoding: data, as: UTF8.self)
        } catch {
            throw FixError(description: "cannot write the property list: \(error.localizedDescription)")
        }
    }

    /// The XML with the App Review justification of each entry's keys as comments above the entry's key inside
    /// `NSExceptionDomains` (the only place the minimal dictionary's keys live).
    func annotate(_ xml: String) -> String {
        var lines = xml.components(separatedBy: "\n")
        guard
            let start = lines.firstIndex(where: {
                $0.trimmingCharacters(in: .whitespaces) == "<key>\(ATSKey.exceptionDomains)</key>"
            })
        else { return xml }
        for entry in minimal.entries where !entry.justifications.isEmpty {
            let key = "<key>\(PlistFragmentWriter.escape(entry.key))</key>"
            guard let index = lines[start...].firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == key })
            else { continue }
            let indent = String(lines[index].prefix { $0 == "\t" || $0 == " " })
            let notes = entry.justifications.map { indent + PlistFragmentWriter.comment($0) }
            lines.insert(contentsOf: notes, at: index)
        }
        return lines.joined(separator: "\n")
    }
}
