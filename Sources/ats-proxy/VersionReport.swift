import ATSHTTP2
import ATSTLS
internal import CATSBuildInfo

/// What `ats-proxy --version` prints: this build's version and commit (from `git describe`, compiled in by
/// `make install` and `scripts/package`; see `scripts/version`), and the OpenSSL and nghttp2 the process
/// actually loaded, with the TLS key-exchange groups that OpenSSL can negotiate, all asked at run time.
struct VersionReport: Sendable, Equatable {
    /// `0.1.0+g1a2b3c4` for a packaged build; the released version followed by `-dev` for a plain `swift build`.
    var version: String
    /// The full commit hash, or nil when the build was not told (a plain `swift build`).
    var commit: String?
    /// `OpenSSL_version(OPENSSL_VERSION)` of the loaded library.
    var openSSL: String
    /// `nghttp2_version(0)` of the loaded library.
    var nghttp2: String
    /// The groups of `OpenSSLLibrary.candidateGroups` the loaded OpenSSL accepts.
    var keyExchangeGroups: [String]

    /// This build's version, without asking the libraries anything.
    static var buildVersion: String {
        let built = String(cString: ats_build_version())
        return built.isEmpty ? "\(ATSProxyVersion.released)-dev" : built
    }

    /// The report of this process.
    static func current() -> VersionReport {
        let commit = String(cString: ats_build_commit())
        return VersionReport(
            version: buildVersion,
            commit: commit.isEmpty ? nil : commit,
            openSSL: OpenSSLLibrary.version,
            nghttp2: NGHTTP2Library.version,
            keyExchangeGroups: OpenSSLLibrary.keyExchangeGroups)
    }

    /// Whether the loaded OpenSSL can offer the post-quantum hybrid Apple's systems offer first.
    var offersPostQuantum: Bool { keyExchangeGroups.contains(OpenSSLLibrary.postQuantumGroup) }

    /// The line about the post-quantum group, shared with `doctor`.
    var postQuantumLine: String {
        offersPostQuantum
            ? "\(OpenSSLLibrary.postQuantumGroup) available (post-quantum hybrid, as iOS 26 and macOS 26 offer)"
            : "no \(OpenSSLLibrary.postQuantumGroup) (the post-quantum hybrid iOS 26 and macOS 26 offer first needs OpenSSL 3.5 or later)"
    }

    /// The text `--version` prints, one fact per line.
    var text: String {
        let classic = keyExchangeGroups.filter { $0 != OpenSSLLibrary.postQuantumGroup }
        return """
            ats-proxy \(version)
            commit:  \(commit ?? "unknown (this build did not record it; 'make install' and 'scripts/package' do)")
            OpenSSL: \(openSSL)
            nghttp2: \(nghttp2)
            TLS key exchange: \(classic.joined(separator: ", ")); \(postQuantumLine)
            """
    }
}
