import ATSPolicy
import COpenSSL
import COpenSSLShims
import Foundation

@testable import ATSTLS

/// A self-made RFC 6962 log for tests (TOOLCHAIN-NOTES §8.5): signs precertificate SCTs and
/// embeds them in a leaf, which is then re-signed.
struct TestCTLog: Sendable {
    let name: String
    let key: PrivateKey
    let publicKeyDER: [UInt8]

    init(name: String) {
        self.name = name
        let generated = try! PrivateKey.generate(.p256)
        let length = i2d_PUBKEY(generated.pointer, nil)
        var bytes = [UInt8](repeating: 0, count: Int(length))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_PUBKEY(generated.pointer, &cursor)
        }
        key = generated
        publicKeyDER = bytes
    }

    var log: CTLog { CTLog(name: name, publicKeyDER: publicKeyDER) }

    /// Adds one SCT from each of `logs` to `leaf` (already signed once) and re-signs it.
    static func embed(_ logs: [TestCTLog], in leaf: Certificate, issuer: Certificate, issuerKey: PrivateKey) {
        let tbsLength = i2d_re_X509_tbs(leaf.pointer, nil)
        var tbs = [UInt8](repeating: 0, count: Int(tbsLength))
        tbs.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_re_X509_tbs(leaf.pointer, &cursor)
        }
        let spkiLength = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(issuer.pointer), nil)
        var spki = [UInt8](repeating: 0, count: Int(spkiLength))
        spki.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(issuer.pointer), &cursor)
        }
        let issuerKeyHash = sha256(spki)
        let list = ats_sk_SCT_new_null()!
        let timestamp = UInt64((Date().timeIntervalSince1970 - 60) * 1000)
        for log in logs {
            var signed: [UInt8] = [0, 0]
            for shift in stride(from: 56, through: 0, by: -8) {
                signed.append(UInt8((timestamp >> UInt64(shift)) & 0xff))
            }
            signed += [0, 1] + issuerKeyHash
            signed += [UInt8((tbs.count >> 16) & 0xff), UInt8((tbs.count >> 8) & 0xff), UInt8(tbs.count & 0xff)] + tbs
            signed += [0, 0]
            let signature = log.sign(signed)
            let sct = SCT_new()!
            _ = SCT_set_version(sct, SCT_VERSION_V1)
            _ = SCT_set_log_entry_type(sct, CT_LOG_ENTRY_TYPE_PRECERT)
            var logID = log.log.logID
            _ = SCT_set1_log_id(sct, &logID, logID.count)
            SCT_set_timestamp(sct, timestamp)
            _ = SCT_set_signature_nid(sct, NID_ecdsa_with_SHA256)
            var signatureBytes = signature
            _ = SCT_set1_signature(sct, &signatureBytes, signatureBytes.count)
            _ = ats_sk_SCT_push(list, sct)
        }
        _ = X509_add1_ext_i2d(leaf.pointer, NID_ct_precert_scts, UnsafeMutableRawPointer(list), 0, 0)
        SCT_LIST_free(list)
        try! CertificateMinter.sign(leaf, with: issuerKey, hash: .sha256)
    }

    private func sign(_ data: [UInt8]) -> [UInt8] {
        let context = EVP_MD_CTX_new()!
        defer { EVP_MD_CTX_free(context) }
        _ = EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key.pointer)
        var length = 0
        _ = EVP_DigestSign(context, nil, &length, data, data.count)
        var signature = [UInt8](repeating: 0, count: length)
        _ = EVP_DigestSign(context, &signature, &length, data, data.count)
        return Array(signature.prefix(length))
    }
}
