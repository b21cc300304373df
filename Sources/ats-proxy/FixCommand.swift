import ATSReport
import ArgumentParser
import Foundation

/// `ats-proxy fix --report report.json INFO_PLIST [--write]`: the change the session's minimal dictionary makes
/// to the app's Info.plist, as a unified diff; written only with `--write`. Exit status 0, 2 on bad input.
struct FixCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fix", abstract: "Show (and with --write apply) the session's fix to an Info.plist.",
        discussion: """
            Merges the session's minimal NSAppTransportSecurity dictionary into the Info.plist: adds the \
            exception domains and keys the recorded loads need, never removes a key, keeps every other key. \
            The change is printed as a unified diff of the plist's XML form; --write saves it in the file's own \
            format (an XML plist stays XML and gains the App Review justifications as comments; a binary \
            plist stays binary). Check the result with 'ats-proxy verify --report report.json INFO_PLIST'.

            Example: ats-proxy fix --report out/report.json App/Info.plist --write
            """)

    @Option(name: .long, help: "The session's report.json (written by --report DIR).")
    var report: String

    @Flag(name: .long, help: "Write the merged plist back to INFO_PLIST (without it, only the diff is printed).")
    var write = false

    @Argument(help: "The app's Info.plist (XML or binary).")
    var infoPlist: String

    func validate() throws {
        try UnknownOptionCheck.check(against: Self.self)
    }

    func run() throws {
        let fixed: InfoPlistFixer.Fixed
        let unfixable: [UnfixableLoad]
        do {
            let document = try VerifyCommand.loadReport(report)
            unfixable = document.minimalDictionary.unfixable
            guard let data = FileManager.default.contents(atPath: infoPlist) else {
                throw CLIError.usage("\(infoPlist): cannot read the Info.plist")
            }
            do {
                fixed = try InfoPlistFixer(minimal: document.minimalDictionary).fix(data)
            } catch {
                throw CLIError.usage("\(infoPlist): \(error)")
            }
        } catch {
            exitWithError(error)
        }
        // Loads no key can allow (a TLS 1.1 server from iOS 26 on, a certificate ATS refuses): said, never hidden.
        for load in unfixable {
            FileHandle.standardError.write(
                Data("ats-proxy: \(load.host): \(load.reason)\(load.fix.map { "; \($0)" } ?? "")\n".utf8))
        }
        guard !fixed.changes.isEmpty else {
            print("\(infoPlist) already allows every load the session recorded; nothing to change")
            return
        }
        FileHandle.standardOutput.write(
            Data(try Self.unifiedDiff(fixed.beforeXML, fixed.afterXML, path: infoPlist).utf8))
        if write {
            do {
                try fixed.data.write(to: URL(fileURLWithPath: infoPlist), options: .atomic)
            } catch {
                exitWithError(CLIError.usage("\(infoPlist): cannot write it: \(error.localizedDescription)"))
            }
            let form = fixed.format == .binary ? "binary" : "XML"
            FileHandle.standardError.write(
                Data("ats-proxy: wrote \(infoPlist) (\(form), \(fixed.changes.count) change(s))\n".utf8))
        } else {
            FileHandle.standardError.write(Data("ats-proxy: not written; add --write to apply\n".utf8))
        }
    }

    /// `diff -u` of two texts, labelled `PATH` and `PATH (fixed)`.
    static func unifiedDiff(_ before: String, _ after: String, path: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ats-proxy-fix-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let old = directory.appendingPathComponent("before.plist")
        let new = directory.appendingPathComponent("after.plist")
        try Data(before.utf8).write(to: old)
        try Data(after.utf8).write(to: new)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/diff")
        process.arguments = ["-u", "--label", path, "--label", "\(path) (fixed)", old.path, new.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: text, as: UTF8.self)
    }
}
