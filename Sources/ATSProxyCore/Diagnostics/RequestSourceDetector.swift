import ATSPolicy

/// Decides which app component made a request (`--source auto`), from its User-Agent.
///
/// `AppleCoreMedia/` means AVFoundation; a WebKit user agent without `CFNetwork/` means a web
/// view; anything else is treated as URLSession, the component most apps use.
public enum RequestSourceDetector {
    public static func detect(userAgent: String?) -> RequestSource {
        guard let userAgent else { return .urlsession }
        if contains(userAgent, "AppleCoreMedia/") { return .media }
        if contains(userAgent, "AppleWebKit/") && !contains(userAgent, "CFNetwork/") { return .webkit }
        return .urlsession
    }

    /// Byte-wise substring search: Foundation's `String.contains` (CFStringFind) cost ~3% of the proxy's CPU
    /// per keep-alive request, and the tokens are ASCII.
    private static func contains(_ text: String, _ token: StaticString) -> Bool {
        let needle = UnsafeBufferPointer(start: token.utf8Start, count: token.utf8CodeUnitCount)
        var text = text
        return text.withUTF8 { haystack in
            guard let first = needle.first, haystack.count >= needle.count else { return false }
            var start = 0
            while start <= haystack.count - needle.count {
                if haystack[start] == first {
                    var index = 1
                    while index < needle.count && haystack[start + index] == needle[index] { index += 1 }
                    if index == needle.count { return true }
                }
                start += 1
            }
            return false
        }
    }
}
