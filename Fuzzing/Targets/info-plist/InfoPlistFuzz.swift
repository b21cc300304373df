import ATSPolicy
import Foundation
import FuzzSupport

/// libFuzzer entry point: the input is the content of a `--config` file (XML, binary or OpenStep plist, or anything).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzInfoPlist(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzCheck.withInput(data, size, InfoPlistFuzz.run)
}

/// The executable's entry point under SwiftPM's renaming (see `FuzzDriver`).
@_cdecl("fuzz_info_plist_main")
public func fuzzInfoPlistMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    FuzzDriver.run(argc, argv, fuzzInfoPlist)
}

/// The Info.plist loader (`InfoPlistLoader.loadPlist`: Foundation's plist parser, then the proxy's own type-exact
/// `PlistValue` conversion and Info.plist/bare-ATS classification) and everything that reads its result: the ATS
/// configuration parser in both option sets, the linter and its text, and the evaluator for every exception domain
/// and pinned domain named in the file. Invariants:
/// 1. a bad file is a `ConfigLoadError` naming the file, never a trap;
/// 2. a loaded plist written again as a binary plist loads to the same values and the same ATS configuration
///    (types preserved: a boolean stays a boolean, an integer an integer);
/// 3. the configuration, lint and decisions are the same when computed twice (no hidden state).
enum InfoPlistFuzz {
    static let path = "Fuzz-Info.plist"

    static func run(_ input: [UInt8]) {
        let loaded: LoadedInfoPlist
        do {
            loaded = try InfoPlistLoader.loadPlist(path: path, data: Data(input), kind: nil, innerPath: nil)
        } catch {
            FuzzCheck.require(error.path == path && !error.reason.isEmpty, "an error without path or reason: \(error)")
            return
        }
        let configuration = ATSConfigurationParser().parse(loaded.atsValue)
        let legacy = ATSConfigurationParser(options: ParseOptions(legacyKeysAsAliases: true, integerOneIsYes: false))
            .parse(loaded.atsValue)
        _ = legacy.messages.count
        let lint = ATSLinter(source: loaded).lint()
        _ = LintTextRenderer.render(lint, source: path)
        _ = loaded.summary
        _ = loaded.misplacedATSKeys
        _ = loaded.processName
        _ = loaded.minimumOSVersion
        FuzzCheck.require(ATSConfigurationParser().parse(loaded.atsValue) == configuration, "parsing twice differs")
        evaluate(configuration)

        // Invariant 2, when there is a root dictionary to write (always, once loaded) and no NaN (NaN ≠ NaN).
        let root: PlistValue = loaded.infoPlist.map(PlistValue.dictionary) ?? loaded.atsValue ?? .dictionary([:])
        guard !containsNaN(root) else { return }
        let binary: Data
        do {
            binary = try PropertyListSerialization.data(
                fromPropertyList: root.foundationObject, format: .binary, options: 0)
        } catch {
            return  // Foundation cannot write it (e.g. a date out of range): nothing of ours to compare.
        }
        guard let again = try? InfoPlistLoader.loadPlist(path: path, data: binary, kind: loaded.kind, innerPath: nil)
        else {
            FuzzCheck.fail("a plist written back as binary does not load: \(root)")
        }
        let againRoot: PlistValue = again.infoPlist.map(PlistValue.dictionary) ?? again.atsValue ?? .dictionary([:])
        FuzzCheck.require(againRoot == root, "binary round trip changed \(root) into \(againRoot)")
        FuzzCheck.require(
            ATSConfigurationParser().parse(again.atsValue) == configuration,
            "binary round trip changed the ATS configuration")
    }

    /// Decisions for the hosts the configuration names, over http and https (and twice, to compare).
    static func evaluate(_ configuration: ATSConfiguration) {
        let evaluator = ATSEvaluator(configuration: configuration)
        var hosts =
            Array(configuration.exceptionDomains.keys.prefix(6)) + Array(configuration.pinnedDomains.keys.prefix(3))
        hosts += ["example.com", "localhost", "10.0.0.1", "::1"]
        for host in hosts {
            for scheme in [URLScheme.http, .https] {
                let target = RequestTarget(scheme: scheme, host: host)
                let first = evaluator.evaluate(target)
                let second = evaluator.evaluate(target)
                FuzzCheck.require(first == second, "two decisions for \(target.url)")
                _ = DecisionRenderer.verdictText(first)
            }
        }
    }

    static func containsNaN(_ value: PlistValue) -> Bool {
        switch value {
        case .real(let number): number.isNaN
        case .array(let values): values.contains(where: containsNaN)
        case .dictionary(let values): values.values.contains(where: containsNaN)
        case .bool, .integer, .string, .date, .data: false
        }
    }
}
