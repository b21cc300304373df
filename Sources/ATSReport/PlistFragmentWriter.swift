import ATSPolicy
import Foundation

/// Writes the minimal dictionary as an Info.plist XML fragment ready to paste:
/// `<key>NSAppTransportSecurity</key><dict>…</dict>`, one tab per level as Xcode writes it, with
/// the App Review note of each key as an XML comment above it.
enum PlistFragmentWriter {
    static func fragment(_ entries: [MinimalEntry], allowsLocalNetworking: Bool) -> String {
        var lines: [String] = ["<key>\(ATSKey.root)</key>", "<dict>"]
        if entries.isEmpty && !allowsLocalNetworking {
            lines.append(
                "\t"
                    + comment(
                        "The observed traffic needs no exception: full ATS (the empty dictionary) allows all of it."))
        }
        if allowsLocalNetworking {
            lines.append(
                "\t" + comment("NSAllowsLocalNetworking: no App Review justification needed; local hosts were used."))
            lines.append("\t<key>\(ATSKey.allowsLocalNetworking)</key>")
            lines.append("\t<true/>")
        }
        if !entries.isEmpty {
            lines.append("\t<key>\(ATSKey.exceptionDomains)</key>")
            lines.append("\t<dict>")
            for entry in entries {
                lines.append("\t\t<key>\(escape(entry.key))</key>")
                lines.append("\t\t<dict>")
                func note(_ key: String) {
                    for text in entry.justifications where text.hasPrefix(key + ":") {
                        lines.append("\t\t\t" + comment(text))
                    }
                }
                if entry.includesSubdomains {
                    note(ATSKey.includesSubdomains)
                    lines.append("\t\t\t<key>\(ATSKey.includesSubdomains)</key>")
                    lines.append("\t\t\t<true/>")
                }
                if entry.allowsInsecureHTTPLoads {
                    note(ATSKey.exceptionAllowsInsecureHTTPLoads)
                    lines.append("\t\t\t<key>\(ATSKey.exceptionAllowsInsecureHTTPLoads)</key>")
                    lines.append("\t\t\t<true/>")
                }
                if let version = entry.minimumTLSVersion {
                    note(ATSKey.exceptionMinimumTLSVersion)
                    lines.append("\t\t\t<key>\(ATSKey.exceptionMinimumTLSVersion)</key>")
                    lines.append("\t\t\t<string>\(escape(version))</string>")
                }
                if entry.requiresForwardSecrecy == false {
                    note(ATSKey.exceptionRequiresForwardSecrecy)
                    lines.append("\t\t\t<key>\(ATSKey.exceptionRequiresForwardSecrecy)</key>")
                    lines.append("\t\t\t<false/>")
                }
                lines.append("\t\t</dict>")
            }
            lines.append("\t</dict>")
        }
        lines.append("</dict>")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Reads a fragment back the way Xcode would: wrapped in a plist root and parsed by
    /// `PropertyListSerialization`; returns the `NSAppTransportSecurity` value.
    static func parse(_ fragment: String) -> PlistValue? {
        let document =
            #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n" + #"<plist version="1.0">"# + "\n<dict>\n" + fragment
            + "</dict>\n</plist>\n"
        guard let object = try? PropertyListSerialization.propertyList(from: Data(document.utf8), format: nil)
        else { return nil }
        return PlistValue(foundation: object).dictionaryValue?[ATSKey.root]
    }

    /// An XML comment; `--` is not allowed inside one, and the text must not end with `-`.
    static func comment(_ text: String) -> String {
        var body = text.replacingOccurrences(of: "--", with: "- -")
        while body.hasSuffix("-") { body.removeLast() }
        return "<!-- \(body) -->"
    }

    /// Escapes text for XML element content and attribute values, dropping characters XML 1.0
    /// cannot carry.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            default:
                let value = scalar.value
                if value < 0x20 || (0xFFFE...0xFFFF).contains(value) { continue }
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
