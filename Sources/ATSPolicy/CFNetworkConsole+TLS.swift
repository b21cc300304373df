import Foundation

extension CFNetworkConsole {
    /// The lines a device logs when the TCP connection itself fails (iOS 13+ shape): DNS
    /// (`[12:8]`), refused (`[1:61]`), timed out (`[1:60]`), reset (`[1:54]`). The `failed to
    /// connect` line is emitted for POSIX-domain failures only; no trust lines.
    public static func connectionFailed(
        url: String, host: String, code: NSURLErrorCode, streamDomain: Int, streamCode: Int, platform: Platform,
        context: ConsoleContext
    ) -> [String] {
        let connection = "Connection \(context.connectionNumber):"
        var lines: [String] = []
        if streamDomain == 1 {
            lines.append("\(connection) failed to connect \(streamDomain):\(streamCode), reason -1")
        }
        lines.append("\(connection) encountered error(\(streamDomain):\(streamCode))")
        lines += taskFailedLines(
            url: url, host: host, code: code, streamDomain: streamDomain, streamCode: streamCode, platform: platform,
            context: context, tlsError: false)
        return lines.map { "\(context.prefix) \($0)" }
    }

    /// The NSError text of a connection failure: like `errorText` but without the trust recovery
    /// suggestion, which only TLS errors carry.
    public static func connectionErrorText(
        code: NSURLErrorCode, url: String, host: String, platform: Platform, context: ConsoleContext,
        streamDomain: Int?, streamCode: Int?
    ) -> String {
        errorText(
            code: code, url: url, host: host, platform: platform, context: context, streamDomain: streamDomain,
            streamCode: streamCode, tlsError: false)
    }
}
