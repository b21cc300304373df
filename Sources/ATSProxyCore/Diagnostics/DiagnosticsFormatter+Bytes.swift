import ATSTLS

extension DiagnosticsFormatter {
    /// Appends the console text of one finished record to `output`, each line ending in a newline:
    /// the same text as `text(_:)`, joined.
    ///
    /// A successful request at level 1, the line every request of the default configuration logs,
    /// is written straight into `output` as bytes (no intermediate strings, arrays or
    /// interpolation); every other case goes through `text(_:)`, and so does a record with app-trust
    /// verdicts (`--af-policy`'s console line follows the request's) or CT not evaluated. `bytesMatchText` in the tests
    /// holds the two paths to the same output.
    public mutating func appendText(_ record: RequestRecord, to output: inout [UInt8]) {
        let fields = record.storage.fields
        // A connection whose CT could not be evaluated adds a line too (only records with the `ct` fact have one).
        guard level == .summary, fields.result == .completed, fields.appTrust == nil, fields.systemServices == nil,
            fields.tls?["ct"] != CTStatus.notEvaluatedText
        else {
            for line in text(record) {
                output.append(contentsOf: line.utf8)
                output.append(UInt8(ascii: "\n"))
            }
            return
        }
        // `consoleTaskName`: `<UUID>.<N>` from the record's `UUID.N`.
        output.append(contentsOf: "[Summary] Task <".utf8)
        let taskID = fields.taskID.utf8
        if let dot = taskID.lastIndex(of: UInt8(ascii: ".")) {
            output.append(contentsOf: taskID[..<dot])
            output.append(contentsOf: ">.<".utf8)
            output.append(contentsOf: taskID[taskID.index(after: dot)...])
        } else {
            output.append(contentsOf: taskID)
        }
        output.append(contentsOf: "> summary for task success {transaction_duration_ms=".utf8)
        Self.appendDecimal(Int(fields.durationMilliseconds.rounded()), to: &output)
        output.append(contentsOf: ", response_status=".utf8)
        Self.appendDecimal(fields.status ?? -1, to: &output)
        output.append(contentsOf: ", protocol=\"".utf8)
        output.append(contentsOf: fields.httpProtocol.utf8)
        output.append(contentsOf: "\", request_bytes=".utf8)
        Self.appendDecimal(fields.bytesFromClient, to: &output)
        output.append(contentsOf: ", response_bytes=".utf8)
        Self.appendDecimal(fields.bytesToClient, to: &output)
        output.append(contentsOf: ", client=".utf8)
        output.append(contentsOf: fields.clientAddress.utf8)
        output.append(contentsOf: "}\nats-proxy: ".utf8)
        output.append(contentsOf: fields.method.utf8)
        output.append(UInt8(ascii: " "))
        output.append(contentsOf: fields.url.utf8)
        if let route = fields.route { output.append(contentsOf: route.textLogSuffix.utf8) }
        output.append(contentsOf: " → ".utf8)
        // The outcome word of a completed record (`allowed`, `allowed by exception`, `passthrough`): a literal.
        output.append(contentsOf: LoadOutcome(record).rawValue.utf8)
        output.append(UInt8(ascii: " "))
        if let status = fields.status {
            Self.appendDecimal(status, to: &output)
        } else {
            output.append(UInt8(ascii: "-"))
        }
        output.append(contentsOf: " (".utf8)
        output.append(contentsOf: fields.rule.utf8)
        output.append(UInt8(ascii: ")"))
        if fields.retriedOnNewConnection == true {
            output.append(contentsOf: " (sent again on another connection)".utf8)
        }
        // `tlsSuffix`: ` [VERSION SUITE, group GROUP]`, from the facts the record already holds.
        if let tls = fields.tls, let version = tls["version"] {
            output.append(contentsOf: " [".utf8)
            output.append(contentsOf: version.utf8)
            if let cipher = tls["cipher"] {
                output.append(UInt8(ascii: " "))
                output.append(contentsOf: cipher.utf8)
            }
            if let group = tls["group"] {
                output.append(contentsOf: ", group ".utf8)
                output.append(contentsOf: group.utf8)
            }
            output.append(UInt8(ascii: "]"))
        }
        output.append(UInt8(ascii: "\n"))
    }

    /// Appends `value` in decimal ASCII (with a leading `-` when negative).
    static func appendDecimal(_ value: Int, to output: inout [UInt8]) {
        if value < 0 { output.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        guard magnitude >= 10 else {
            output.append(UInt8(ascii: "0") + UInt8(magnitude))
            return
        }
        // UInt.max has 20 digits.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var index = digits.count
            while magnitude > 0 {
                index -= 1
                digits[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            }
            output.append(contentsOf: digits[index...])
        }
    }
}
