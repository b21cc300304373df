import ATSPolicy

/// Decides which app component made a request (`--source auto`), from its User-Agent.
///
/// `AppleCoreMedia/` means AVFoundation; a WebKit user agent without `CFNetwork/` means a web
/// view; anything else is treated as URLSession, the component most apps use.
public enum RequestSourceDetector {
    public static func detect(userAgent: String?) -> RequestSource {
        guard let userAgent else { return .urlsession }
        if userAgent.contains("AppleCoreMedia/") { return .media }
        if userAgent.contains("AppleWebKit/") && !userAgent.contains("CFNetwork/") { return .webkit }
        return .urlsession
    }
}
