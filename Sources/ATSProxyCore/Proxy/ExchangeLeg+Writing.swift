import ATSPolicy
import ATSTLS
import Foundation

/// Writing: request parts and raw bytes to the upstream (through its TLS engine, or to an HTTP/2 channel), response
/// text and raw bytes to the owner's client, and the helpers records and console lines share.
extension ExchangeLeg {
    // MARK: - To the client

    /// Raw bytes (or text already encoded) for an HTTP/1.1 client.
    mutating func sendToClient(_ plain: [UInt8]) {
        guard !plain.isEmpty else { return }
        switch delivery {
        case .http1(encrypted: true):
            if clientPlain.isEmpty { clientPlain = plain } else { clientPlain += plain }
        case .http1(encrypted: false):
            commands.append(.writeToClient(plain))
        case .stream:
            preconditionFailure("ExchangeLeg.sendToClient: a stream takes response parts, not bytes")
        }
    }

    /// Lets `write` append client-bound text straight to what the owner seals after this event, or to the bytes
    /// of a write command for a cleartext client.
    mutating func writeToClient(_ write: (inout [UInt8]) -> Void) {
        switch delivery {
        case .http1(encrypted: true):
            write(&clientPlain)
        case .http1(encrypted: false):
            var bytes: [UInt8] = []
            write(&bytes)
            if !bytes.isEmpty { commands.append(.writeToClient(bytes)) }
        case .stream:
            preconditionFailure("ExchangeLeg.writeToClient: a stream takes response parts, not text")
        }
    }

    /// Takes the plaintext gathered for an encrypted HTTP/1.1 client (empty for others).
    mutating func takeClientPlain() -> [UInt8] {
        guard !clientPlain.isEmpty else { return [] }
        var taken: [UInt8] = []
        swap(&taken, &clientPlain)
        return taken
    }

    // MARK: - To the upstream

    /// Raw bytes for the upstream (a tunnel's, or an upgraded connection's), held until it is ready.
    mutating func sendToUpstream(_ plain: [UInt8]) {
        guard !plain.isEmpty else { return }
        switch upstream.state {
        case .ready(_, let tls):
            if let tls {
                TLSLayer(tls).seal(plain)
                flushUpstreamTLS(tls)
            } else {
                commands.append(.writeToUpstream(plain))
            }
        case .none, .connecting, .handshaking:
            upstream.pendingBytes.append(contentsOf: plain)
        }
    }

    /// Sends what waited for the upstream: raw bytes (a tunnel's), then the exchange's request parts, encoded for
    /// the upstream it turned out to be.
    mutating func flushPendingUpstream() {
        if !upstream.pendingBytes.isEmpty {
            let bytes = upstream.pendingBytes
            upstream.pendingBytes = []
            sendToUpstream(bytes)
        }
        guard !upstream.pendingParts.isEmpty else { return }
        let parts = upstream.pendingParts
        upstream.pendingParts = []
        for part in parts { sendRequestPart(part) }
    }

    /// Whether the upstream is a channel of a shared HTTP/2 link: it takes request parts as they are.
    var upstreamIsChannel: Bool {
        if case .ready = upstream.state, upstream.wire == .h2 { return true }
        return false
    }

    /// One part of the current exchange's request, for the upstream: held until the upstream is ready, then
    /// encoded by the upstream's wire: handed to an HTTP/2 channel as it is (consecutive parts in one command), or
    /// written as HTTP/1.1 text by the exchange's `HTTP1RequestEncoder`.
    mutating func sendRequestPart(_ part: HTTPPart) {
        guard case .ready = upstream.state else {
            upstream.pendingParts.append(part)
            return
        }
        switch upstream.wire {
        case .h2:
            if case .sendToUpstreamChannel(var parts)? = commands.last {
                commands.removeLast()
                parts.append(part)
                commands.append(.sendToUpstreamChannel(parts))
            } else {
                commands.append(.sendToUpstreamChannel([part]))
            }
        case .http1:
            guard let exchange else { return }
            var bytes: [UInt8] = []
            exchange.requestEncoder.encode(part, into: &bytes)
            sendToUpstream(bytes)
        }
    }

    /// Queues every record the upstream TLS engine holds.
    mutating func flushUpstreamTLS(_ tls: TLSConnection) {
        let layer = TLSLayer(tls)
        if layer.hasRecords { commands.append(.writeToUpstream(layer.takeRecords())) }
    }

    // MARK: - Helpers

    /// The context of the console lines this leg writes (the current exchange's task, or the last one's).
    func consoleContext() -> ConsoleContext {
        ConsoleContext(
            processName: (exchange?.policy ?? services.policy.snapshot).processName ?? services.settings.processName,
            pid: services.processID, threadID: services.processID + client.connectionNumber, date: now,
            taskUUID: client.taskUUID, taskNumber: max(1, exchange?.number ?? lastNumber),
            connectionNumber: client.connectionNumber)
    }

    /// The console lines of a cleartext load ATS blocks, for task `number`.
    func cleartextConsole(_ decision: ATSDecision, number: Int) -> [String] {
        var context = consoleContext()
        context.taskNumber = number
        return CFNetworkConsole.cleartextBlocked(
            url: decision.target.url, host: decision.target.host, platform: decision.platform, context: context)
    }

    /// Requirements used to describe failures of cleartext connections (no TLS involved).
    static let cleartextRequirements: TLSRequirements = {
        ATSEvaluator(configuration: .empty).evaluate(RequestTarget(scheme: .https, host: "localhost")).requirements
    }()

    /// What `--mode report` offers upstream: every version and suite, so the handshake completes
    /// and the summary can be judged against the real requirements.
    static func permissive(_ requirements: TLSRequirements) -> TLSRequirements {
        requirements.updating { offered in
            offered.minimumVersion = .tls10
            offered.maximumVersion = max(offered.maximumVersion, .tls12)
            offered.cipherSuites = CipherSuite.catalogue
            offered.minimumRSAKeyBits = 0
            offered.minimumECKeyBits = 0
            offered.minimumSignatureHash = .md5
        }
    }

    /// The TLS facts a record carries for a judged upstream handshake (`detailed`: `ProxySettings.detailedRecords`).
    static func tlsFacts(_ summary: HandshakeSummary, detailed: Bool = false) -> [String: String] {
        var facts: [String: String] = [
            "version": summary.version.rawValue, "cipher": summary.cipher.ianaName,
            "keyExchange": summary.cipher.keyExchange.rawValue,
        ]
        // The negotiated group by its registry name (nil for static RSA, which has none).
        if let group = summary.group { facts["group"] = KeyExchangeGroup(name: group)?.rawValue ?? group }
        if let leaf = summary.leaf {
            facts["leaf"] = leaf.subject
            facts["leafKey"] = "\(leaf.key)"
            facts["leafSignature"] = leaf.signatureAlgorithm
        }
        facts["chainLength"] = "\(summary.presentedChain.count)"
        if let alpn = summary.alpn { facts["alpn"] = alpn }
        if detailed { facts.merge(summary.detailedFacts) { kept, _ in kept } }
        return facts
    }
}
