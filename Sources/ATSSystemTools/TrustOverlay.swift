import CTrustOverlay
import Foundation

/// Shows a CA bundle (the system roots plus the proxy CA) at the paths where clients look for the system
/// bundle, to one process and its children only: a private mount namespace with bind mounts, entered by a
/// fresh single-threaded process right before it execs the command. Root may always do it; other users
/// when the kernel allows unprivileged user namespaces. The machine's files are never changed.
public enum TrustOverlay {
    /// Where distributions keep the PEM bundle that OpenSSL and libcurl read by default.
    public static let knownBundlePaths = [
        "/etc/ssl/certs/ca-certificates.crt",  // Debian, Ubuntu, Alpine, Arch
        "/etc/pki/tls/certs/ca-bundle.crt",  // Fedora, RHEL (a link into /etc/pki/ca-trust/extracted)
        "/etc/ssl/ca-bundle.pem",  // openSUSE
        "/etc/ssl/cert.pem",  // Alpine, macOS, some others
    ]

    /// The system bundle files that exist here, each once (paths that resolve to one file count once).
    public static func systemBundlePaths(candidates: [String] = knownBundlePaths) -> [String] {
        var seen = Set<String>()
        var result: [String] = []
        for path in candidates where FileManager.default.fileExists(atPath: path) {
            let resolved = (path as NSString).resolvingSymlinksInPath
            if seen.insert(resolved).inserted { result.append(resolved) }
        }
        return result
    }

    /// Why the overlay could not be set up: the failed step and its errno.
    public struct Failure: Error, CustomStringConvertible {
        public let code: Int32
        public let step: String
        public var description: String { step }
    }

    /// Enters a private mount namespace with `bundle` mounted over every path in `targets`. Call only from a
    /// process that has one thread and will exec next.
    public static func enter(bundle: String, targets: [String]) throws {
        var message = [CChar](repeating: 0, count: 512)
        let capacity = message.count
        let code = withCStrings(targets) { pointers in
            pointers.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: targets.count + 1) { constant in
                ats_trust_overlay_enter(bundle, constant, Int32(targets.count), &message, capacity)
            }
        }
        guard code == 0 else {
            let step = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw Failure(code: code, step: step)
        }
    }

    /// Replaces this process with `command` (found on PATH when it has no slash); returns only by throwing.
    public static func exec(_ command: [String]) throws -> Never {
        let code = withCStrings(command) { pointers in ats_trust_overlay_exec(command[0], pointers) }
        throw Failure(code: code, step: "cannot start '\(command[0])': \(String(cString: strerror(code)))")
    }

    /// Calls `body` with a NULL-terminated array of C strings copied from `strings`.
    private static func withCStrings<Result>(
        _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Result
    ) -> Result {
        let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) } + [nil]
        defer { copies.forEach { free($0) } }
        return copies.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// What a user can run instead when the overlay is not allowed; `root` when exec already runs as root
    /// (then only the capability is missing, as in a container).
    public static func alternatives(caDirectoryArgument: String, root: Bool) -> [String] {
        let install =
            "trust the proxy CA machine-wide: \(root ? "" : "sudo ")ats-proxy ca install --system\(caDirectoryArgument) (undo: \(root ? "" : "sudo ")ats-proxy ca uninstall --system\(caDirectoryArgument))"
        if root {
            return [
                "give the process CAP_SYS_ADMIN (a container: docker run --cap-add SYS_ADMIN, or --privileged)",
                "or \(install)",
            ]
        }
        return [
            "allow unprivileged user namespaces: sudo sysctl -w kernel.unprivileged_userns_clone=1 (Debian), or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04 and later)",
            "or run exec as root: sudo ats-proxy exec …",
            "or \(install)",
        ]
    }
}
