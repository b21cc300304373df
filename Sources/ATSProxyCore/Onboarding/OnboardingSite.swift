import ATSTLS
import Foundation

/// The pages the proxy serves itself so that a phone, a simulator or a CI machine can trust its
/// CA: `http://ats-proxy.invalid/` through the proxy (the name never leaves the machine) and
/// `GET /` sent straight to the listen address. Never proxied; unknown paths are 404.
///
/// Immutable and thread-safe; built once at start from the CA certificate.
public struct OnboardingSite: Sendable {
    /// The reserved onboarding name (`.invalid` can never resolve, RFC 2606).
    public static let host = "ats-proxy.invalid"

    /// One response of the site.
    public struct Page: Sendable, Equatable {
        public let status: Int
        public let reason: String
        public let contentType: String
        public let fileName: String?
        public let body: [UInt8]
    }

    public let caPEM: [UInt8]
    public let caDER: [UInt8]
    /// SHA-256 of the DER certificate, as colon-separated upper-case hex.
    public let fingerprint: String
    public let subject: String
    public let notBefore: Date
    public let notAfter: Date
    /// host:port strings clients can use as their proxy (for the instructions).
    public let proxyAddresses: [String]
    /// The machine's LAN addresses (no port), shown when the listener is loopback only so that the
    /// page can say what a phone would use once the proxy listens on the network.
    public let lanAddresses: [String]
    /// Where the live flow view listens (`--web`), e.g. `http://127.0.0.1:8081/`; `/flows` leads there.
    public var flowsURL: String?

    public init(
        caPEM: [UInt8], caDER: [UInt8], fingerprint: [UInt8], subject: String, notBefore: Date, notAfter: Date,
        proxyAddresses: [String], lanAddresses: [String] = []
    ) {
        self.caPEM = caPEM
        self.caDER = caDER
        self.fingerprint = fingerprint.map { String(format: "%02X", $0) }.joined(separator: ":")
        self.subject = subject
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.proxyAddresses = proxyAddresses
        self.lanAddresses = lanAddresses
    }

    /// Builds the site from the proxy's CA certificate.
    public init(certificate: Certificate, proxyAddresses: [String], lanAddresses: [String] = []) throws {
        let details = CertificateDetails(certificate)
        self.init(
            caPEM: try certificate.pemBytes(), caDER: certificate.derBytes, fingerprint: details.sha256Fingerprint,
            subject: details.commonName ?? details.subject, notBefore: details.notBefore, notAfter: details.notAfter,
            proxyAddresses: proxyAddresses, lanAddresses: lanAddresses)
    }

    /// True when every proxy address is a loopback one, which a phone cannot reach.
    var isLoopbackOnly: Bool {
        !proxyAddresses.isEmpty
            && proxyAddresses.allSatisfy { address in
                address.hasPrefix("127.") || address.hasPrefix("[::1]") || address.hasPrefix("localhost:")
            }
    }

    /// The first step of the iPhone instructions: the Wi-Fi proxy to enter, or, with a loopback
    /// listener, how to make the proxy reachable first.
    func phoneProxyStep(server: String, port: String) -> String {
        guard isLoopbackOnly else {
            let pac = "http://\(proxyAddresses[0])\(ProxyAutoConfig.path)"
            return
                "Settings › Wi-Fi › (i) › Configure Proxy › Manual: Server <code>\(server)</code>, Port <code>\(port)</code>. "
                + "Or Configure Proxy › Automatic, URL <code>\(pac)</code>: the phone goes direct again when the proxy stops."
        }
        let lan =
            lanAddresses.isEmpty
            ? "this computer's Wi-Fi address"
            : lanAddresses.map { "<code>\($0)</code>" }.joined(separator: " or ")
        return
            "ats-proxy listens on loopback only (<code>\(proxyAddresses[0])</code>), which a phone cannot reach. Restart it with <code>--listen 0.0.0.0:\(port)</code>, then Settings › Wi-Fi › (i) › Configure Proxy › Manual: Server \(lan), Port <code>\(port)</code>; or Configure Proxy › Automatic, URL <code>http://SERVER:\(port)\(ProxyAutoConfig.path)</code> with that server address (the phone goes direct again when the proxy stops)."
    }

