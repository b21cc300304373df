internal import CNGHTTP2

/// Facts about the linked nghttp2 library. The only module that imports nghttp2 is this one.
public enum NGHTTP2Library {
    /// The runtime version string of libnghttp2, e.g. "1.52.0".
    public static var version: String {
        guard let info = nghttp2_version(0) else { return "unknown" }
        return String(cString: info.pointee.version_str)
    }
}
