import ATSPolicy
internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// Owns one `X509`. Immutable after creation (minting finishes before the value is handed
/// out), so safe to share across threads; `deinit` frees it.
public final class Certificate: @unchecked Sendable, CustomStringConvertible {
    let pointer: OpaquePointer

    /// Takes ownership of `pointer` (one reference).
    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    /// Adds a reference to `pointer` and owns that reference.
    init(retaining pointer: OpaquePointer) {
        X509_up_ref(pointer)
        self.pointer = pointer
    }

    deinit { X509_free(pointer) }

    /// Parses one PEM certificate.
    public convenience init(pem: [UInt8]) throws {
        let x509 = try withReadBIO(pem) { bio in PEM_read_bio_X509(bio, nil, nil, nil) }
        guard let x509 else { throw OpenSSLError("parse certificate PEM") }
        self.init(taking: x509)
    }

    /// Parses one DER certificate.
    public convenience init(der: [UInt8]) throws {
        let x509: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let x509 else { throw OpenSSLError("parse certificate DER") }
        self.init(taking: x509)
    }

    /// Every certificate in a PEM bundle, in order.
    public static func all(pem: [UInt8]) throws -> [Certificate] {
        try withReadBIO(pem) { bio in
            var result: [Certificate] = []
            while let x509 = PEM_read_bio_X509(bio, nil, nil, nil) { result.append(Certificate(taking: x509)) }
            ERR_clear_error()
            return result
        }
    }

    /// PEM text.
    public func pemBytes() throws -> [UInt8] {
        try withMemoryBIO { bio in try check(PEM_write_bio_X509(bio, pointer), "write certificate PEM") }
    }

