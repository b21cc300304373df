import ATSPolicy
import ATSTLS
import Foundation

/// The one place the core builds a `RequestRecord`. Every record of a client connection (an exchange, a refusal of
/// the proxy's own, a challenge's outcome, a tunnel that carried nothing, a client that refused the proxy's TLS)
/// comes from its `ExchangeLeg.Client`, so the connection's fields are filled the same way everywhere: the client
/// address, the task ID (`<UUID>.<N>`, the connection's UUID formatted once), and the client-side protocol unless
/// the record names another (`socks4`).
///
/// Task numbers are the caller's: an exchange has its own; a CONNECT, which CFNetwork does not count as a task,
/// takes the number the next task would get. Pure; costs one storage allocation per record (see `RequestRecord`).
extension ExchangeLeg.Client {
    /// A record of task `number` that started at `time`. With a `decision`, the record says whether ATS applied
    /// and by which rules; without one (a refusal that never reached the policy) ATS is recorded as not required.
    func record(
        task number: Int, time: Date, method: String, url: String, host: String? = nil, httpProtocol: String? = nil,
        source: RequestSource = .urlsession, result: RequestRecord.Result, decision: ATSDecision? = nil,
        rule: String, fix: String? = nil, errorCode: Int? = nil, streamError: StreamError? = nil, status: Int? = nil,
        tls: [String: String]? = nil, requestHeaders: [RequestRecord.HeaderField] = [],
        responseHeaders: [RequestRecord.HeaderField] = [], bytesFromClient: Int = 0, bytesToClient: Int = 0,
        durationMilliseconds: Double = 0, consoleLines: [String] = [], retriedOnNewConnection: Bool? = nil,
        timings: RequestRecord.Timings? = nil, bodies: RequestRecord.Bodies? = nil, serverAddress: String? = nil,
        appTrust: AppTrustRecord? = nil, systemServices: SystemServicesVerdict? = nil, route: ProxyRoute?,
        http3: HTTP3Advertisement? = nil
    ) -> RequestRecord {
        RequestRecord(
            time: time, clientAddress: address, taskID: taskIDPrefix + String(number), method: method, url: url,
            host: host, httpProtocol: httpProtocol ?? protocolName, source: source, result: result,
            atsRequired: decision?.atsRequired ?? false, ruleChain: decision?.ruleTexts ?? [], rule: rule, fix: fix,
            errorCode: errorCode, streamError: streamError, status: status, tls: tls, requestHeaders: requestHeaders,
            responseHeaders: responseHeaders, bytesFromClient: bytesFromClient, bytesToClient: bytesToClient,
            durationMilliseconds: durationMilliseconds, consoleLines: consoleLines,
            retriedOnNewConnection: retriedOnNewConnection, timings: timings, bodies: bodies,
            serverAddress: serverAddress, appTrust: appTrust, systemServices: systemServices, route: route,
            http3: http3)
    }
}
