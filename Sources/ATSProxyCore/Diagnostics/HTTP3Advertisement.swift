/// An origin's offer of HTTP/3 on a response (`Alt-Svc` naming `h3` or a draft `h3-NN`, RFC 7838 and RFC 9114
/// §3.1.1): the record's typed field. Through the proxy the app keeps using TCP (the proxy speaks HTTP/1.1 or
/// HTTP/2 both ways and never intercepts QUIC), but without it URLSession may move that host to QUIC, which is
/// TLS 1.3 only, so the ATS verdict holds; UDP 443 must then be reachable. `note` says so in words.
public struct HTTP3Advertisement: Sendable, Codable, Equatable {
    /// One advertised HTTP/3 alternative.
    public struct Alternative: Sendable, Codable, Equatable {
        /// `h3`, `h3-29`, …
        public var protocolID: String
        /// Where the alternative is (`:443` is the same host on UDP 443).
        public var authority: String
        /// `ma` in seconds (nil: not given, 24 hours).
        public var maxAge: Int?

        public init(protocolID: String, authority: String, maxAge: Int? = nil) {
            self.protocolID = protocolID
            self.authority = authority
            self.maxAge = maxAge
        }
    }

    /// The HTTP/3 alternatives, in the order the origin listed them (never empty).
    public var alternatives: [Alternative]

    /// What the offer means for an app tested through the proxy.
    public static let note =
        "the origin offers HTTP/3 (QUIC): through the proxy the app stays on TCP, but without it URLSession may "
        + "switch to QUIC for this host (TLS 1.3 only, so the ATS verdict holds; UDP 443 must be reachable)"

    public init(alternatives: [Alternative]) {
        self.alternatives = alternatives
    }

    /// The HTTP/3 offer among `headers`' `Alt-Svc` fields; nil when there is none, the value is `clear`, or it is
    /// malformed (ignored whole, as a client does). Without an `Alt-Svc` field this allocates nothing.
    public init?(responseHeaders headers: HTTPFields) {
        guard headers.contains("alt-svc") else { return nil }
        switch AltSvcParser.parse(headers.values("alt-svc").joined(separator: ",")) {
        case .clear, .malformed:
            return nil
        case .alternatives(let all):
            let offered = all.filter { AltSvcParser.isHTTP3($0.protocolID) }.map {
                Alternative(protocolID: $0.protocolID, authority: $0.authority, maxAge: $0.maxAge)
            }
            guard !offered.isEmpty else { return nil }
            alternatives = offered
        }
    }

    /// `h3=":443"; ma=86400, h3-29=":443"`: the offer in one line.
    public var summary: String {
        alternatives.map { alternative in
            "\(alternative.protocolID)=\"\(alternative.authority)\"" + (alternative.maxAge.map { "; ma=\($0)" } ?? "")
        }.joined(separator: ", ")
    }
}