    /// The page for `path` (query ignored).
    public func page(for path: String) -> Page {
        let clean = String(path.prefix { $0 != "?" && $0 != "#" })
        switch clean {
        case "/", "/index.html":
            return Page(
                status: 200, reason: "OK", contentType: "text/html; charset=utf-8", fileName: nil,
                body: Array(html.utf8))
        case "/flows":
            return flowsPage
        case "/ats-proxy-ca.pem", "/ca.pem":
            return Page(
                status: 200, reason: "OK", contentType: "application/x-pem-file", fileName: "ats-proxy-ca.pem",
                body: caPEM)
        case "/ats-proxy-ca.cer", "/ca.cer":
            return Page(
                status: 200, reason: "OK", contentType: "application/x-x509-ca-cert", fileName: "ats-proxy-ca.cer",
                body: caDER)
        case "/ats-proxy.mobileconfig", "/ca.mobileconfig":
            return Page(
                status: 200, reason: "OK", contentType: "application/x-apple-aspen-config",
                fileName: "ats-proxy.mobileconfig", body: mobileconfig)
        default:
            return Page(
                status: 404, reason: "Not Found", contentType: "text/plain; charset=utf-8", fileName: nil,
                body: Array("ats-proxy: no such onboarding page; see http://\(Self.host)/\n".utf8))
        }
    }

