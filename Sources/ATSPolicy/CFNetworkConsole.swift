import Foundation

/// Everything about one emulated task that appears in console lines: process, thread, time,
/// task UUID and number, connection number. Injected so that output is reproducible in tests.
public struct ConsoleContext: Sendable, Hashable {
    public var processName: String
    public var pid: Int
    public var threadID: Int
    public var date: Date
    public var timeZone: TimeZone
    public var taskUUID: UUID
    /// N in `Task <UUID>.<N>`: the request's number on its client connection.
    public var taskNumber: Int
    /// N in `Connection N:`.
    public var connectionNumber: Int

    public init(
        processName: String = "App", pid: Int = 1, threadID: Int = 1, date: Date = Date(),
        timeZone: TimeZone = .current, taskUUID: UUID = UUID(), taskNumber: Int = 1, connectionNumber: Int = 1
    ) {
        self.processName = processName
        self.pid = pid
        self.threadID = threadID
        self.date = date
        self.timeZone = timeZone
        self.taskUUID = taskUUID
        self.taskNumber = taskNumber
        self.connectionNumber = connectionNumber
    }

    /// `Task <UUID>.<N>`.
    public var taskName: String { "Task <\(taskUUID.uuidString)>.<\(taskNumber)>" }

    /// `LocalDataTask <UUID>.<N>`.
    public var localDataTaskName: String { "LocalDataTask <\(taskUUID.uuidString)>.<\(taskNumber)>" }

    /// Xcode's console prefix: `2026-11-21 19:52:01.123456+0000 App[1234:5678]`.
    public var prefix: String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
        func pad(_ value: Int?, _ width: Int) -> String {
            let text = String(value ?? 0)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let micros = (parts.nanosecond ?? 0) / 1000
        let offset = timeZone.secondsFromGMT(for: date)
        let sign = offset < 0 ? "-" : "+"
        let zone = sign + pad(abs(offset) / 3600, 2) + pad(abs(offset) % 3600 / 60, 2)
        return
            "\(pad(parts.year, 4))-\(pad(parts.month, 2))-\(pad(parts.day, 2)) \(pad(parts.hour, 2)):\(pad(parts.minute, 2)):\(pad(parts.second, 2)).\(pad(micros, 6))\(zone) \(processName)[\(pid):\(threadID)]"
    }

    /// A stable fake object address derived from the task UUID, like `0x600000de73c0`.
    public var pointerText: String {
        let bytes = withUnsafeBytes(of: taskUUID.uuid) { Array($0) }
        let low = bytes[12...].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) } & 0xffff_fff0
        return "0x6000" + String(low, radix: 16).leftPadded(to: 8)
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// Writes the console lines CFNetwork prints, era by era (reference §4.4). Pure text; the
/// proxy, `explain` and the TLS layer all format through here.
public enum CFNetworkConsole {
    /// The lines a device logs when ATS blocks a cleartext load (reference §4.4.1).
    public static func cleartextBlocked(url: String, host: String, platform: Platform, context: ConsoleContext)
        -> [String]
    {
        let first: String
        if platform.has(.modernCleartextConsoleWording) {
            first =
                "App Transport Security has blocked a cleartext HTTP connection to \(host) since it is insecure. Use HTTPS instead or add this domain to Exception Domains in your Info.plist."
        } else {
            first =
                "App Transport Security has blocked a cleartext HTTP (http://) resource load since it is insecure. Temporary exceptions can be configured via your app's Info.plist file."
        }
        var lines = [first]
        if platform.has(.modernCleartextConsoleWording) {
            lines.append("Cannot start load of \(context.taskName) since it does not conform to ATS policy")
            lines.append(
                "\(context.taskName) finished with error [-1022] "
                    + errorText(
                        code: .appTransportSecurityRequiresSecureConnection, url: url, host: host, platform: platform,
                        context: context))
        } else if platform.has(.taskIdentifierConsoleLines) {
            lines.append("Cannot start load of \(context.taskName) since it does not conform to ATS policy")
            lines.append("NSURLConnection finished with error - code -1022")
        } else {
            lines.append("NSURLConnection finished with error - code -1022")
        }
        return lines.map { "\(context.prefix) \($0)" }
    }

