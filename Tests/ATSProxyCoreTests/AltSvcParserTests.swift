import Testing

@testable import ATSProxyCore

/// `Alt-Svc` (RFC 7838) as the record reads it: strict syntax, `clear`, HTTP/3 tokens, and the typed field.
@Suite struct AltSvcParserTests {
    typealias Alternative = AltSvcParser.Alternative

    @Test func readsAlternativesWithParametersAndPercentEncodedIDs() {
        #expect(
            AltSvcParser.parse(#"h3=":443"; ma=86400, h3-29=":443"; ma=3600; persist=1, h2="alt.example.com:8443""#)
                == .alternatives([
                    Alternative(protocolID: "h3", authority: ":443", maxAge: 86400),
                    Alternative(protocolID: "h3-29", authority: ":443", maxAge: 3600),
                    Alternative(protocolID: "h2", authority: "alt.example.com:8443", maxAge: nil),
                ]))
        #expect(
            AltSvcParser.parse(#"w%3Dx%3Ay=":80";ma="60""#)
                == .alternatives([Alternative(protocolID: "w=x:y", authority: ":80", maxAge: 60)]))
        #expect(
            AltSvcParser.parse(#"  , h3=":443" ,, "#)
                == .alternatives([Alternative(protocolID: "h3", authority: ":443")]))
        #expect(
            AltSvcParser.parse(#"h3="[2001:db8::1]:443"; ma=99999999999999999999999"#)
                == .alternatives([Alternative(protocolID: "h3", authority: "[2001:db8::1]:443", maxAge: Int.max)]))
    }

    @Test func clearStandsAlone() {
        #expect(AltSvcParser.parse("clear") == .clear)
        #expect(AltSvcParser.parse(" clear ") == .clear)
        #expect(AltSvcParser.parse(#"clear, h3=":443""#) == .malformed)
        #expect(AltSvcParser.parse("Clear") == .malformed)
    }

    @Test(arguments: [
        "", " ", ",", "h3", "h3=", #"h3=:443"#, #"h3=":443"#, #"h3="443""#, #"h3=":""#, #"h3=":44a""#,
        #"h3=":443";"#, #"h3=":443"; ma"#, #"h3=":443"; ma=x"#, #"h3=":443"; ma=-1"#, #"h3=":443" h2=":443""#,
        #"h%3=":443""#, #"h%zz=":443""#, #"h 3=":443""#, #"h3=":123456""#, "h3=\":443\u{1}\"", #"h3=":443"; =1"#,
    ])
    func malformedValuesAreIgnoredWhole(_ value: String) {
        #expect(AltSvcParser.parse(value) == .malformed, "\(value)")
    }

    @Test func onlyH3AndDraftNumbersAreHTTP3() {
        for id in ["h3", "h3-29", "h3-34"] { #expect(AltSvcParser.isHTTP3(id), "\(id)") }
        for id in ["h2", "h3-", "h3-Q050", "h3x", "H3", "hq-29", "quic"] { #expect(!AltSvcParser.isHTTP3(id), "\(id)") }
    }

    @Test func theRecordFieldKeepsOnlyTheHTTP3Offer() throws {
        let offered = try #require(
            HTTP3Advertisement(responseHeaders: [
                "Content-Type": "text/plain", "alt-svc": #"h2=":443", h3=":443"; ma=86400"#,
            ]))
        #expect(
            offered.alternatives == [HTTP3Advertisement.Alternative(protocolID: "h3", authority: ":443", maxAge: 86400)]
        )
        #expect(offered.summary == #"h3=":443"; ma=86400"#)
        // Two fields are one list.
        var split = HTTPFields()
        split.append(name: "Alt-Svc", value: #"h2=":443""#)
        split.append(name: "Alt-Svc", value: #"h3-29=":8443""#)
        #expect(HTTP3Advertisement(responseHeaders: split)?.alternatives.map(\.protocolID) == ["h3-29"])
        #expect(HTTP3Advertisement(responseHeaders: ["Alt-Svc": "clear"]) == nil)
        #expect(HTTP3Advertisement(responseHeaders: ["Alt-Svc": #"h2=":443""#]) == nil)
        #expect(HTTP3Advertisement(responseHeaders: ["Alt-Svc": #"h3=":443"; ma"#]) == nil)
        #expect(HTTP3Advertisement(responseHeaders: ["Content-Type": "text/plain"]) == nil)
        #expect(HTTP3Advertisement.note.contains("TLS 1.3") && HTTP3Advertisement.note.contains("UDP 443"))
    }

    @Test func keepsABoundedNumberOfAlternatives() {
        let value = (0..<40).map { #"h3-\#($0)=":443""# }.joined(separator: ", ")
        guard case .alternatives(let list) = AltSvcParser.parse(value) else {
            Issue.record("not parsed")
            return
        }
        #expect(list.count == AltSvcParser.maximumAlternatives)
    }
}
