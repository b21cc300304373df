import ATSTestSupport
import ArgumentParser
import Foundation
import Testing

@testable import ats_proxy

/// The commands the README and `docs/` show, used the way a reader uses them: every `ats-proxy` command in a code
/// block or an inline code span parses with the real command line, and the README's quick start runs exactly as
/// written against servers the test starts.
@Suite struct DocumentationExamplesTests {
    static let repository = CLITests.repository

    /// One command a document shows: where it is and its text as written.
    struct ShownCommand: CustomTestStringConvertible, Sendable {
        let file: String
        let line: Int
        let text: String
        var testDescription: String { "\(file):\(line): \(text)" }
    }

    /// Every `ats-proxy` command in README.md and docs/*.md: lines of `sh` code blocks that start with `ats-proxy`
    /// or `.build/debug/ats-proxy`, and inline code spans that start with `ats-proxy ` (unlabelled blocks hold
    /// output, which may start with the program's name too).
    static let shownCommands: [ShownCommand] = {
        let docs =
            (try? FileManager.default.contentsOfDirectory(atPath: repository.appendingPathComponent("docs").path))
            ?? []
        let files = ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
        var found: [ShownCommand] = []
        for file in files {
            let text = (try? String(contentsOf: repository.appendingPathComponent(file), encoding: .utf8)) ?? ""
            var block: String?  // the open code block's language ("" when unlabelled)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                if line.hasPrefix("```") {
                    block = block == nil ? String(line.dropFirst(3)) : nil
                    continue
                }
                if let language = block {
                    guard language == "sh" else { continue }
                    if line.hasPrefix("ats-proxy ") || line.hasPrefix(".build/debug/ats-proxy ") {
                        found.append(ShownCommand(file: file, line: index + 1, text: String(line)))
                    }
                    continue
                }
                for span in inlineSpans(String(line)) where span.hasPrefix("ats-proxy ") {
                    found.append(ShownCommand(file: file, line: index + 1, text: span))
                }
            }
        }
        return found
    }()

    /// The contents of the inline code spans (single backticks) of one line of Markdown.
    static func inlineSpans(_ line: String) -> [String] {
        line.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// The arguments a reader would type for `text`: shell words (single and double quotes honoured), without the
    /// program name, a trailing `# comment`, `&` or `> file`. Synopsis notation is filled in the way its reader
    /// fills it: `[--option value]` is used, `[options]`-style groups of words are left out, `a|b` takes the first
    /// alternative, and the placeholders `URL…`, `COMMAND`, `ARGS…` and `PATTERN` get example values.
    static func arguments(_ text: String) -> [String] {
        var words: [(word: String, quoted: Bool)] = []
        var current = ""
        var quoted = false
        var quote: Character?
        var started = false
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
                continue
            }
            switch character {
            case "'", "\"":
                quote = character
                quoted = true
                started = true
            case " ", "\t":
                if started { words.append((current, quoted)) }
                current = ""
                quoted = false
                started = false
            default:
                current.append(character)
                started = true
            }
        }
        if started { words.append((current, quoted)) }
        var arguments: [String] = []
        var index = 1  // after the program name
        var inOptionalWords = false
        while index < words.count {
            let (word, wasQuoted) = words[index]
            index += 1
            if wasQuoted {
                arguments.append(word)
                continue
            }
            if word.hasPrefix("#") || word == "&" { break }
            if word == ">" {
                index += 1
                continue
            }
            var value = word
            if value.hasPrefix("[") {
                value.removeFirst()
                // `[proxy options]`, `[options]`: a group of words that stands for any options.
                if !value.hasPrefix("-") && !value.contains("/") && !value.contains(".") {
                    inOptionalWords = !value.hasSuffix("]")
                    continue
                }
            }
            if inOptionalWords {
                inOptionalWords = !value.hasSuffix("]")
                continue
            }
            if value.hasSuffix("]") { value.removeLast() }
            if let bar = value.firstIndex(of: "|") { value = String(value[..<bar]) }
            switch value {
            case "URL…": arguments.append("https://example.com/")
            case "COMMAND": arguments.append("true")
            case "ARGS…": continue
            case "PATTERN": arguments.append("example")
            default: arguments.append(value)
            }
        }
        return arguments
    }

    @Test("the documents show a plausible number of ats-proxy commands (the extraction finds them)")
    func extractionFindsTheCommands() {
        #expect(Self.shownCommands.count >= 50, "\(Self.shownCommands.count) commands found")
        #expect(Self.shownCommands.contains { $0.file == "README.md" && $0.text.hasPrefix(".build/debug/ats-proxy") })
        #expect(Self.shownCommands.contains { $0.file.hasPrefix("docs/") })
    }

    @Test("the synopsis notation is filled as a reader fills it")
    func synopsisNotation() {
        #expect(
            Self.arguments("ats-proxy diagnose https://a/ [--verbose] [--config Info.plist] [--platform ios:18.0]")
                == ["diagnose", "https://a/", "--verbose", "--config", "Info.plist", "--platform", "ios:18.0"])
        #expect(
            Self.arguments("ats-proxy lint --config I [--format json|sarif]") == [
                "lint", "--config", "I", "--format", "json",
            ])
        #expect(Self.arguments("ats-proxy exec [proxy options] -- COMMAND ARGS…") == ["exec", "--", "true"])
        #expect(
            Self.arguments("ats-proxy explain --af-policy '.*\\.x=none' https://a/   # why")
                == ["explain", "--af-policy", ".*\\.x=none", "https://a/"])
        #expect(Self.arguments("ats-proxy lint --format sarif > out.sarif") == ["lint", "--format", "sarif"])
        #expect(Self.arguments("ats-proxy run --web 127.0.0.1:8081 &") == ["run", "--web", "127.0.0.1:8081"])
    }

    /// Whether `arguments` only name commands (`ca`, `ca install|uninstall`, `exec`): prose refers to a command
    /// that way without giving a command line to run. Each name (and each `|` alternative) must be a subcommand of
    /// the one before it.
    static func namesCommands(_ text: String) -> Bool? {
        var words = text.split(separator: " ").dropFirst().map(String.init)[...]
        guard !words.isEmpty, words.allSatisfy({ $0.allSatisfy { $0.isLetter || $0 == "-" || $0 == "|" } }),
            words.allSatisfy({ !$0.hasPrefix("-") })
        else { return nil }
        var level: [any ParsableCommand.Type] = ATSProxyCommand.configuration.subcommands
        if words.first == "help" { words = words.dropFirst() }  // ArgumentParser's own `help SUBCOMMAND`
        for word in words {
            let alternatives = word.split(separator: "|").map(String.init)
            let found = alternatives.compactMap { name in level.first { $0._commandName == name } }
            guard found.count == alternatives.count else { return false }
            level = found.flatMap { $0.configuration.subcommands }
        }
        return true
    }

    @Test("prose that names a command names one that exists")
    func namedCommands() {
        #expect(Self.namesCommands("ats-proxy ca install|uninstall") == true)
        #expect(Self.namesCommands("ats-proxy exec") == true)
        #expect(Self.namesCommands("ats-proxy ca instal") == false)
        #expect(Self.namesCommands("ats-proxy ca install --keychain") == nil)
        #expect(Self.namesCommands("ats-proxy help exec") == true)
    }

    @Test(
        "every ats-proxy command the README and docs/ show parses with the real command line", arguments: shownCommands)
    func shownCommandParses(_ command: ShownCommand) throws {
        if let named = Self.namesCommands(command.text) {
            #expect(named, "\(command.file):\(command.line): `\(command.text)` names no ats-proxy command")
            return
        }
        let arguments = Self.arguments(command.text)
        do {
            _ = try ATSProxyCommand.parseCommandLine(arguments)
        } catch {
            // --help, --version and completion scripts end parsing with a clean exit. The pins folder an
            // --af-policy example names (the reader's app's) is checked while parsing; its absence here is not the
            // example's fault, and nothing else may fail that way.
            let code = ATSProxyCommand.exitCode(for: error)
            let message = ATSProxyCommand.message(for: error)
            #expect(
                code == .success || (message.contains("pins=") && message.hasSuffix(": no such file or directory")),
                "\(command.file):\(command.line): `\(command.text)` does not parse: \(ATSProxyCommand.message(for: error))"
            )
        }
    }
}

