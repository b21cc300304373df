import ATSTLS
import Foundation

/// A bad `--challenge` or `--challenge-every` value: the flag, the whole argument, and what is wrong
/// with which part of it.
public struct ChallengeSpecError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The option the value came from (`--challenge`, or a settings-file key).
    public let flag: String
    /// The value as given.
    public let argument: String
    /// What is wrong, naming the bad part.
    public let problem: String

    public init(flag: String, argument: String, problem: String) {
        self.flag = flag
        self.argument = argument
        self.problem = problem
    }

    public var description: String { "\(flag) '\(argument)': \(problem)" }
}

/// One `--challenge HOST_PATTERN[=KIND,KIND…]` value: which hosts are challenged, and with which kinds.
///
/// - The host pattern is a regular expression (case-insensitive, like `--ignore-hosts`) that must
///   match the **whole** host name, without the port: `api\.example\.com` matches that host only,
///   `.*\.example\.com` every subdomain, `.*` every host.
/// - The kinds follow the last `=`, comma-separated (`ChallengeKind` names, or `all`, `certificates`,
///   `handshakes`); without them every kind is used, in `ChallengeKind.allCases` order. A suffix that
///   cannot be a kind list (it holds characters other than letters, digits, `-`, `_`, `.`, `,` and
///   spaces, as in a look-ahead `(?=…)`) belongs to the pattern. Repeated kinds count once.
///
/// Immutable; the compiled expression is only read (NSRegularExpression is safe to share), which is
/// what makes the `@unchecked Sendable` sound.
public struct ChallengeSpec: @unchecked Sendable, CustomStringConvertible {
    /// The option name in error messages.
    public static let flag = "--challenge"
    /// The option that sets how often a challenge comes (see `ChallengeRotation`).
    public static let everyFlag = "--challenge-every"

    /// The host pattern as given.
    public let pattern: String
    /// The kinds to rotate through, in order, each once.
    public let kinds: [ChallengeKind]
    private let expression: NSRegularExpression

    /// Parses one value of `flag`; throws naming the flag and the bad part.
    public init(parsing argument: String, flag: String = ChallengeSpec.flag) throws(ChallengeSpecError) {
        func failure(_ problem: String) -> ChallengeSpecError {
            ChallengeSpecError(flag: flag, argument: argument, problem: problem)
        }
        var pattern = argument
        var kinds = ChallengeKind.allCases
        if let equals = argument.lastIndex(of: "="), Self.isKindList(argument[argument.index(after: equals)...]) {
            pattern = String(argument[..<equals])
            kinds = try Self.parseKinds(String(argument[argument.index(after: equals)...]), failure: failure)
        }
        guard !pattern.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw failure("the host pattern before '=' is empty (use '.*' for every host)")
        }
        do {
            // Compile the pattern alone first, so that an unbalanced one cannot pair with the anchoring group.
            _ = try NSRegularExpression(pattern: pattern, options: [.caseInsensitive])
            expression = try NSRegularExpression(pattern: "^(?:\(pattern))$", options: [.caseInsensitive])
        } catch {
            throw failure(
                "the host pattern '\(pattern)' is not a valid regular expression: \(error.localizedDescription)")
        }
        self.pattern = pattern
        self.kinds = kinds
    }

    /// Whether everything after the last `=` reads as a list of kind names.
    private static func isKindList(_ text: Substring) -> Bool {
        text.allSatisfy { $0.isLetter || $0.isNumber || "-_., ".contains($0) }
    }

    private static func parseKinds(
        _ list: String, failure: (String) -> ChallengeSpecError
    ) throws(ChallengeSpecError) -> [ChallengeKind] {
        let names = list.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard names.contains(where: { !$0.isEmpty }) else {
            throw failure("no kinds after '=' (leave out '=' for every kind; kinds: \(knownNames))")
        }
        var kinds: [ChallengeKind] = []
        for name in names {
            let group: [ChallengeKind]
            switch ChallengeKind.squeezed(name) {
            case "": throw failure("an empty kind in '\(list)' (a doubled or trailing comma)")
            case "all": group = ChallengeKind.allCases
            case "certificates", "certificate": group = ChallengeKind.all(.certificate)
            case "handshakes", "handshake": group = ChallengeKind.all(.handshake)
            default:
                guard let kind = ChallengeKind(name: name) else {
                    throw failure("unknown kind '\(name)' (kinds: \(knownNames))")
                }
                group = [kind]
            }
            for kind in group where !kinds.contains(kind) { kinds.append(kind) }
        }
        return kinds
    }

    /// The names an error lists: every kind, then the groups.
    static var knownNames: String {
        (ChallengeKind.allCases.map(\.rawValue) + ["all", "certificates", "handshakes"]).joined(separator: ", ")
    }

    /// Whether `host` (a name or an IP literal; case, brackets and a trailing dot do not matter) is
    /// matched by the pattern as a whole.
    public func matches(host: String) -> Bool {
        let name = LeafCertificateCache.normalize(host)
        return expression.firstMatch(in: name, range: NSRange(name.startIndex..., in: name)) != nil
    }

    /// `PATTERN=kind,kind`, the canonical spelling.
    public var description: String { "\(pattern)=\(kinds.map(\.rawValue).joined(separator: ","))" }

    /// Parses a `--challenge-every` value: a whole number of at least 1.
    public static func parseEvery(_ text: String, flag: String = ChallengeSpec.everyFlag) throws(ChallengeSpecError)
        -> Int
    {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard let value = Int(trimmed), value >= 1 else {
            throw ChallengeSpecError(
                flag: flag, argument: text,
                problem: "expected a whole number of at least 1 (1: challenge every connection; 2: every other one)")
        }
        return value
    }
}
