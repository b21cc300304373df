/// Translates one `--ignore-hosts`/`--allow-hosts` pattern (an ICU regular expression, as `HostFilter`'s
/// `NSRegularExpression` reads it) into the source of an ECMAScript `RegExp` with the same meaning on the
/// `host:port` strings both test, for the PAC file.
///
/// Only the part of the syntax the two dialects share with one meaning is translated: literals, `.`, `^`, `$`,
/// `|`, groups (`(…)`, `(?:…)`, look-around, named groups), greedy and lazy quantifiers (`*`, `+`, `?`, `{n,m}`),
/// simple character classes, and the escapes `\d \D \w \W \s \S \b \B \t \n \r \f`, `\xhh`, `\uhhhh` and escaped
/// punctuation; `\A` becomes `^` and `\z`/`\Z` become `$` (a `host:port` has no line breaks). Anything ICU reads
/// differently or JavaScript lacks (inline flags, possessive quantifiers, atomic groups, `\Q…\E`, `\p{…}`,
/// nested or intersected sets, POSIX classes, back references, octal escapes, non-ASCII text) is refused with a
/// reason: the PAC then leans towards the proxy for that pattern (see `ProxyAutoConfig`), never away from it.
/// Matching stays case-insensitive (the `i` flag), as in `HostFilter`.
///
/// A pure function of its input; bounded by the pattern's length.
enum PACPatternTranslator {
    /// What became of one pattern.
    enum Outcome: Equatable {
        /// The ECMAScript source (without slashes or flags).
        case translated(String)
        /// Not translatable without changing its meaning, and why.
        case refused(String)
    }

    /// Translates `pattern` (see the type's contract).
    static func translate(_ pattern: String) -> Outcome {
        let characters = Array(pattern.unicodeScalars)
        guard characters.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) else {
            return .refused("it holds characters outside printable ASCII")
        }
        var scanner = Scanner(characters: characters)
        do {
            return .translated(try scanner.expression())
        } catch {
            return .refused(error.reason)
        }
    }

    /// Why a construct cannot be carried over.
    struct Refusal: Error {
        let reason: String
    }

    /// One pass over the pattern, copying what both dialects read alike.
    struct Scanner {
        let characters: [Unicode.Scalar]
        var index = 0
        var output = ""

        init(characters: [Unicode.Scalar]) { self.characters = characters }

        var current: Unicode.Scalar? { index < characters.count ? characters[index] : nil }

        func peek(_ offset: Int) -> Unicode.Scalar? {
            index + offset < characters.count ? characters[index + offset] : nil
        }

        /// The whole pattern.
        mutating func expression() throws(Refusal) -> String {
            while let character = current {
                switch character {
                case "\\": try escape(inClass: false)
                case "[": try characterClass()
                case "(": try group()
                case "*", "+", "?":
                    output.unicodeScalars.append(character)
                    index += 1
                    try quantifierSuffix()
                case "{": try interval()
                default:
                    output.unicodeScalars.append(character)
                    index += 1
                }
            }
            return output
        }

        /// After a quantifier: a lazy `?` is shared; a possessive `+` is ICU's alone.
        mutating func quantifierSuffix() throws(Refusal) {
            if current == "+" { throw Refusal(reason: "possessive quantifiers (*+, ++, ?+, {n}+) are ICU-only") }
            if current == "?" {
                output += "?"
                index += 1
            }
        }

        /// `{n}`, `{n,}`, `{n,m}`; anything else after `{` is refused.
        mutating func interval() throws(Refusal) {
            var text = "{"
            var cursor = index + 1
            var digits = 0
            var comma = false
            while cursor < characters.count, characters[cursor] != "}" {
                let character = characters[cursor]
                if character == ",", !comma, digits > 0 {
                    comma = true
                } else if !("0"..."9").contains(character) {
                    throw Refusal(reason: "a '{' that is not a {n,m} interval")
                }
                digits += 1
                text.unicodeScalars.append(character)
                cursor += 1
            }
            guard cursor < characters.count, digits > 0 else {
                throw Refusal(reason: "a '{' that is not a {n,m} interval")
            }
            output += text + "}"
            index = cursor + 1
            try quantifierSuffix()
        }

        /// `(`, `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?<name>`; other `(?` forms are refused.
        mutating func group() throws(Refusal) {
            guard peek(1) == "?" else {
                output += "("
                index += 1
                return
            }
            switch (peek(2), peek(3)) {
            case (":", _), ("=", _), ("!", _):
                output += "(?" + String(peek(2)!)
                index += 3
            case ("<", "="), ("<", "!"):
                output += "(?<" + String(peek(3)!)
                index += 4
            case ("<", let first?) where first.properties.isAlphabetic:
                output += "(?<"
                index += 3
            default:
                throw Refusal(reason: "inline flags, atomic groups and comments ((?i), (?>…), (?#…)) are ICU-only")
            }
        }

        /// One escape (the backslash is at `index`).
        mutating func escape(inClass: Bool) throws(Refusal) {
            guard let next = peek(1) else { throw Refusal(reason: "a trailing backslash") }
            switch next {
            case "d", "D", "w", "W", "s", "S", "t", "n", "r", "f":
                output += "\\" + String(next)
                index += 2
            case "b", "B":
                guard !inClass else { throw Refusal(reason: "\\b inside a set means a backspace in JavaScript only") }
                output += "\\" + String(next)
                index += 2
            case "A":
                guard !inClass else { throw Refusal(reason: "\\A inside a set") }
                output += "^"
                index += 2
            case "z", "Z":
                guard !inClass else { throw Refusal(reason: "\\z inside a set") }
                output += "$"
                index += 2
            case "x":
                try hexEscape(letter: "x", count: 2)
            case "u":
                try hexEscape(letter: "u", count: 4)
            default:
                if next.properties.isAlphabetic || ("0"..."9").contains(next) {
                    throw Refusal(
                        reason: "the escape \\\(next) means something else (or nothing) in JavaScript's dialect")
                }
                output += "\\" + String(next)
                index += 2
            }
        }

        /// `\xhh` or `\uhhhh` with exactly `count` hex digits.
        mutating func hexEscape(letter: String, count: Int) throws(Refusal) {
            var digits = ""
            for offset in 0..<count {
                guard let digit = peek(2 + offset), digit.properties.isASCIIHexDigit else {
                    throw Refusal(reason: "\\\(letter) needs exactly \(count) hex digits here")
                }
                digits.unicodeScalars.append(digit)
            }
            output += "\\" + letter + digits
            index += 2 + count
        }

        /// A simple set `[…]` or `[^…]`: ranges, literals and shared escapes; no nesting, `&&`, `--` or POSIX.
        mutating func characterClass() throws(Refusal) {
            output += "["
            index += 1
            if current == "^" {
                output += "^"
                index += 1
            }
            if current == "]" { throw Refusal(reason: "a set that starts with ']'") }
            while let character = current {
                switch character {
                case "]":
                    output += "]"
                    index += 1
                    return
                case "\\":
                    try escape(inClass: true)
                case "[":
                    throw Refusal(reason: "nested sets and POSIX classes ([[:alpha:]]) are ICU-only")
                case "&" where peek(1) == "&", "-" where peek(1) == "-":
                    throw Refusal(reason: "set operations (&&, --) are ICU-only")
                default:
                    output.unicodeScalars.append(character)
                    index += 1
                }
            }
            throw Refusal(reason: "an unclosed set")
        }
    }
}