    /// DER bytes.
    public var derBytes: [UInt8] {
        let length = i2d_X509(pointer, nil)
        guard length > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_X509(pointer, &cursor)
        }
        return bytes
    }

    /// SHA-256 of the DER certificate.
    public var sha256Fingerprint: [UInt8] { sha256(derBytes) }

    /// SHA-256 of the DER SubjectPublicKeyInfo: the value NSPinnedLeafIdentities/NSPinnedCAIdentities hold.
    public var spkiSHA256: Data {
        guard let spki = X509_get_X509_PUBKEY(pointer) else { return Data() }
        let length = i2d_X509_PUBKEY(spki, nil)
        guard length > 0 else { return Data() }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            _ = i2d_X509_PUBKEY(spki, &cursor)
        }
        return Data(sha256(bytes))
    }

    /// Public key type and size.
    public var keyAlgorithm: KeyAlgorithm {
        guard let key = X509_get0_pubkey(pointer) else { return .other(name: "none", bits: 0) }
        return KeyAlgorithm(key)
    }

    /// True when the certificate's private key is `key`.
    public func matches(_ key: PrivateKey) -> Bool {
        let result = X509_check_private_key(pointer, key.pointer) == 1
        ERR_clear_error()
        return result
    }

    /// notBefore as a Date.
    public var notBefore: Date { Certificate.date(X509_get0_notBefore(pointer)) }
    /// notAfter as a Date.
    public var notAfter: Date { Certificate.date(X509_get0_notAfter(pointer)) }

    static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
        guard let time else { return .distantPast }
        var parsed = tm()
        guard ASN1_TIME_to_tm(time, &parsed) == 1 else { return .distantPast }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parsed)))
    }

    /// The subject in OpenSSL's one-line RFC 2253 form.
    public var subjectText: String { Certificate.nameText(X509_get_subject_name(pointer)) }
    /// The issuer in OpenSSL's one-line RFC 2253 form.
    public var issuerText: String { Certificate.nameText(X509_get_issuer_name(pointer)) }

    static func nameText(_ name: OpaquePointer?) -> String {
        guard let name else { return "" }
        var parts: [String] = []
        for index in 0..<X509_NAME_entry_count(name) {
            guard let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) else {
                continue
            }
            let nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(entry))
            let field = OBJ_nid2sn(nid).map { String(cString: $0) } ?? "?"
            parts.append("\(field)=\(string(data))")
        }
        return parts.reversed().joined(separator: ", ")
    }

    /// The subject common name, if any.
    public var commonName: String? {
        guard let name = X509_get_subject_name(pointer) else { return nil }
        let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index),
            let data = X509_NAME_ENTRY_get_data(entry)
        else { return nil }
        return Certificate.string(data)
    }

    static func string(_ asn1: UnsafePointer<ASN1_STRING>) -> String {
        let length = Int(ASN1_STRING_length(asn1))
        guard length > 0, let bytes = ASN1_STRING_get0_data(asn1) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: length), as: UTF8.self)
    }

    /// DNS names and IP addresses (text form) of the subjectAltName extension.
    public var subjectAltNames: (dns: [String], ip: [String]) {
        guard let raw = X509_get_ext_d2i(pointer, NID_subject_alt_name, nil, nil) else { return ([], []) }
        let names = OpaquePointer(raw)
        defer { GENERAL_NAMES_free(names) }
        var dns: [String] = []
        var ips: [String] = []
        for index in 0..<ats_sk_GENERAL_NAME_num(names) {
            guard let name = ats_sk_GENERAL_NAME_value(names, index) else { continue }
            switch name.pointee.type {
            case GEN_DNS:
                if let value = name.pointee.d.dNSName { dns.append(Certificate.string(value)) }
            case GEN_IPADD:
                if let value = name.pointee.d.iPAddress {
                    let asn1 = UnsafePointer(value)
                    let length = Int(ASN1_STRING_length(asn1))
                    if let bytes = ASN1_STRING_get0_data(asn1) {
                        ips.append(Certificate.ipText(Array(UnsafeBufferPointer(start: bytes, count: length))))
                    }
                }
            default:
                continue
            }
        }
        return (dns, ips)
    }

    static func ipText(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        guard bytes.count == 16 else { return hexString(bytes) }
        var groups: [String] = []
        for index in stride(from: 0, to: 16, by: 2) {
            groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
        }
        return groups.joined(separator: ":")
    }

    /// Whether an extendedKeyUsage extension is present, and whether it allows serverAuth.
    public var extendedKeyUsage: (present: Bool, serverAuth: Bool) {
        let flags = X509_get_extension_flags(pointer)
        let present = flags & UInt32(EXFLAG_XKUSAGE) != 0
        return (present, present && X509_get_extended_key_usage(pointer) & UInt32(XKU_SSL_SERVER) != 0)
    }

    /// basicConstraints CA:TRUE.
    public var isCA: Bool { X509_check_ca(pointer) != 0 }

    /// Subject equals issuer (and the key identifiers agree): a root or a self-signed leaf. The
    /// signature itself is not re-checked here; chain verification does that.
    public var isSelfSigned: Bool {
        let result = X509_self_signed(pointer, 0) == 1
        ERR_clear_error()
        return result
    }

    /// The hash of the certificate's own signature, when it is one ATS knows.
    public var signatureHash: SignatureHash? {
        var digest: Int32 = 0
        var publicKey: Int32 = 0
        guard OBJ_find_sigid_algs(X509_get_signature_nid(pointer), &digest, &publicKey) == 1 else { return nil }
        switch digest {
        case NID_md5: return .md5
        case NID_sha1: return .sha1
        case NID_sha224: return .sha224
        case NID_sha256: return .sha256
        case NID_sha384: return .sha384
        case NID_sha512: return .sha512
        default: return nil
        }
    }

    /// OpenSSL's long name of the signature algorithm, e.g. "ecdsa-with-SHA256".
    public var signatureAlgorithmName: String {
        OBJ_nid2ln(X509_get_signature_nid(pointer)).map { String(cString: $0) } ?? "unknown"
    }

    /// Serial number in hex.
    public var serialHex: String {
        guard let serial = X509_get0_serialNumber(pointer), let bn = ASN1_INTEGER_to_BN(serial, nil) else { return "" }
        defer { BN_free(bn) }
        guard let text = BN_bn2hex(bn) else { return "" }
        defer { ats_OPENSSL_free(text) }
        return String(cString: text)
    }

    public var description: String { "<cert s: \(subjectText) i: \(issuerText)>" }
}
