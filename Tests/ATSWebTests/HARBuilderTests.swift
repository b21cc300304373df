import ATSProxyCore
import Foundation
import Testing

@testable import ATSWeb

@Suite struct HARBuilderTests {
    @Test func entryCarriesVerdictVersionQueryAndRedactedSecrets() throws {
        var record = sampleRecord(
            "http://plain.example/path?a=1&b=two%20words", result: .blockedCleartext, errorCode: -1022, status: 403)
        record.httpProtocol = "h2"
        let builder = HARBuilder(allowSecrets: false, creatorVersion: "9.9")
        let archive = builder.archive([Flow(id: 1, record: record)])
        #expect(archive.log.version == "1.2")
        #expect(archive.log.creator == HARArchive.Creator(name: "ats-proxy", version: "9.9"))
        let entry = try #require(archive.log.entries.first)
        #expect(entry.request.httpVersion == "HTTP/2.0")
        #expect(entry.request.queryString.map(\.value) == ["1", "two words"])
        #expect(entry.request.headers.first { $0.name == "Cookie" }?.value == "<redacted 3 bytes>")
        #expect(entry.request.cookies.isEmpty)
        #expect(entry._atsOutcome == "blocked" && entry._atsCode == "-1022")
        #expect(entry._atsFix == "add NSExceptionAllowsInsecureHTTPLoads")
        #expect(entry.response.status == 403 && entry.response.content.mimeType == "text/plain")
        #expect(entry.time == 3.5 && entry.timings.wait == 3.5 && entry.timings.connect == -1)
        #expect(entry.startedDateTime == "2023-11-14T22:13:20.000Z")
        #expect(entry.connection == "ABC.1")

        let open = HARBuilder(allowSecrets: true, creatorVersion: "9.9").archive([Flow(id: 1, record: record)])
        #expect(open.log.entries.first?.request.cookies == [HARArchive.Cookie(name: "a", value: "b")])
    }

    @Test func phaseTimingsBecomeHARTimingsThatAddUpToTheTotal() {
        var record = sampleRecord("https://a.example/")
        record = record.updating {
            $0.durationMilliseconds = 20
            $0.timings = RequestRecord.Timings(connectStart: 1, connected: 3, secured: 8, firstByte: 12)
        }
        let entry = HARBuilder(allowSecrets: false, creatorVersion: "1").entry(record)
        #expect(
            entry.timings
                == HARArchive.Timings(blocked: 1, dns: -1, connect: 7, send: 0, wait: 4, receive: 8, ssl: 5))
        #expect(entry.time == 20)
        // A reused connection: no connect phases, the wait runs from the start.
        record = record.updating { $0.timings = RequestRecord.Timings(firstByte: 6) }
        let reused = HARBuilder(allowSecrets: false, creatorVersion: "1").entry(record)
        #expect(reused.timings.connect == -1 && reused.timings.ssl == -1 && reused.timings.blocked == -1)
        #expect(reused.timings.wait == 6 && reused.timings.receive == 14 && reused.time == 20)
    }

    /// Differences of phase ends are written as the numbers they are (`1.1`), without binary float noise.
    @Test func timingsCarryNoFloatNoise() throws {
        let record = sampleRecord("https://a.example/").updating {
            $0.durationMilliseconds = 3.3
            $0.timings = RequestRecord.Timings(connectStart: 0.1, connected: 1.2, firstByte: 2.3)
        }
        #expect(1.2 - 0.1 != 1.1, "the arithmetic itself is noisy")
        let entry = HARBuilder(allowSecrets: false, creatorVersion: "1").entry(record)
        #expect(entry.timings.connect == 1.1 && entry.timings.wait == 1.1 && entry.timings.receive == 1.0)
        let data = try HARBuilder(allowSecrets: false, creatorVersion: "1").data([Flow(id: 1, record: record)])
        let text = String(decoding: data, as: UTF8.self)
        #expect(!text.contains("99999") && !text.contains("00001"), "\(text)")
    }

    @Test func serverIPAddressIsTheRecordsServerAddressAndAbsentWithoutOne() throws {
        let builder = HARBuilder(allowSecrets: false, creatorVersion: "1")
        let sent = sampleRecord("https://a.example/").updating { $0.serverAddress = "::1" }
        let unsent = sampleRecord("http://plain.example/", result: .blockedCleartext, errorCode: -1022, status: 403)
        let archive = builder.archive([Flow(id: 1, record: sent), Flow(id: 2, record: unsent)])
        #expect(archive.log.entries.map(\.serverIPAddress) == ["::1", nil])
        // In the file the field is written for the first entry only (HAR 1.2 makes it optional).
        let data = try builder.data([Flow(id: 1, record: sent), Flow(id: 2, record: unsent)])
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let entries = (object?["log"] as? [String: Any])?["entries"] as? [[String: Any]] ?? []
        #expect(entries.count == 2)
        #expect(entries.first?["serverIPAddress"] as? String == "::1")
        #expect(entries.last?.keys.contains("serverIPAddress") == false)
    }

    @Test func failedLoadWithoutResponseHasStatusZero() throws {
        let record = sampleRecord("https://down.example/", result: .failed, errorCode: -1004, status: nil)
        let entry = HARBuilder(allowSecrets: false, creatorVersion: "1").entry(record)
        #expect(entry.response.status == 0 && entry.response.httpVersion == "" && entry.response.bodySize == -1)
        #expect(entry._atsOutcome == "network error" && entry._atsCode == "-1004")
        let data = try HARBuilder(allowSecrets: false, creatorVersion: "1").data([Flow(id: 1, record: record)])
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        #expect((object?["log"] as? [String: Any])?["entries"] is [Any])
    }

    @Test func webServerAcceptsOnlyHostsThatNameItByAddress() {
        for host in [nil, "127.0.0.1:8081", "localhost:8081", "[::1]:8081", "ats-proxy.invalid", "192.168.1.5"] {
            #expect(WebServer.isAcceptableHost(host), "\(host ?? "nil")")
        }
        for host in ["evil.example.com", "evil.example.com:8081", "127.0.0.1.nip.io", "[::1"] {
            #expect(!WebServer.isAcceptableHost(host), "\(host)")
        }
    }

    @Test func pageEscapesTheTitleAndCarriesNoExternalReference() {
        let html = WebPage.html(title: "<App> & \"x\"", capacity: 7)
        #expect(html.contains("&lt;App&gt; &amp; &quot;x&quot;"))
        #expect(html.contains("const capacity=7;"))
        #expect(!html.contains("src=") && !html.contains("https://"))
    }

    /// Every outcome, the challenge ones included, can be filtered on and has its colour; challenge findings
    /// are counted in the header beside the violations.
    @Test func pageOffersEveryOutcomeAndCountsChallengeFindings() {
        let html = WebPage.html(title: "t", capacity: 7)
        for outcome in LoadOutcome.allCases {
            #expect(html.contains("<option>\(outcome.rawValue)</option>"), "\(outcome)")
            #expect(html.contains(".o-\(outcome.slug){--c:"), "\(outcome)")
        }
        #expect(html.contains(#"if(r.dataset.outcome==="challenge finding")cf++;"#))
        #expect(html.contains(#"" forged servers accepted (challenge findings), ""#))
    }
}
