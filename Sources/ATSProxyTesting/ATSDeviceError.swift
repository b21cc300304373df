import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Turns the proxy's stand-in answers (a 403 or 502/504 carrying `X-ATS-Error`) into the `URLError` that
/// URLSession raises on a device for the same load, so that code switching on `URLError.Code` takes the
/// same path under the proxy as on the device.
///
/// The error carries the code, `NSURLErrorFailingURLErrorKey` and `NSErrorFailingURLStringKey` (the URL
/// that failed), the device's localized description (and, for TLS and certificate failures, its recovery
/// suggestion), `_kCFStreamErrorDomainKey` and
/// `_kCFStreamErrorCodeKey` when the proxy reported the stream error (`X-ATS-Stream-Error: 3:-9802`), an
/// underlying `kCFErrorDomainCFNetwork` error with the same values, and the ATS rule that failed
/// (`X-ATS-Rule`) as the failure reason, in `ATSDeviceError.ruleKey` and in the debug description.
public enum ATSDeviceError {
    /// The userInfo key of the rule the proxy applied (`X-ATS-Rule`).
    public static let ruleKey = "ATSProxyRule"
    /// The stream-error keys CFNetwork puts in its errors.
    public static let streamErrorDomainKey = "_kCFStreamErrorDomainKey"
    public static let streamErrorCodeKey = "_kCFStreamErrorCodeKey"
    /// `NSErrorFailingURLStringKey`: the failing URL as a string (the constant is deprecated by name).
    public static let failingURLStringKey = "NSErrorFailingURLStringKey"

    /// The device's error for this answer, or nil when it is not one of the proxy's `X-ATS-Error` answers.
    public static func urlError(for response: HTTPURLResponse, url: URL? = nil) -> URLError? {
        guard let codeText = response.value(forHTTPHeaderField: "X-ATS-Error"),
            let rawCode = Int(codeText.trimmingCharacters(in: .whitespaces))
        else { return nil }
        let failingURL = url ?? response.url
        let rule = response.value(forHTTPHeaderField: "X-ATS-Rule")
        let stream = response.value(forHTTPHeaderField: "X-ATS-Stream-Error").flatMap(Self.streamPair)
        return makeError(code: rawCode, failingURL: failingURL, rule: rule, stream: stream)
    }

    /// Builds the device's error from its parts (the values of the `X-ATS-*` answer).
    public static func makeError(
        code rawCode: Int, failingURL: URL?, rule: String?, stream: (domain: Int, code: Int)?
    ) -> URLError {
        let host = failingURL?.host ?? ""
        var underlying: [String: Any] = [:]
        var info: [String: Any] = [NSLocalizedDescriptionKey: localizedDescription(code: rawCode, host: host)]
        if let failingURL {
            info[NSURLErrorFailingURLErrorKey] = failingURL
            info[failingURLStringKey] = failingURL.absoluteString
            underlying[NSURLErrorFailingURLErrorKey] = failingURL
            underlying[failingURLStringKey] = failingURL.absoluteString
        }
        if let stream {
            info[streamErrorDomainKey] = stream.domain
            info[streamErrorCodeKey] = stream.code
            underlying[streamErrorDomainKey] = stream.domain
            underlying[streamErrorCodeKey] = stream.code
            if stream.domain == 3 { underlying["_kCFNetworkCFStreamSSLErrorOriginalValue"] = stream.code }
        }
        if (-1204 ... -1200).contains(rawCode) {
            info[NSLocalizedRecoverySuggestionErrorKey] = "Would you like to connect to the server anyway?"
        }
        if let rule, !rule.isEmpty {
            info[ruleKey] = rule
            info[NSLocalizedFailureReasonErrorKey] = rule
            info[NSDebugDescriptionErrorKey] = "ats-proxy: \(rule)"
        }
        info[NSUnderlyingErrorKey] = NSError(domain: "kCFErrorDomainCFNetwork", code: rawCode, userInfo: underlying)
        #if canImport(FoundationNetworking)
            let code = URLError.Code(rawValue: rawCode) ?? .unknown
        #else
            let code = URLError.Code(rawValue: rawCode)
        #endif
        return URLError(code, userInfo: info)
    }

    /// `3:-9802` as (3, -9802).
    static func streamPair(_ text: String) -> (domain: Int, code: Int)? {
        let parts = text.split(separator: ":").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let domain = Int(parts[0]), let code = Int(parts[1]) else { return nil }
        return (domain, code)
    }

    /// The text URLSession gives each code on current iOS and macOS (the proxy's answers use these codes).
    public static func localizedDescription(code: Int, host: String) -> String {
        let spoof =
            "You might be connecting to a server that is pretending to be “\(host)” which could put your confidential information at risk."
        switch code {
        case -999: return "cancelled"
        case -1001: return "The request timed out."
        case -1002: return "unsupported URL"
        case -1003: return "A server with the specified hostname could not be found."
        case -1004: return "Could not connect to the server."
        case -1005: return "The network connection was lost."
        case -1011: return "bad server response"
        case -1022:
            return
                "The resource could not be loaded because the App Transport Security policy requires the use of a secure connection."
        case -1200: return "A TLS error caused the secure connection to fail."
        case -1201: return "The certificate for this server has expired. \(spoof)"
        case -1202: return "The certificate for this server is invalid. \(spoof)"
        case -1203: return "The certificate for this server was signed by an unknown certifying authority. \(spoof)"
        case -1204: return "The certificate for this server is not yet valid. \(spoof)"
        case -1205: return "The server “\(host)” did not accept the certificate."
        case -1206: return "The server “\(host)” requires a client certificate."
        default: return "The operation couldn’t be completed. (NSURLErrorDomain error \(code).)"
        }
    }
}
