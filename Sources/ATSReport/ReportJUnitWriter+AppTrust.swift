/// The "App trust" suite of `junit.xml`. One test case per host and check, so that every result is its own
/// line in a CI dashboard:
/// - per host with an `--af-policy`: `HOST: pinning, real chain` (a refusal is a
///   `<failure type="PinningRefusesRealChain">`: the app would refuse the production server) and
///   `HOST: pinning, interception chain` (a refusal is a `<failure type="PinningBreaksUnderInterception">`);
/// - per host and challenge kind shown: `HOST: challenge KIND` (an acceptance is a
///   `<failure type="ChallengeAccepted">`; a kind every connection refused passes).
/// Each failure's message is the one-line meaning of the result.
extension ReportJUnitWriter {
    /// One test case of the suite.
    struct AppTrustCase {
        var classname: String
        var name: String
        /// `(type, message, detail)`; nil for a pass.
        var failure: (type: String, message: String, detail: String)?
        var out: String
    }

    static func appTrustCases(_ section: AppTrustSection) -> [AppTrustCase] {
        var cases: [AppTrustCase] = []
        for host in section.hosts {
            if let pinning = host.pinning {
                let context =
                    "AFSecurityPolicy \(pinning.policy): scenario \(pinning.scenario), \(pinning.scenarioMeaning)"
                for (chain, verdict, type) in [
                    ("real chain", pinning.realChain, "PinningRefusesRealChain"),
                    ("interception chain", pinning.interceptionChain, "PinningBreaksUnderInterception"),
                ] {
                    let counts = "\(verdict.acceptances) connection(s) accepted, \(verdict.refusals) refused"
                    let failure =
                        verdict.accepted
                        ? nil
                        : (
                            type,
                            "the app's pinning policy refuses the \(chain) of \(host.host): \(verdict.meaning)",
                            "\(context)\n\(counts)"
                        )
                    cases.append(
                        AppTrustCase(
                            classname: "ats-proxy.app-trust.pinning", name: "\(host.host): pinning, \(chain)",
                            failure: failure, out: "\(context)\n\(counts)\n\(verdict.meaning)"))
                }
            }
            for challenge in host.challenges {
                let counts = "\(challenge.passes) connection(s) refused, \(challenge.findings) accepted"
                let presented = challenge.presents.map { "presented \($0)\n" } ?? ""
                let failure: (type: String, message: String, detail: String)? =
                    switch challenge.verdict {
                    case .finding: ("ChallengeAccepted", challenge.meaning, "\(presented)\(counts)")
                    case .pass: nil
                    }
                cases.append(
                    AppTrustCase(
                        classname: "ats-proxy.app-trust.challenge", name: "\(host.host): challenge \(challenge.kind)",
                        failure: failure, out: "\(presented)\(counts)\n\(challenge.meaning)"))
            }
        }
        return cases
    }

    /// The suite's lines (indented as the ATS suite's).
    static func appTrustSuite(_ cases: [AppTrustCase], timestamp: String) -> [String] {
        let e = PlistFragmentWriter.escape
        let failures = cases.filter { $0.failure != nil }.count
        var lines = [
            #"  <testsuite name="App trust" tests="\#(cases.count)" failures="\#(failures)" errors="0" skipped="0" time="0.000" timestamp="\#(e(timestamp))">"#
        ]
        for testCase in cases {
            lines.append(
                #"    <testcase classname="\#(e(testCase.classname))" name="\#(e(testCase.name))" time="0.000">"#)
            if let failure = testCase.failure {
                lines.append(
                    #"      <failure message="\#(e(failure.message))" type="\#(e(failure.type))">\#(e(failure.detail))</failure>"#
                )
            }
            lines.append("      <system-out>\(e(testCase.out))</system-out>")
            lines.append("    </testcase>")
        }
        lines.append("  </testsuite>")
        return lines
    }
}
