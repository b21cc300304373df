import ATSProxyIO
import ATSSystemTools
import ATSTLS
import Foundation

/// The system proxy state a `--system-proxy` run saves before changing anything: still there after its owner
/// died means a crashed run left the Mac pointing at a proxy that is gone (every load fails).
struct SavedSystemProxyCheck: DoctorCheck {
    func run(_ context: DoctorContext) -> [DoctorFinding] {
        let stateFile = SystemProxyStateFile.standard(environment: context.environment)
        let saved: SavedSystemProxy?
        do {
            saved = try stateFile.load()
        } catch {
            return [
                .problem(
                    "system proxy", "\(error)", fix: "look at \(stateFile.path), then remove it or restore by hand")
            ]
        }
        guard let saved else { return [.ok("system proxy", "no saved system proxy state (\(stateFile.path))")] }
        let address = "\(saved.proxyHost):\(saved.proxyPort)"
        if saved.ownerIsAlive {
            return [.ok("system proxy", "set to \(address) by the running ats-proxy (pid \(saved.ownerPID))")]
        }
        return [
            .problem(
                "system proxy",
                "a --system-proxy run (pid \(saved.ownerPID), gone) left the system proxy pointing at \(address): loads on this Mac fail",
                fix: "ats-proxy system-proxy restore")
        ]
    }
}

/// Each listen address: well formed, and free (bound for a moment with SO_REUSEADDR, as the proxy binds it).
struct ListenPortCheck: DoctorCheck {
    func run(_ context: DoctorContext) -> [DoctorFinding] {
        context.listen.map { text in
            guard let listen = ListenAddress(parsing: text) else {
                return .problem(
                    "listen", "'\(text)' is not HOST:PORT", fix: "--listen 127.0.0.1:8080 (or [::1]:8080)")
            }
            let errorNumber = Self.bindError(host: listen.address.ip.description, port: listen.address.port)
            switch errorNumber {
            case 0:
                return .ok("listen", "\(listen) is free")
            case EADDRINUSE:
                let next = listen.address.port == UInt16.max ? 8081 : Int(listen.address.port) + 1
                return .problem(
                    "listen", "\(listen) is in use (another proxy, or an ats-proxy still running)",
                    fix:
                        "stop what listens there, or run with --listen \(listen.address.ip.family == .v4 ? listen.address.ip.description : "[\(listen.address.ip)]"):\(next)"
                )
            default:
                return .problem(
                    "listen", "cannot bind \(listen): \(String(cString: strerror(errorNumber)))",
                    fix: "choose another --listen address")
            }
        }
    }

    /// 0 when `host:port` can be bound now (and is released at once), else the errno of the failure.
    static func bindError(host: String, port: UInt16) -> Int32 {
        #if canImport(Glibc)
            let stream = Int32(SOCK_STREAM.rawValue)
        #else
            let stream = SOCK_STREAM
        #endif
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE
        hints.ai_socktype = stream
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0, let info = result else { return EINVAL }
        defer { freeaddrinfo(result) }
        let fd = socket(info.pointee.ai_family, stream, 0)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        return bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 ? 0 : errno
    }
}

/// The settings file and `ATS_PROXY_*` variables, read by the loader a run uses (``SettingsResolver``): a key
/// it rejects is a problem, with the loader's own message.
struct SettingsCheck: DoctorCheck {
    func run(_ context: DoctorContext) -> [DoctorFinding] {
        let resolver = SettingsResolver(
            arguments: context.settingsArguments, environment: context.environment,
            workingDirectory: context.workingDirectory)
        do {
            let (file, settings) = try resolver.resolve(scopes: [.policy, .proxy, .ca])
            let fromFile = settings.filter { if case .file = $0.origin { true } else { false } }.count
            let fromEnvironment = settings.filter { if case .environment = $0.origin { true } else { false } }.count
            let source =
                file.map { "\($0): \(fromFile) setting\(fromFile == 1 ? "" : "s")" }
                ?? "no settings file (optional: ats-proxy.json or .yaml here, or --settings)"
            return [.ok("settings", "\(source); \(fromEnvironment) from ATS_PROXY_* variables")]
        } catch {
            return [
                .problem(
                    "settings", "\(error)",
                    fix: "correct or remove that key or variable; 'ats-proxy settings show' prints what a run would use"
                )
            ]
        }
    }
}

/// The Certificate Transparency log list `ats-proxy ct update` cached beside the CA (`CTLogListCache`): whether a
/// run would use it. Optional, so every finding is at most a warning: without a usable list the proxy reports CT
/// as not evaluated.
struct CTLogListCheck: DoctorCheck {
    func run(_ context: DoctorContext) -> [DoctorFinding] {
        let cache = CTLogListCache(directory: context.caDirectory)
        let limit = CTLogListCache.defaultMaximumAgeDays
        switch cache.state(now: context.now, maximumAgeDays: limit) {
        case .fresh(let list, _, let age):
            return [
                .ok(
                    "CT log list",
                    "\(cache.listPath): \(list.entries.count) logs, \(age) day\(age == 1 ? "" : "s") old (limit \(limit))"
                )
            ]
        case .stale(_, _, let age):
            return [
                .warning(
                    "CT log list",
                    "\(cache.listPath) is \(age) days old (limit \(limit)); Certificate Transparency is reported as not evaluated",
                    fix: "ats-proxy ct update")
            ]
        case .missing:
            return [
                .warning(
                    "CT log list",
                    "no CT log list cached in \(context.caDirectory); Certificate Transparency is reported as not evaluated",
                    fix: "ats-proxy ct update (or --ct-log-list FILE)")
            ]
        case .unusable(let problem):
            return [
                .warning(
                    "CT log list", "\(cache.listPath) cannot be used: \(problem)",
                    fix: "ats-proxy ct update")
            ]
        }
    }
}

/// The OpenSSL the process loaded: its version, and whether it can offer the post-quantum hybrid group that
/// iOS 26 and macOS 26 offer first (a warning when not: the proxy's upstream handshakes then differ there).
struct OpenSSLCheck: DoctorCheck {
    func run(_ context: DoctorContext) -> [DoctorFinding] {
        let report = VersionReport.current()
        var findings: [DoctorFinding] = [.ok("OpenSSL", "\(report.openSSL); nghttp2 \(report.nghttp2)")]
        if report.offersPostQuantum {
            findings.append(.ok("post-quantum TLS", report.postQuantumLine))
        } else {
            findings.append(
                .warning(
                    "post-quantum TLS", report.postQuantumLine,
                    fix: "build against OpenSSL 3.5 or later to offer it (Debian 12 ships 3.0)"))
        }
        return findings
    }
}
