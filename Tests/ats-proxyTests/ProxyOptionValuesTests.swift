import ATSTestSupport
import ArgumentParser
import Foundation
import Testing

@testable import ats_proxy

/// `--http2` and `--source` are typed options (`HTTP2Setting`, `SourceOption`): these pin what a user sees of
/// them, the accepted words, the defaults, what each word turns on, and that any other word is a usage error
/// (exit status 2) naming the accepted words, on the command line and in `ATS_PROXY_*` variables alike.
@Suite struct ProxyOptionValuesTests {
    @Test("the accepted words and the defaults are the documented ones")
    func wordsAndDefaults() throws {
        #expect(HTTP2Setting.allValueStrings == ["on", "client", "upstream", "off"])
        #expect(SourceOption.allValueStrings == ["auto", "urlsession", "webkit", "media"])
        let options = try ProxyOptions.parse([])
        #expect(options.http2 == .on)
        #expect(options.source == .auto)
    }

    @Test("--http2 offers h2 where its word says: on both sides, client, upstream or nowhere")
    func http2Sides() throws {
        let sides = try ["on", "client", "upstream", "off"].map { word in
            let setting = try ProxyOptions.parse(["--http2", word]).http2
            return "\(word): \(setting.offersToClients) \(setting.offersToOrigins)"
        }
        #expect(sides == ["on: true true", "client: true false", "upstream: false true", "off: false false"])
    }

    @Test("--source auto reads each request's User-Agent; the other words fix the source")
    func sourceSettings() throws {
        #expect(try ProxyOptions.parse(["--source", "auto"]).source.setting == .auto)
        #expect(try ProxyOptions.parse(["--source", "urlsession"]).source.setting == .fixed(.urlsession))
        #expect(try ProxyOptions.parse(["--source", "webkit"]).source.setting == .fixed(.webkit))
        #expect(try ProxyOptions.parse(["--source", "media"]).source.setting == .fixed(.media))
    }

    @Test(
        "another word is a usage error naming the accepted ones",
        arguments: [
            ("--http2", "h2", ["on", "client", "upstream", "off"]),
            ("--source", "safari", ["auto", "urlsession", "webkit", "media"]),
        ])
    func unknownWord(option: String, word: String, accepted: [String]) throws {
        do {
            _ = try ATSProxyCommand.parseCommandLine(["run", option, word])
            Issue.record("\(option) \(word) parsed")
        } catch {
            #expect(ATSProxyCommand.exitCode(for: error) == .validationFailure)
            let message = ATSProxyCommand.message(for: error)
            #expect(message.contains("'\(word)'") && message.contains(option), "\(message)")
            for value in accepted { #expect(message.contains("'\(value)'"), "\(message)") }
        }
        let result = try CLITests.run(["run", option, word])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("'\(word)' is invalid for '\(option)"), "\(result.stderr)")
    }

    @Test("run --help lists each option's words and default")
    func helpListsWords() throws {
        let help = ProxyOptions.helpMessage(columns: 1000)
        #expect(help.contains("(values: on, client, upstream, off; default: on)"), "\(help)")
        #expect(help.contains("(values: auto, urlsession, webkit, media; default: auto)"), "\(help)")
    }

    @Test("an unknown word in ATS_PROXY_HTTP2 or ATS_PROXY_SOURCE is one line naming the accepted words")
    func unknownWordInEnvironment() throws {
        let directory = try TemporaryDirectory("option-values")
        for (variable, word, expected) in [
            ("ATS_PROXY_HTTP2", "h2", "one of on, client, upstream, off"),
            ("ATS_PROXY_SOURCE", "safari", "one of auto, urlsession, webkit, media"),
        ] {
            let result = try Invocation.run(
                ["settings", "show"], in: directory.path,
                environment: Invocation.environment(home: directory.path, [variable: word]))
            #expect(result.status == 2, "\(variable): \(result.stderr)")
            #expect(
                result.stderr
                    == "ats-proxy: error: environment variable \(variable) must be \(expected), found '\(word)'\n")
        }
    }
}
