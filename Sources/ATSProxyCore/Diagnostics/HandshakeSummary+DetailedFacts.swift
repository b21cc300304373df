import ATSTLS
import Foundation

extension HandshakeSummary {
    /// The facts the live view and the HAR show beyond the log's (`--web`/`--har` ask for them
    /// through `ProxySettings.detailedTLSFacts`): key-exchange group, the server's signature hash,
    /// the presented chain (subject, key, signature, expiry), the leaf's names and validity, SCTs,
    /// the trust anchor, OCSP stapling and resumption. Flat strings, like the rest of a record's TLS
    /// facts; multi-line values are one line per certificate. Computed once per upstream handshake.
    public var detailedFacts: [String: String] {
        var facts: [String: String] = [:]
        if let group { facts["group"] = group }
        if let peerSignatureDigest { facts["serverSignatureHash"] = peerSignatureDigest }
        let day = Date.ISO8601FormatStyle().year().month().day()
        facts["chain"] = presentedChain.enumerated().map { index, certificate in
            "\(index): \(certificate.subject) (\(certificate.key), \(certificate.signatureAlgorithm), expires "
                + "\(certificate.notAfter.formatted(day)))"
        }.joined(separator: "\n")
        if let leaf {
            let names = leaf.dnsNames + leaf.ipAddresses
            facts["leafNames"] = names.isEmpty ? "(no subjectAltName)" : names.joined(separator: ", ")
            facts["leafValidity"] =
                "\(leaf.notBefore.formatted(day)) to \(leaf.notAfter.formatted(day)) (\(Int(leaf.validityDays.rounded())) days)"
        }
        if scts.isEmpty {
            facts["scts"] = ctLogsAvailable ? "none" : "none (no CT log list loaded)"
        } else {
            facts["scts"] = scts.map { "\($0.source.rawValue) \($0.status.rawValue)" }.joined(separator: ", ")
        }
        if let anchor { facts["anchor"] = anchor.rawValue }
        if ocspStapleBytes > 0 { facts["ocspStaple"] = "\(ocspStapleBytes) bytes" }
        if resumedSession { facts["resumed"] = "yes (certificate facts from the full handshake)" }
        return facts
    }
}