    /// `/flows`: a link (and an immediate refresh) to the live flow view, or how to turn it on.
    var flowsPage: Page {
        guard let flowsURL else {
            return Page(
                status: 404, reason: "Not Found", contentType: "text/plain; charset=utf-8", fileName: nil,
                body: Array("ats-proxy: the live flow view is off; start the proxy with --web 127.0.0.1:8081\n".utf8))
        }
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8">
            <meta http-equiv="refresh" content="0; url=\(flowsURL)"><title>ats-proxy: live flows</title></head>
            <body><p>The live flow view is at <a href="\(flowsURL)">\(flowsURL)</a>.</p></body></html>

            """
        return Page(
            status: 200, reason: "OK", contentType: "text/html; charset=utf-8", fileName: nil, body: Array(html.utf8))
    }

    /// An Apple configuration profile with one `com.apple.security.root` payload holding the CA.
    public var mobileconfig: [UInt8] {
        let digest = fingerprint.replacingOccurrences(of: ":", with: "")
        let short = String(digest.prefix(16)).lowercased()
        let root: [String: Any] = [
            "PayloadContent": [
                [
                    "PayloadCertificateFileName": "ats-proxy-ca.cer",
                    "PayloadContent": Data(caDER),
                    "PayloadDescription": "Adds the ats-proxy certificate authority as a trusted root.",
                    "PayloadDisplayName": subject,
                    "PayloadIdentifier": "dev.ats-proxy.ca.\(short)",
                    "PayloadType": "com.apple.security.root",
                    "PayloadUUID": Self.uuid(from: digest, salt: "payload"),
                    "PayloadVersion": 1,
                ] as [String: Any]
            ],
            "PayloadDescription":
                "Lets this device trust the certificates ats-proxy mints while it tests App Transport Security. Remove it when you are done.",
            "PayloadDisplayName": subject,
            "PayloadIdentifier": "dev.ats-proxy.profile.\(short)",
            "PayloadRemovalDisallowed": false,
            "PayloadType": "Configuration",
            "PayloadUUID": Self.uuid(from: digest, salt: "profile"),
            "PayloadVersion": 1,
        ]
        let data = (try? PropertyListSerialization.data(fromPropertyList: root, format: .xml, options: 0)) ?? Data()
        return Array(data)
    }

    /// A stable UUID string from the CA fingerprint, so the same CA always gives the same profile.
    static func uuid(from hex: String, salt: String) -> String {
        var bytes = Array((salt + hex).utf8)
        var state: UInt64 = 0xcbf2_9ce4_8422_2325
        var out: [UInt8] = []
        for round in 0..<16 {
            for byte in bytes { state = (state ^ UInt64(byte)) &* 0x100_0000_01b3 }
            out.append(UInt8(truncatingIfNeeded: state >> 24))
            bytes.append(UInt8(round))
        }
        out[6] = (out[6] & 0x0f) | 0x50
        out[8] = (out[8] & 0x3f) | 0x80
        let hexText = out.map { String(format: "%02X", $0) }.joined()
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(
                hexText[
                    hexText.index(
                        hexText.startIndex, offsetBy: range.lowerBound)..<hexText.index(
                            hexText.startIndex, offsetBy: range.upperBound)])
        }
        return parts.joined(separator: "-")
    }

    /// The shell command that adds the CA to the booted iOS Simulator.
    public static func simulatorCommand(caPath: String) -> String {
        "xcrun simctl keychain booted add-root-cert \"\(caPath)\""
    }

    /// The macOS command that trusts the CA for the whole system.
    public static func macOSCommand(caPath: String) -> String {
        "sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain \"\(caPath)\""
    }

    private var html: String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        let proxy = proxyAddresses.first ?? "127.0.0.1:8080"
        let parts = proxy.split(separator: ":")
        let server = parts.dropLast().joined(separator: ":")
        let port = parts.last.map(String.init) ?? "8080"
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>ats-proxy: trust the CA</title>
            <style>
            body{font:16px/1.45 -apple-system,system-ui,sans-serif;margin:0 auto;max-width:42rem;padding:1rem;color:#1d1d1f}
            h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}code,pre{font:14px ui-monospace,Menlo,monospace}
            pre{background:#f2f2f7;padding:.6rem;border-radius:8px;white-space:pre-wrap;word-break:break-all}
            .dl a{display:inline-block;margin:.2rem .4rem .2rem 0;padding:.55rem .9rem;border-radius:10px;background:#0071e3;color:#fff;text-decoration:none}
            .fp{word-break:break-all}@media (prefers-color-scheme:dark){body{background:#000;color:#f5f5f7}pre{background:#1c1c1e}}
            </style></head><body>
            <h1>Trust the ats-proxy certificate authority</h1>
            <p>ats-proxy intercepts HTTPS to check it against your app's App Transport Security policy. Your device must trust its CA, and only while you test.</p>
            <p><b>\(subject)</b><br>SHA-256 <span class="fp"><code>\(fingerprint)</code></span><br>Valid \(formatter.string(from: notBefore)) to \(formatter.string(from: notAfter))</p>
            <p class="dl"><a href="/ats-proxy.mobileconfig">Profile (.mobileconfig)</a><a href="/ats-proxy-ca.cer">DER (.cer)</a><a href="/ats-proxy-ca.pem">PEM (.pem)</a></p>
            <h2>iPhone or iPad</h2>
            <ol><li>\(phoneProxyStep(server: server, port: port))</li>
            <li>Open <code>http://\(Self.host)/</code> in Safari and tap <b>Profile</b>; allow the download.</li>
            <li>Settings › General › VPN &amp; Device Management › the ats-proxy profile › Install.</li>
            <li>Settings › General › About › Certificate Trust Settings › turn on full trust for the ats-proxy CA.</li></ol>
            <h2>iOS Simulator</h2>
            <pre>curl -o ats-proxy-ca.pem http://\(proxy)/ats-proxy-ca.pem\n\(Self.simulatorCommand(caPath: "ats-proxy-ca.pem"))</pre>
            <p>Then set the Mac's HTTP and HTTPS proxy (System Settings › Network › Details › Proxies) to <code>\(proxy)</code>; the Simulator uses it.</p>
            <h2>macOS</h2>
            <pre>curl -o ats-proxy-ca.pem http://\(proxy)/ats-proxy-ca.pem\n\(Self.macOSCommand(caPath: "ats-proxy-ca.pem"))</pre>
            <h2>Linux, CI and command-line clients</h2>
            <pre>export HTTP_PROXY=http://\(proxy) HTTPS_PROXY=http://\(proxy)\nexport SSL_CERT_FILE=$PWD/ats-proxy-ca.pem CURL_CA_BUNDLE=$PWD/ats-proxy-ca.pem\nexport REQUESTS_CA_BUNDLE=$PWD/ats-proxy-ca.pem NODE_EXTRA_CA_CERTS=$PWD/ats-proxy-ca.pem</pre>
            <p>Or let <code>ats-proxy exec -- your-test-command</code> set all of that up.</p>
            <p>Remove the profile (or untrust the CA) when you finish testing.</p>
            </body></html>

            """
    }
}