    /// The lines a device logs for a failed TLS load on iOS 13+ (reference §4.4.2): trust failures
    /// produce the `Connection N: … Trust evaluation failed` group, handshake failures go straight
    /// to `encountered error`.
    public static func secureLoadFailed(
        url: String, host: String, code: NSURLErrorCode, streamDomain: Int, streamCode: Int, trust: TrustPolicy.Kind?,
        platform: Platform, context: ConsoleContext
    ) -> [String] {
        var lines: [String] = []
        let connection = "Connection \(context.connectionNumber):"
        if let trust {
            switch trust {
            case .ats:
                lines.append("ATS failed system trust")
                lines.append("\(connection) system TLS Trust evaluation failed(\(streamCode))")
            case .standard:
                lines.append("\(connection) default TLS Trust evaluation failed(\(streamCode))")
            }
            lines.append("\(connection) TLS Trust encountered error \(streamDomain):\(streamCode)")
        }
        lines.append("\(connection) encountered error(\(streamDomain):\(streamCode))")
        lines.append("\(connection) unable to determine interface type without an established connection")
        lines += taskFailedLines(
            url: url, host: host, code: code, streamDomain: streamDomain, streamCode: streamCode, platform: platform,
            context: context, tlsError: true)
        return lines.map { "\(context.prefix) \($0)" }
    }

    /// The two task lines every failed load ends with: `HTTP load failed, 0/0 bytes (error code: …)`
    /// and `finished with error [...] Error Domain=…` (without the console prefix).
    static func taskFailedLines(
        url: String, host: String, code: NSURLErrorCode, streamDomain: Int, streamCode: Int, platform: Platform,
        context: ConsoleContext, tlsError: Bool
    ) -> [String] {
        [
            "\(context.taskName) HTTP load failed, 0/0 bytes (error code: \(code.rawValue) [\(streamDomain):\(streamCode)])",
            "\(context.taskName) finished with error [\(code.rawValue)] "
                + errorText(
                    code: code, url: url, host: host, platform: platform, context: context, streamDomain: streamDomain,
                    streamCode: streamCode, tlsError: tlsError),
        ]
    }

    /// The `Error Domain=NSURLErrorDomain Code=… "…" UserInfo={…}` text of an NSError. TLS errors
    /// carry the trust recovery suggestion and the SSL original value; connection errors
    /// (`tlsError: false`) only the stream domain and code.
    public static func errorText(
        code: NSURLErrorCode, url: String, host: String, platform: Platform, context: ConsoleContext,
        streamDomain: Int? = nil, streamCode: Int? = nil, tlsError: Bool = true
    ) -> String {
        let description = code.localizedDescription(host: host, platform: platform)
        var info: [String] = []
        var underlying = "Error Domain=kCFErrorDomainCFNetwork Code=\(code.rawValue) \"(null)\""
        if let streamDomain, let streamCode {
            if tlsError {
                info.append("NSLocalizedRecoverySuggestion=Would you like to connect to the server anyway?")
            }
            info.append("_kCFStreamErrorDomainKey=\(streamDomain)")
            info.append("_kCFStreamErrorCodeKey=\(streamCode)")
            let original = tlsError ? "_kCFNetworkCFStreamSSLErrorOriginalValue=\(streamCode), " : ""
            underlying +=
                " UserInfo={\(original)_kCFStreamErrorDomainKey=\(streamDomain), _kCFStreamErrorCodeKey=\(streamCode)}"
        }
        info.insert("NSLocalizedDescription=\(description)", at: 0)
        info.append("NSErrorFailingURLStringKey=\(url)")
        info.append("NSErrorFailingURLKey=\(url)")
        info.append("_NSURLErrorRelatedURLSessionTaskErrorKey=(\n    \"\(context.localDataTaskName)\"\n)")
        info.append("_NSURLErrorFailingURLSessionTaskErrorKey=\(context.localDataTaskName)")
        info.append("NSUnderlyingError=\(context.pointerText) {\(underlying)}")
        return
            "Error Domain=NSURLErrorDomain Code=\(code.rawValue) \"\(description)\" UserInfo={\(info.joined(separator: ", "))}"
    }
}