/// The README's quick start ("Using the proxy") run exactly as written: the proxy on its default port 8080, the CA
/// at the per-user path the README names, `api.example.com` over HTTPS and `http://example.com/` over cleartext.
/// It runs in private mount and network namespaces (`unshare`), so port 8080, port 443 and the names are the
/// test's own: `/etc/hosts` is replaced inside by a file that sends both names to 127.0.0.1, an HTTPS origin with a
/// leaf this test mints listens on 127.0.0.1:443, `HOME` is a temporary folder and `SSL_CERT_FILE` names the test
/// root as the proxy's system trust. Nothing outside the namespaces changes.
@Suite struct QuickStartExampleTests {
    /// `unshare` as root, or with a user namespace mapping the caller to root, plus `ip` to bring up loopback.
    static let isolation: [String]? = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"),
            FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
                || FileManager.default.isExecutableFile(
                    atPath: "/sbin/ip")
        else { return nil }
        let candidates = getuid() == 0 ? [["-m", "-n"], ["-r", "-m", "-n"]] : [["-r", "-m", "-n"]]
        for flags in candidates {
            let probe = try? CLITests.runTool("/usr/bin/unshare", flags + ["/bin/true"], timeout: 10)
            if probe?.status == 0 { return ["/usr/bin/unshare"] + flags }
        }
        return nil
    }()

    /// The README's first shell block after "## Using the proxy", line by line.
    static func quickStart() throws -> [String] {
        let readme = try String(
            contentsOf: CLITests.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "## Using the proxy"))
        let rest = readme[section.upperBound...]
        let open = try #require(rest.range(of: "```sh\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        return rest[open.upperBound..<close.lowerBound].split(separator: "\n").map(String.init)
    }

    @Test(
        "the README's quick start runs as written: the banner's CA path, the HTTPS load allowed, the cleartext one 403 -1022",
        // Under CI (`CI` set) missing isolation fails the test instead of skipping it.
        .enabled(
            if: isolation != nil || ProcessInfo.processInfo.environment["CI"] != nil,
            "needs unshare (root or user namespaces) and ip"),
        .timeLimit(.minutes(2)))
    func quickStartRunsAsWritten() throws {
        let lines = try Self.quickStart()
        try #require(lines.count == 4, "the quick start changed shape: \(lines)")
        #expect(lines[0].hasPrefix(".build/debug/ats-proxy "))
        let directory = try TemporaryDirectory("quick-start")
        let pki = try TestPKI(name: "quick-start", directory: directory)
        let leaf = try pki.leaf(["api.example.com"], file: "api")
        let hosts = try directory.write("hosts", "127.0.0.1 localhost api.example.com example.com\n")
        try FileManager.default.createDirectory(atPath: directory.file("home"), withIntermediateDirectories: true)
        let origin = try directory.write(
            "origin.py",
            """
            import http.server, ssl, sys
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    body = b"hello from api.example.com\\n"
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *args):
                    pass
            server = http.server.HTTPServer(("127.0.0.1", 443), Handler)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[1], sys.argv[2])
            server.socket = context.wrap_socket(server.socket, server_side=True)
            server.timeout = 30
            server.handle_request()
            """)
        // Each README line runs as written (comments included: a line inside `{ … }` with the brace on the next
        // line); the first (the proxy, in the foreground of a reader's terminal) runs in the background here, and
        // the script stops it with SIGINT (Ctrl-C) after the last line.
        let script = try directory.write(
            "quick-start.sh",
            """
            set -um
            ip link set lo up
            mount --bind \(hosts) /etc/hosts
            python3 \(origin) \(leaf.certificatePath) \(leaf.keyPath) &
            cd \(CLITests.repository.path)
            { \(lines[0])
            } >\(directory.file("proxy.out")) 2>&1 &
            proxy=$!
            for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done
            \(lines[1])
            { \(lines[2])
            } >\(directory.file("https.out")) 2>\(directory.file("https.err"))
            echo "curl exit $?" >>\(directory.file("https.err"))
            { \(lines[3])
            } >\(directory.file("cleartext.out")) 2>/dev/null
            kill -INT -- -$proxy
            wait $proxy
            """)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory.file("home")
        environment.removeValue(forKey: "XDG_DATA_HOME")
        environment.removeValue(forKey: "ATS_PROXY_CA_DIR")
        environment["SSL_CERT_FILE"] = pki.caPath
        // The build's binary: the README's `.build/debug/ats-proxy` must be the one under test.
        try #require(
            CLITests.binary.resolvingSymlinksInPath().path
                == CLITests.repository.appendingPathComponent(".build/debug/ats-proxy").resolvingSymlinksInPath().path,
            "the README runs .build/debug/ats-proxy; this run tests \(CLITests.binary.path)")
        let isolation = try #require(Self.isolation, "unshare -m -n (or -r -m -n) and ip are needed here")
        let result = try CLITests.launch(
            URL(fileURLWithPath: isolation[0]), Array(isolation.dropFirst()) + ["/bin/bash", script],
            environment: environment, timeout: 90)
        let read = { (name: String) in
            String(decoding: FileManager.default.contents(atPath: directory.file(name)) ?? Data(), as: UTF8.self)
        }
        let proxy = read("proxy.out")
        #expect(result.status == 0, "\(result.stderr)\n\(proxy)")
        let caPath = directory.file("home") + "/.local/share/ats-proxy/ats-proxy-ca.pem"
        #expect(proxy.contains("CA certificate: \(caPath)"), "the README's CA= line names another path:\n\(proxy)")
        #expect(proxy.contains("listening on 127.0.0.1:8080"))
        #expect(read("https.out") == "hello from api.example.com\n", "\(read("https.err"))")
        #expect(proxy.contains("GET https://api.example.com/ → allowed 200"))
        let cleartext = read("cleartext.out")
        #expect(cleartext.contains("NSURLErrorDomain -1022"), "\(cleartext)")
        #expect(proxy.contains("GET http://example.com/ → blocked -1022"))
    }
}
