import ATSProxyCore
import Foundation

/// Where finished requests are written: CFNetwork-style text or JSON lines, to stderr or a file.
///
/// Thread-safe: records from every loop are formatted and written on one private serial queue
/// (the invariant behind `@unchecked Sendable`), so lines never interleave.
public final class ProxyLogSink: @unchecked Sendable {
    /// Output format.
    public enum Format: String, Sendable, CaseIterable {
        /// Xcode-console-like lines (`--diagnostics` decides how much).
        case text
        /// One JSON object per request.
        case json
    }

    private let queue = DispatchQueue(label: "ats-proxy.log")
    private var formatter: DiagnosticsFormatter
    private let format: Format
    /// Whether records produce any text (JSON always; text unless --diagnostics 0). Fixed at
    /// init so `log` can read it off the queue.
    private let writesRecords: Bool
    private let handle: FileHandle
    /// Called for every record (after writing); the session report and status line use it.
    private let observer: (@Sendable (RequestRecord) -> Void)?

    /// - Parameter path: a file to append to, or nil for standard error.
    public init(
        format: Format, level: DiagnosticsLevel, allowSecrets: Bool, path: String?,
        observer: (@Sendable (RequestRecord) -> Void)? = nil
    ) throws {
        self.format = format
        self.formatter = DiagnosticsFormatter(level: level, allowSecrets: allowSecrets)
        self.writesRecords = format == .json || level > .off
        self.observer = observer
        if let path {
            if !FileManager.default.fileExists(atPath: path) {
                guard FileManager.default.createFile(atPath: path, contents: nil) else {
                    throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
                }
            }
            guard let file = FileHandle(forWritingAtPath: path) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
            }
            file.seekToEndOfFile()
            handle = file
        } else {
            handle = FileHandle.standardError
        }
    }

    private var statusProvider: (@Sendable () -> String)?
    private var statusTimer: (any DispatchSourceTimer)?
    private var statusShown = ""

    /// Shows a one-line live status on standard error (a terminal), redrawn at most four times a
    /// second and kept below the log lines. Call once; only when stderr is a TTY.
    public func enableStatusLine(_ provider: @escaping @Sendable () -> String) {
        queue.async { [self] in
            statusProvider = provider
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
            timer.setEventHandler { [self] in drawStatus(force: false) }
            timer.resume()
            statusTimer = timer
        }
    }

    private func clearStatus() {
        guard !statusShown.isEmpty else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
        statusShown = ""
    }

    private func drawStatus(force: Bool) {
        guard let statusProvider else { return }
        let line = statusProvider()
        guard force || line != statusShown else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K\(line)".utf8))
        statusShown = line
    }

    /// Removes the status line (at exit).
    public func stopStatusLine() {
        queue.sync {
            statusTimer?.cancel()
            statusTimer = nil
            clearStatus()
            statusProvider = nil
        }
    }

    /// Formats and writes one record asynchronously. Observers (counters, the session report)
    /// are thread-safe and run at once; the log queue is entered only when there is text to
    /// write, so --diagnostics 0 costs no thread hop per request.
    public func log(_ record: RequestRecord) {
        observer?(record)
        guard writesRecords else { return }
        queue.async { [self] in
            clearStatus()
            defer { drawStatus(force: true) }
            let text: String
            switch format {
            case .json:
                text = formatter.jsonLine(record) + "\n"
            case .text:
                let lines = formatter.text(record)
                text = lines.isEmpty ? "" : lines.joined(separator: "\n") + "\n"
            }
            if !text.isEmpty { handle.write(Data(text.utf8)) }
        }
    }

    /// Writes a free-form line (startup banner, reload notes) in text mode; in JSON mode as an
    /// object with a `message` key.
    public func note(_ message: String) {
        queue.async { [self] in
            switch format {
            case .text: handle.write(Data("ats-proxy: \(message)\n".utf8))
            case .json:
                let object = ["time": ISO8601DateFormatter().string(from: Date()), "message": message]
                if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
                    handle.write(data + Data("\n".utf8))
                }
            }
        }
    }

    /// Waits until everything logged so far is written.
    public func flush() { queue.sync {} }
}
