import ATSProxyIO
import ArgumentParser
import Foundation

/// The options that let a person watch a session: the live web view, the HAR file and the TLS key
/// log. A group of its own, mounted in `ProxyOptions` with one `@OptionGroup` line.
struct ObservationOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Serve the live flow view on HOST:PORT (e.g. 127.0.0.1:8081).",
            discussion:
                "A non-loopback address accepts only --allow-client ranges (default: private and link-local)."))
    var web: String?

    @Option(name: .customLong("web-flows"), help: "Flows the live view and the HAR keep (the oldest go first).")
    var webFlows = 10_000

    @Option(name: .long, help: "Write an HTTP Archive (HAR 1.2) of the session here at exit and on SIGUSR1.")
    var har: String?

    @Option(
        name: .customLong("capture-bodies"),
        help: ArgumentHelp(
            "Keep the first SIZE bytes of every request and response body for the HAR (e.g. 64k, 1m; default: none).",
            discussion: "Memory: up to twice SIZE per flow in the ring (--web-flows)."))
    var captureBodies: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Append the TLS secrets of both legs (NSS key log format, for Wireshark) to this file.",
            discussion: "Default: $SSLKEYLOGFILE when set. The file is created with mode 0600."))
    var keylog: String?

    func validate() throws {
        if let web, ListenAddress(parsing: web) == nil {
            throw ValidationError("--web '\(web)' is not HOST:PORT (e.g. 127.0.0.1:8081 or [::1]:8081)")
        }
        guard webFlows > 0 else { throw ValidationError("--web-flows must be at least 1") }
        if let har, har.isEmpty { throw ValidationError("--har needs a file name") }
        if let keylog, keylog.isEmpty { throw ValidationError("--keylog needs a file name") }
        if let captureBodies, Self.byteCount(captureBodies) == nil {
            throw ValidationError("--capture-bodies '\(captureBodies)' is not a size such as 65536, 64k or 1m")
        }
        if captureBodies != nil && !keepsFlows {
            throw ValidationError("--capture-bodies needs --har or --web (the bodies go to the HAR)")
        }
    }

    /// Bytes of each body to keep (0 without `--capture-bodies`).
    var captureBodyLimit: Int { captureBodies.flatMap(Self.byteCount) ?? 0 }

    /// `65536`, `64k`, `1m` (binary multiples) as a byte count, up to 64 MiB.
    static func byteCount(_ text: String) -> Int? {
        let lower = text.lowercased()
        let multiplier: Int
        var digits = Substring(lower)
        switch lower.last {
        case "k": multiplier = 1 << 10
        case "m": multiplier = 1 << 20
        default: multiplier = 1
        }
        if multiplier > 1 { digits = digits.dropLast() }
        guard let value = Int(digits), value > 0, value <= (64 << 20) / multiplier else { return nil }
        return value * multiplier
    }

    /// The key-log path: `--keylog`, else a non-empty `SSLKEYLOGFILE`.
    var keyLogPath: String? {
        if let keylog { return keylog }
        guard let variable = ProcessInfo.processInfo.environment["SSLKEYLOGFILE"], !variable.isEmpty else {
            return nil
        }
        return variable
    }

    /// Whether the flows are kept (for the page or the HAR).
    var keepsFlows: Bool { web != nil || har != nil }
}
