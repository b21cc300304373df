import Foundation

/// The proxy auto-configuration file (`/proxy.pac`) a phone can be pointed at instead of a manual Wi-Fi proxy:
/// `FindProxyForURL` answers `PROXY host:port; DIRECT`, so that the phone goes direct when the proxy is gone,
/// and follows the host filter: hosts `--ignore-hosts` leaves alone go `DIRECT`; with `--allow-hosts` only the
/// listed hosts go through the proxy. The onboarding name (`ats-proxy.invalid`) always goes through the proxy.
///
/// The patterns are the filter's own regular expressions, translated by `PACPatternTranslator` and tested, as
/// the proxy tests them, against `host:port` (the port from the URL, or 80/443 by scheme), case-insensitively.
/// A pattern that cannot be translated faithfully leans towards the proxy, which applies the real filter
/// itself: an ignore pattern is left out (its hosts reach the proxy, which tunnels them untouched), and an allow
/// pattern sends every host to the proxy. The script says which patterns those were, in comments. The PAC
/// evaluator compiles each expression inside `try`, so an engine that lacks a construct (look-behind on an
/// old one) falls back the same way instead of failing the whole script.
///
/// Immutable; built once from the filter. `script(proxy:)` fills in the address per request.
public struct ProxyAutoConfig: Sendable {
    /// Where the file is served, on the proxy's own address and on `--web`.
    public static let path = "/proxy.pac"
    /// The media type browsers and iOS expect for a PAC file.
    public static let contentType = "application/x-ns-proxy-autoconfig"

    /// What the filter's patterns mean in the file.
    public let mode: HostFilter.Mode
    /// The translated patterns: the ECMAScript source, or nil when the pattern was refused.
    let translations: [(pattern: String, outcome: PACPatternTranslator.Outcome)]

    /// The file for `filter`'s mode and patterns.
    public init(filter: HostFilter) {
        mode = filter.mode
        translations = filter.patterns.map { ($0, PACPatternTranslator.translate($0)) }
    }

    /// Patterns the file cannot carry faithfully, with the reason (shown in the file's comments).
    public var refusedPatterns: [(pattern: String, reason: String)] {
        translations.compactMap { entry in
            switch entry.outcome {
            case .translated: return nil
            case .refused(let reason): return (entry.pattern, reason)
            }
        }
    }

    /// The script for a proxy at `proxy` (`host:port`, an IPv6 host in brackets).
    public func script(proxy: String) -> String {
        var lines = [
            "// ats-proxy: proxy auto-configuration. Through the proxy while it runs, direct when it is gone.",
            "var atsProxy = \(Self.literal("PROXY \(proxy); DIRECT"));",
        ]
        for (pattern, outcome) in translations {
            switch outcome {
            case .translated: break
            case .refused(let reason):
                lines.append("// not translated (\(reason)); the proxy applies it: \(Self.comment(pattern))")
            }
        }
        let expressions = translations.map { entry -> String in
            switch entry.outcome {
            case .translated(let source): return "atsCompile(\(Self.literal(source)))"
            case .refused: return "null"
            }
        }
        lines.append(
            "function atsCompile(source) { try { return new RegExp(source, \"i\"); } catch (e) { return null; } }")
        lines.append("var atsPatterns = [\(expressions.joined(separator: ", "))];")
        lines.append(
            """
            function atsPort(url) {
              var m = /^([a-z][a-z0-9+.-]*):\\/\\/(?:[^\\/?#@]*@)?(\\[[^\\]]*\\]|[^\\/?#:]*)(?::(\\d+))?/i.exec(url);
              if (!m) { return ""; }
              if (m[3]) { return m[3]; }
              var scheme = m[1].toLowerCase();
              return (scheme === "https" || scheme === "wss") ? "443" : "80";
            }
            """)
        lines.append("function FindProxyForURL(url, host) {")
        lines.append("  var name = String(host).toLowerCase().replace(/^\\[/, \"\").replace(/\\]$/, \"\");")
        lines.append("  if (name === \(Self.literal(OnboardingSite.host))) { return atsProxy; }")
        switch mode {
        case .none:
            break
        case .ignore:
            lines.append("  var subject = name + \":\" + atsPort(url);")
            lines.append("  for (var i = 0; i < atsPatterns.length; i++) {")
            lines.append("    if (atsPatterns[i] !== null && atsPatterns[i].test(subject)) { return \"DIRECT\"; }")
            lines.append("  }")
        case .allow:
            lines.append("  var subject = name + \":\" + atsPort(url);")
            lines.append("  for (var i = 0; i < atsPatterns.length; i++) {")
            lines.append("    if (atsPatterns[i] === null || atsPatterns[i].test(subject)) { return atsProxy; }")
            lines.append("  }")
            lines.append("  return \"DIRECT\";")
        }
        if mode != .allow { lines.append("  return atsProxy;") }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }

    /// The file as an onboarding page, for a proxy at `proxy`.
    public func page(proxy: String) -> OnboardingSite.Page {
        OnboardingSite.Page(
            status: 200, reason: "OK", contentType: Self.contentType, fileName: nil,
            body: Array(script(proxy: proxy).utf8))
    }

    /// `text` as a JavaScript string literal (JSON's string syntax, which JavaScript reads alike; the text is
    /// printable ASCII or an address, so no line separators can occur).
    static func literal(_ text: String) -> String {
        let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// `text` safe inside a `//` comment (no line breaks).
    static func comment(_ text: String) -> String {
        String(
            text.unicodeScalars.map { $0.value < 0x20 || $0 == "\u{2028}" || $0 == "\u{2029}" ? " " : Character($0) })
    }
}
