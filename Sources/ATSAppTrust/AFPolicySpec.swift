import ATSTLS
import Foundation

/// A bad `--af-policy` value: the flag's value and what is wrong with which part of it.
public struct AFPolicySpecError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The whole value given to the flag.
    public let spec: String
    /// What is wrong, naming the bad part.
    public let problem: String

    public var description: String { "--af-policy '\(spec)': \(problem)" }
}

/// One `--af-policy HOST_PATTERN=MODE[,pins=DIR][,allow-invalid][,no-domain-check]`: the app's `AFSecurityPolicy`
/// for the hosts whose whole name matches HOST_PATTERN, a regular expression (case-insensitive, like
/// `--ignore-hosts`, but matched against the entire host name, without the port).
///
/// MODE is `none`, `public-key` or `certificate`. `pins=DIR` names a directory of `.cer`, `.der`, `.crt` or `.pem`
/// files (DER or PEM; a PEM file may hold several certificates) or one such file: the certificates the app
/// bundles. `allow-invalid` sets `allowInvalidCertificates = YES`; `no-domain-check` sets
/// `validatesDomainName = NO`. HOST_PATTERN ends at the first `=` followed by a mode name.
public struct AFPolicySpec: Sendable {
    /// The value as given.
    public let text: String
    /// HOST_PATTERN as given.
    public let hostPattern: String
    /// The policy it describes.
    public let policy: AFSecurityPolicy
    /// The pins directory or file, if any.
    public let pinsPath: String?
    private let expression: NSRegularExpressionBox

    /// The file name extensions read from a pins directory.
    public static let pinExtensions: Set<String> = ["cer", "der", "crt", "pem"]

    /// Parses and loads a spec; throws ``AFPolicySpecError`` naming the bad part.
    public init(parsing text: String) throws {
        func fail(_ problem: String) -> AFPolicySpecError { AFPolicySpecError(spec: text, problem: problem) }
        guard let split = Self.split(text) else {
            if let equals = text.firstIndex(of: "=") {
                let word = text[text.index(after: equals)...].prefix { $0 != "," }
                throw fail("unknown mode '\(word)' after '=' (none, public-key or certificate)")
            }
            throw fail(
                "expected HOST_PATTERN=MODE[,pins=DIR][,allow-invalid][,no-domain-check] with MODE none, public-key or certificate"
            )
        }
        guard !split.pattern.isEmpty else { throw fail("the host pattern before '=' is empty") }
        let regex: NSRegularExpression
        do {
            regex = try NSRegularExpression(pattern: "^(?:\(split.pattern))$", options: [.caseInsensitive])
        } catch {
            throw fail("'\(split.pattern)' is not a valid regular expression: \(error.localizedDescription)")
        }
        var parts = split.options.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let modeWord = parts.removeFirst()
        guard let mode = AFPinningMode(rawValue: modeWord) else {
            throw fail("unknown mode '\(modeWord)' (none, public-key or certificate)")
        }
        var pinsPath: String?
        var allowInvalid = false
        var noDomainCheck = false
        for part in parts {
            if part.hasPrefix("pins=") {
                guard pinsPath == nil else { throw fail("'pins=' is given twice") }
                let path = String(part.dropFirst("pins=".count))
                guard !path.isEmpty else { throw fail("'pins=' needs a directory or file") }
                pinsPath = path
            } else if part == "allow-invalid" {
                guard !allowInvalid else { throw fail("'allow-invalid' is given twice") }
                allowInvalid = true
            } else if part == "no-domain-check" {
                guard !noDomainCheck else { throw fail("'no-domain-check' is given twice") }
                noDomainCheck = true
            } else {
                throw fail("unknown part '\(part)' (expected pins=DIR, allow-invalid or no-domain-check)")
            }
        }
        var pinned: [Certificate] = []
        if let pinsPath {
            pinned = try Self.loadPins(pinsPath, fail: fail)
        } else if mode != .none {
            throw fail("mode \(mode.rawValue) needs pins=DIR (the .cer files the app bundles)")
        }
        self.text = text
        hostPattern = split.pattern
        self.pinsPath = pinsPath
        expression = NSRegularExpressionBox(regex)
        policy = AFSecurityPolicy(
            mode: mode, pinnedCertificates: pinned, allowInvalidCertificates: allowInvalid,
            validatesDomainName: !noDomainCheck)
    }

    /// Whether the whole `host` (case-insensitive; brackets and a trailing dot removed) matches HOST_PATTERN.
    public func matches(host: String) -> Bool {
        let name = LeafCertificateCache.normalize(host)
        return expression.regex.firstMatch(in: name, range: NSRange(name.startIndex..., in: name)) != nil
    }

    /// The first spec of `specs` whose pattern matches `host`.
    public static func first(_ specs: [AFPolicySpec], matching host: String) -> AFPolicySpec? {
        specs.first { $0.matches(host: host) }
    }

    /// HOST_PATTERN and the rest, split at the first `=` that a mode name follows.
    static func split(_ text: String) -> (pattern: String, options: String)? {
        var index = text.startIndex
        while let equals = text[index...].firstIndex(of: "=") {
            let rest = text[text.index(after: equals)...]
            let word = rest.prefix { $0 != "," }
            if AFPinningMode(rawValue: String(word)) != nil { return (String(text[..<equals]), String(rest)) }
            index = text.index(after: equals)
        }
        return nil
    }

    /// The certificates of a pins directory (every file with a pin extension) or of one file.
    static func loadPins(_ path: String, fail: (String) -> AFPolicySpecError) throws -> [Certificate] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw fail("pins=\(path): no such file or directory")
        }
        var files: [String] = []
        if isDirectory.boolValue {
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: path)
            } catch {
                throw fail("pins=\(path): cannot list the directory: \(error.localizedDescription)")
            }
            files = names.filter { pinExtensions.contains(($0 as NSString).pathExtension.lowercased()) }.sorted()
                .map { (path as NSString).appendingPathComponent($0) }
            guard !files.isEmpty else { throw fail("pins=\(path): no .cer, .der, .crt or .pem file in this directory") }
        } else {
            files = [path]
        }
        var certificates: [Certificate] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw fail("pins=\(path): cannot read \(file)")
            }
            let bytes = [UInt8](data)
            if String(decoding: bytes, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") {
                let parsed = (try? Certificate.all(pem: bytes)) ?? []
                guard !parsed.isEmpty else { throw fail("pins=\(path): \(file) holds no readable PEM certificate") }
                certificates.append(contentsOf: parsed)
            } else {
                guard let certificate = try? Certificate(der: bytes) else {
                    throw fail("pins=\(path): \(file) is neither a DER nor a PEM certificate")
                }
                certificates.append(certificate)
            }
        }
        return certificates
    }
}

/// Holds a compiled expression; `NSRegularExpression` is immutable and safe to use from several threads.
struct NSRegularExpressionBox: @unchecked Sendable {
    let regex: NSRegularExpression
    init(_ regex: NSRegularExpression) { self.regex = regex }
}
