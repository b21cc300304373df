import ATSPolicy
import ATSTLS
import COpenSSL
import COpenSSLShims
import Foundation

/// A self-made CT log for tests (TOOLCHAIN-NOTES §8.5): a P-256 key, an operator, a kind (RFC 6962 or
/// static-ct-api) and a state in Apple's program. It signs precertificate SCTs, embeds them in a leaf
/// (which is then re-signed), and writes lists of such logs in Apple's JSON layout. A static-ct-api
/// log's SCTs carry the `leaf_index` extension that API defines; they validate like any other.
public final class TestCTLog: @unchecked Sendable {
    public let name: String
    public let operatorName: String
    public let kind: CTLogKind
    public let state: CTLogState
    public let temporalInterval: Range<Date>?
    /// DER SubjectPublicKeyInfo.
    public let publicKeyDER: [UInt8]
    /// The private key (an `EVP_PKEY`), owned.
    private let key: OpaquePointer

    /// A usable RFC 6962 log that is its own operator unless told otherwise.
    public init(
        name: String, operatorName: String? = nil, kind: CTLogKind = .rfc6962,
        state: CTLogState = .usable(since: Date(timeIntervalSinceNow: -200 * 86400)),
        temporalInterval: Range<Date>? = nil
    ) {
        self.name = name
        self.operatorName = operatorName ?? name
        self.kind = kind
        self.state = state
        self.temporalInterval = temporalInterval
        let generated = Self.readKey(try! PrivateKey.generate(.p256).pemBytes())
        key = generated
        let length = i2d_PUBKEY(generated, nil)
        var bytes = [UInt8](repeating: 0, count: Int(length))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_PUBKEY(generated, &cursor)
        }
        publicKeyDER = bytes
    }

    deinit { EVP_PKEY_free(key) }

    public var log: CTLog { CTLog(name: name, publicKeyDER: publicKeyDER) }

    /// The facts Apple's list gives for this log.
    public var facts: CTLogFacts {
        CTLogFacts(
            description: name, operatorName: operatorName, kind: kind, state: state, temporalInterval: temporalInterval)
    }

    /// A leaf with one SCT from each of `logs`, issued a minute ago.
    public static func embedding(
        _ logs: [TestCTLog], in leaf: Certificate, issuer: Certificate, issuerKey: PrivateKey
    ) -> Certificate {
        embedding(logs.map { ($0, Date(timeIntervalSinceNow: -60)) }, in: leaf, issuer: issuer, issuerKey: issuerKey)
    }

    /// A copy of `leaf` (signed once already) with one SCT per `(log, timestamp)` embedded, re-signed by
    /// `issuerKey` with SHA-256.
    public static func embedding(
        _ scts: [(log: TestCTLog, timestamp: Date)], in leaf: Certificate, issuer: Certificate,
        issuerKey: PrivateKey
    ) -> Certificate {
        let x509 = readCertificate(leaf.derBytes)
        defer { X509_free(x509) }
        let issuerX509 = readCertificate(issuer.derBytes)
        defer { X509_free(issuerX509) }
        let tbs = encode { i2d_re_X509_tbs(x509, $0) }
        let issuerKeyHash = CTLog(
            name: "", publicKeyDER: encode { i2d_X509_PUBKEY(X509_get_X509_PUBKEY(issuerX509), $0) }
        )
        .logID
        let list = ats_sk_SCT_new_null()!
        for (log, date) in scts {
            let timestamp = UInt64(max(0, date.timeIntervalSince1970) * 1000)
            // static-ct-api: the leaf_index extension (type 0, a 40-bit index).
            let extensions: [UInt8] = log.kind == .staticCTAPI ? [0, 0, 5, 0, 0, 0, 0, 42] : []
            var signed: [UInt8] = [0, 0]
            for shift in stride(from: 56, through: 0, by: -8) {
                signed.append(UInt8((timestamp >> UInt64(shift)) & 0xff))
            }
            signed += [0, 1] + issuerKeyHash
            signed += [UInt8((tbs.count >> 16) & 0xff), UInt8((tbs.count >> 8) & 0xff), UInt8(tbs.count & 0xff)] + tbs
            signed += [UInt8(extensions.count >> 8), UInt8(extensions.count & 0xff)] + extensions
            var signature = log.sign(signed)
            let sct = SCT_new()!
            _ = SCT_set_version(sct, SCT_VERSION_V1)
            _ = SCT_set_log_entry_type(sct, CT_LOG_ENTRY_TYPE_PRECERT)
            var logID = log.log.logID
            _ = SCT_set1_log_id(sct, &logID, logID.count)
            SCT_set_timestamp(sct, timestamp)
            if !extensions.isEmpty {
                var bytes = extensions
                _ = SCT_set1_extensions(sct, &bytes, bytes.count)
            }
            _ = SCT_set_signature_nid(sct, NID_ecdsa_with_SHA256)
            _ = SCT_set1_signature(sct, &signature, signature.count)
            _ = ats_sk_SCT_push(list, sct)
        }
        _ = X509_add1_ext_i2d(x509, NID_ct_precert_scts, UnsafeMutableRawPointer(list), 0, 0)
        SCT_LIST_free(list)
        let signingKey = readKey(try! issuerKey.pemBytes())
        defer { EVP_PKEY_free(signingKey) }
        precondition(X509_sign(x509, signingKey, EVP_sha256()) > 0, "X509_sign")
        return try! Certificate(der: encode { i2d_X509(x509, $0) })
    }

    /// `logs` as Apple's JSON log list (operators in first-seen order, `logs` and `tiled_logs`).
    public static func appleList(_ logs: [TestCTLog], version: String = "1.0") -> Data {
        let formatter = ISO8601DateFormatter()
        var operators: [String] = []
        for log in logs where !operators.contains(log.operatorName) { operators.append(log.operatorName) }
        let entries: [[String: Any]] = operators.map { name in
            func json(_ log: TestCTLog) -> [String: Any] {
                var entry: [String: Any] = [
                    "description": log.name, "log_id": Data(log.log.logID).base64EncodedString(),
                    "key": Data(log.publicKeyDER).base64EncodedString(), "mmd": 86400,
                    "state": [log.state.name: ["timestamp": formatter.string(from: log.state.since)]],
                ]
                if let interval = log.temporalInterval {
                    entry["temporal_interval"] = [
                        "start_inclusive": formatter.string(from: interval.lowerBound),
                        "end_exclusive": formatter.string(from: interval.upperBound),
                    ]
                }
                if log.kind == .staticCTAPI {
                    entry["submission_url"] = "https://\(log.name).test/"
                    entry["monitoring_url"] = "https://\(log.name).test/"
                } else {
                    entry["url"] = "https://\(log.name).test/"
                }
                return entry
            }
            let mine = logs.filter { $0.operatorName == name }
            return [
                "name": name, "email": ["ct@\(name).test"],
                "logs": mine.filter { $0.kind == .rfc6962 }.map(json),
                "tiled_logs": mine.filter { $0.kind == .staticCTAPI }.map(json),
            ]
        }
        let document: [String: Any] = [
            "version": version, "log_list_timestamp": formatter.string(from: Date()), "operators": entries,
        ]
        return try! JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys])
    }

    private func sign(_ data: [UInt8]) -> [UInt8] {
        let context = EVP_MD_CTX_new()!
        defer { EVP_MD_CTX_free(context) }
        _ = EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key)
        var length = 0
        _ = EVP_DigestSign(context, nil, &length, data, data.count)
        var signature = [UInt8](repeating: 0, count: length)
        _ = EVP_DigestSign(context, &signature, &length, data, data.count)
        return Array(signature.prefix(length))
    }

    private static func readKey(_ pem: [UInt8]) -> OpaquePointer {
        pem.withUnsafeBytes { raw in
            let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count))!
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)!
        }
    }

    private static func readCertificate(_ der: [UInt8]) -> OpaquePointer {
        der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)!
        }
    }

    private static func encode(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) -> [UInt8] {
        let length = body(nil)
        var bytes = [UInt8](repeating: 0, count: Int(max(0, length)))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = body(&cursor)
        }
        return bytes
    }
}
