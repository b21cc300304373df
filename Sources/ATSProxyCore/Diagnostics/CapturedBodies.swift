/// The first bytes of an exchange's request and response bodies, collected as they are relayed when
/// `--capture-bodies` asks (`ProxySettings.captureBodyLimit`), for the HAR. Each body keeps at most
/// the limit and notes that more followed. A plain value owned by the exchange.
struct CapturedBodies {
    private var requestBytes: [UInt8] = []
    private var requestTruncated = false
    private var responseBytes: [UInt8] = []
    private var responseTruncated = false
    private var used = false

    /// Adds request body bytes, keeping at most `limit` in all.
    mutating func request(_ slice: ArraySlice<UInt8>, _ limit: Int) {
        used = true
        Self.append(slice, to: &requestBytes, truncated: &requestTruncated, limit: limit)
    }

    /// Adds response body bytes, keeping at most `limit` in all.
    mutating func response(_ slice: ArraySlice<UInt8>, _ limit: Int) {
        used = true
        Self.append(slice, to: &responseBytes, truncated: &responseTruncated, limit: limit)
    }

    /// The bodies for the record; nil when capture was off (nothing was ever added).
    var record: RequestRecord.Bodies? {
        guard used else { return nil }
        return RequestRecord.Bodies(
            request: requestBytes, requestTruncated: requestTruncated, response: responseBytes,
            responseTruncated: responseTruncated)
    }

    private static func append(
        _ slice: ArraySlice<UInt8>, to bytes: inout [UInt8], truncated: inout Bool, limit: Int
    ) {
        let room = limit - bytes.count
        if slice.count > room { truncated = true }
        if room > 0 { bytes += slice.prefix(room) }
    }
}
