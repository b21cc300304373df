import ATSPolicy
import ATSTLS
import Foundation
import Testing

@testable import ATSProxyCore

@Suite("DiagnosticsFormatter byte output")
struct DiagnosticsFormatterBytesTests {
    static func record(
        result: RequestRecord.Result = .completed, status: Int? = 200, duration: Double = 12.5,
        retried: Bool? = nil, bytesToClient: Int = 1_234_567_890_123, appTrust: AppTrustRecord? = nil,
        tls: [String: String]? = nil
    ) -> RequestRecord {
        RequestRecord(
            time: Date(timeIntervalSince1970: 1_700_000_000), clientAddress: "127.0.0.1:50000",
            taskID: "2A5C1B4E-0000-4000-8000-000000000001.7", method: "GET", url: "https://api.example.com/v1?q=é",
            httpProtocol: "h2", source: .urlsession, result: result, atsRequired: true,
            ruleChain: ["NSAppTransportSecurity"], rule: "ATS default: TLS 1.2+, forward secrecy",
            fix: result == .completed ? nil : "set NSExceptionAllowsInsecureHTTPLoads",
            errorCode: result == .completed ? nil : -1200,
            streamError: result == .completed ? nil : .secureTransport(-9836), status: status, tls: tls,
            bytesFromClient: 0,
            bytesToClient: bytesToClient, durationMilliseconds: duration,
            consoleLines: result == .completed ? [] : ["Task <X> finished with error [-1200]"],
            retriedOnNewConnection: retried, appTrust: appTrust)
    }

    /// `--af-policy`'s verdicts on a completed request (regression: the byte path dropped their console line).
    static let pinning = AppTrustRecord(
        pinning: AppTrustRecord.Pinning(
            policy: "api\\.example\\.com=public-key,pins=pins", scenario: 4, scenarioMeaning: "pinned keys",
            realChain: AppTrustRecord.Verdict(accepted: true, meaning: "trusted"),
            interceptionChain: AppTrustRecord.Verdict(accepted: false, meaning: "no pinned key")))

    static func joinedText(_ formatter: DiagnosticsFormatter, _ record: RequestRecord) -> [UInt8] {
        var copy = formatter
        return Array(copy.text(record).map { $0 + "\n" }.joined().utf8)
    }

    @Test(
        "the byte path writes exactly the text path's lines",
        arguments: [
            record(), record(status: nil), record(duration: 0.4), record(duration: 86_400_123.6),
            record(retried: true), record(retried: false), record(bytesToClient: 0), record(status: 101),
            record(result: .failed, status: 502), record(result: .blockedCleartext, status: 403),
            record(result: .reported), record(appTrust: pinning),
            record().updating {
                $0.tls = ["version": "TLSv1.3", "cipher": "TLS_AES_128_GCM_SHA256", "group": "x25519"]
            },
            record().updating { $0.tls = ["version": "TLSv1.2", "cipher": "TLS_RSA_WITH_AES_128_GCM_SHA256"] },
            record(result: .failed, status: 502).updating { $0.tls = ["version": "TLSv1.1", "group": "secp256r1"] },
            record().updating {
                $0.tls = ["version": "TLSv1.2", "group": "x25519"]
                $0.systemServices = SystemServicesVerdict(
                    platform: Platform(parsing: "ios:27.0")!, reasons: ["no extended master secret"])
            },
            record(result: .reported), record(appTrust: pinning), record(tls: ["ct": CTStatus.notEvaluatedText]),
            record(tls: ["ct": "complies (embedded SCTs, 2 counted)"]),
        ])
    func bytesMatchText(record: RequestRecord) {
        for level in DiagnosticsLevel.allCases {
            let formatter = DiagnosticsFormatter(level: level, timeZone: TimeZone(identifier: "UTC")!)
            var bytes: [UInt8] = []
            var byteFormatter = formatter
            byteFormatter.appendText(record, to: &bytes)
            let expected = Self.joinedText(formatter, record)
            if level >= .blocks {
                // Blocks carry a wall-clock time: compare with it masked.
                let mask: (String) -> String = {
                    $0.replacingOccurrences(
                        of: #"\d\d:\d\d:\d\d\.\d\d\d"#, with: "HH:MM:SS.mmm", options: .regularExpression)
                }
                #expect(mask(String(decoding: bytes, as: UTF8.self)) == mask(String(decoding: expected, as: UTF8.self)))
            } else {
                #expect(String(decoding: bytes, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
            }
            #expect(bytes.isEmpty == (level == .off))
        }
    }

    @Test func aRecordWithAppPinningVerdictsGetsItsConsoleLineAtLevelOne() {
        var formatter = DiagnosticsFormatter(level: .summary)
        var bytes: [UInt8] = []
        formatter.appendText(Self.record(appTrust: Self.pinning), to: &bytes)
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(
            lines.last
                == "ats-proxy: app pinning for api.example.com (scenario 4): real chain ACCEPT, interception chain REFUSE; interception chain: no pinned key",
            "\(lines)")
    }

    @Test func aConnectionWhoseCTWasNotEvaluatedSaysSoAtLevelOne() {
        var formatter = DiagnosticsFormatter(level: .summary)
        var bytes: [UInt8] = []
        formatter.appendText(Self.record(tls: ["ct": CTStatus.notEvaluatedText]), to: &bytes)
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(
            lines.last
                == "ats-proxy: api.example.com: CT not evaluated: run `ats-proxy ct update` (the chain ends in a system root; a device checks its SCTs)",
            "\(lines)")
        var plain: [UInt8] = []
        formatter.appendText(Self.record(), to: &plain)
        #expect(!String(decoding: plain, as: UTF8.self).contains("CT not evaluated"))
    }

    @Test("decimals are written like String(_:)", arguments: [0, 7, 10, 99, 100, 65_535, -1, -42, Int.max, Int.min])
    func decimals(value: Int) {
        var bytes: [UInt8] = []
        DiagnosticsFormatter.appendDecimal(value, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == String(value))
    }

    @Test("the TLS facts follow the outcome on the level-1 line; a system-services verdict gets its own line")
    func tlsSuffixAndSystemServicesLine() {
        var formatter = DiagnosticsFormatter(level: .summary, timeZone: TimeZone(identifier: "UTC")!)
        let tls = Self.record().updating {
            $0.tls = ["version": "TLSv1.3", "cipher": "TLS_AES_256_GCM_SHA384", "group": "X25519MLKEM768"]
        }
        #expect(
            formatter.text(tls).last
                == "ats-proxy: GET https://api.example.com/v1?q=é → allowed 200 (ATS default: TLS 1.2+, forward secrecy) "
                + "[TLSv1.3 TLS_AES_256_GCM_SHA384, group X25519MLKEM768]")
        #expect(formatter.text(Self.record()).last?.hasSuffix("forward secrecy)") == true)
        let judged = tls.updating {
            $0.systemServices = SystemServicesVerdict(platform: Platform(parsing: "ios:27.0")!, reasons: [])
        }
        #expect(
            formatter.text(judged).last
                == "ats-proxy: system services for api.example.com: meets the iOS 27.0 system-services requirements "
                + "(device management, enrolment, app and profile installation, software update)")
    }
}
