import ATSProxyCore
import Foundation

/// What the live page offers besides the flows: a title line, the downloads, and the session's
/// minimal `NSAppTransportSecurity` dictionary. Each provider is called on the web server's loop
/// when a page asks for it (never on the loops that serve proxied traffic).
public struct WebContent: Sendable {
    /// One line about the session (policy source, platform, mode), shown in the page header.
    public var title: String
    /// The HAR of the flows in the ring.
    public var har: @Sendable () -> Data
    /// report.json of the session.
    public var reportJSON: @Sendable () -> Data
    /// report.html of the session.
    public var reportHTML: @Sendable () -> String
    /// The minimal dictionary, ready to paste into an Info.plist. Called at most once per
    /// `dictionaryInterval` while pages are open (and once per page that opens); it should be cheap
    /// when nothing the dictionary depends on changed (`SessionReport.minimalDictionaryPlist` is).
    public var minimalDictionary: @Sendable () -> String
    /// The proxy's CA certificate (PEM).
    public var caPEM: [UInt8]
    /// `/proxy.pac` (nil: not served here).
    public var autoConfig: WebAutoConfig?
    /// The Prometheus metrics served as `/metrics` (nil: that path is 404).
    public var metrics: ProxyMetrics? = nil
    /// `/api/verify`: the session's loads re-decided under its minimal dictionary (`ats-proxy verify`'s JSON). It may
    /// contact servers again (TLS failures), so the web server calls it off its loop. Nil: that path is 404.
    public var verify: (@Sendable () -> Data)? = nil

    public init(
        title: String, har: @escaping @Sendable () -> Data, reportJSON: @escaping @Sendable () -> Data,
        reportHTML: @escaping @Sendable () -> String, minimalDictionary: @escaping @Sendable () -> String,
        caPEM: [UInt8]
    ) {
        self.title = title
        self.har = har
        self.reportJSON = reportJSON
        self.reportHTML = reportHTML
        self.minimalDictionary = minimalDictionary
        self.caPEM = caPEM
    }
}

/// A complete HTTP/1.1 response of the web server (always `Connection: close`: a page makes a
/// handful of requests, and the event stream is one long response).
struct WebResponse {
    var status: Int
    var reason: String
    var contentType: String
    var body: [UInt8]
    var fileName: String?

    static func text(_ status: Int, _ reason: String, _ text: String) -> WebResponse {
        WebResponse(
            status: status, reason: reason, contentType: "text/plain; charset=utf-8", body: Array(text.utf8))
    }

    /// The bytes on the wire, written by the proxy's HTTP/1.1 serializer; `headOnly` for HEAD (the head keeps the
    /// body's length).
    func serialized(headOnly: Bool) -> [UInt8] {
        var fields: [HTTPField] = [
            HTTPField(name: "Content-Type", value: contentType),
            HTTPField(name: "Content-Length", value: String(body.count)),
        ]
        fields += Self.commonFields
        if contentType.hasPrefix("text/html") {
            fields.append(
                HTTPField(
                    name: "Content-Security-Policy",
                    value:
                        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:"
                ))
            fields.append(HTTPField(name: "X-Frame-Options", value: "DENY"))
        }
        if let fileName {
            fields.append(HTTPField(name: "Content-Disposition", value: "attachment; filename=\"\(fileName)\""))
        }
        var bytes: [UInt8] = []
        HTTP1Serializer.writeResponseHead(
            HTTPResponseHead(status: status, reason: reason, headers: HTTPFields(fields)), into: &bytes)
        if !headOnly { bytes += body }
        return bytes
    }

    /// What every answer of the web view carries after its type and length: not cached, not sniffed, and the
    /// connection closes after it.
    static let commonFields = [
        HTTPField(name: "Cache-Control", value: "no-store"),
        HTTPField(name: "X-Content-Type-Options", value: "nosniff"),
        HTTPField(name: "Connection", value: "close"),
    ]

    /// The head that opens the event stream (its body lasts until either side closes).
    static let eventStreamHead: [UInt8] = {
        var bytes: [UInt8] = []
        HTTP1Serializer.writeResponseHead(
            HTTPResponseHead(
                status: 200, reason: "OK",
                headers: HTTPFields([HTTPField(name: "Content-Type", value: "text/event-stream")] + commonFields)),
            into: &bytes)
        return bytes
    }()
}
