import ATSPolicy
internal import COpenSSL
internal import COpenSSLShims
import Foundation

/// Everything that varies between the certificates this module mints: the proxy's CA, its
/// leaves, and the deliberately broken certificates the tests mint for fixture servers.
public struct CertificateSpec: Sendable {
    /// Subject CN; nil for none. Names longer than 64 characters do not fit a CN (RFC 5280 upper
    /// bound) and are left out by the leaf minter.
    public var commonName: String?
    /// Subject O.
    public var organization: String?
    /// DNS names for the subjectAltName extension.
    public var dnsNames: [String] = []
    /// IP addresses (text) for the subjectAltName extension.
    public var ipAddresses: [String] = []
    /// basicConstraints CA:TRUE (critical) instead of CA:FALSE.
    public var isCA = false
    /// keyUsage bits in OpenSSL's spelling (critical); empty for no extension.
    public var keyUsage: [String] = ["digitalSignature"]
    /// extendedKeyUsage purposes in OpenSSL's spelling; nil for no extension.
    public var extendedKeyUsage: [String]? = ["serverAuth"]
    public var notBefore: Date
    public var notAfter: Date
    /// Hash of the issuer's signature.
    public var signatureHash: SignatureHash = .sha256
    /// Add subjectKeyIdentifier and authorityKeyIdentifier.
    public var keyIdentifiers = true

    public init(notBefore: Date, notAfter: Date) {
        self.notBefore = notBefore
        self.notAfter = notAfter
    }
}

/// Builds and signs X.509 certificates with OpenSSL. Stateless; safe from any thread.
public enum CertificateMinter {
    /// Mints a certificate for `subjectKey`, signed by `issuerKey` and named after `issuer` (nil:
    /// self-signed, `issuerKey` must then be `subjectKey`).
    public static func mint(
        _ spec: CertificateSpec, subjectKey: PrivateKey, issuer: Certificate?, issuerKey: PrivateKey
    ) throws -> Certificate {
        guard let x509 = X509_new() else { throw OpenSSLError("X509_new") }
        let certificate = Certificate(taking: x509)
        try check(X509_set_version(x509, Int(X509_VERSION_3)), "X509_set_version")
        try setRandomSerial(x509)
        // ASN1_TIME_set takes an absolute time; X509_time_adj_ex with a nil base would add it to now.
        guard ASN1_TIME_set(X509_getm_notBefore(x509), time_t(spec.notBefore.timeIntervalSince1970)) != nil,
            ASN1_TIME_set(X509_getm_notAfter(x509), time_t(spec.notAfter.timeIntervalSince1970)) != nil
        else { throw OpenSSLError("set validity") }

        guard let name = X509_NAME_new() else { throw OpenSSLError("X509_NAME_new") }
        defer { X509_NAME_free(name) }
        if let organization = spec.organization { try addEntry(name, "O", organization) }
        if let commonName = spec.commonName { try addEntry(name, "CN", commonName) }
        try check(X509_set_subject_name(x509, name), "X509_set_subject_name")
        try check(X509_set_issuer_name(x509, issuer.map { X509_get_subject_name($0.pointer) } ?? name), "set issuer")
        try check(X509_set_pubkey(x509, subjectKey.pointer), "X509_set_pubkey")

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.pointer ?? x509, x509, nil, nil, 0)
        try addExtension(x509, &context, NID_basic_constraints, spec.isCA ? "critical,CA:TRUE" : "critical,CA:FALSE")
        if !spec.keyUsage.isEmpty {
            try addExtension(x509, &context, NID_key_usage, "critical," + spec.keyUsage.joined(separator: ","))
        }
        if let purposes = spec.extendedKeyUsage, !purposes.isEmpty {
            try addExtension(x509, &context, NID_ext_key_usage, purposes.joined(separator: ","))
        }
        let altNames = spec.dnsNames.map { "DNS:\($0)" } + spec.ipAddresses.map { "IP:\($0)" }
        if !altNames.isEmpty { try addExtension(x509, &context, NID_subject_alt_name, altNames.joined(separator: ",")) }
        if spec.keyIdentifiers {
            try addExtension(x509, &context, NID_subject_key_identifier, "hash")
            if issuer != nil { try addExtension(x509, &context, NID_authority_key_identifier, "keyid:always") }
        }
        try sign(certificate, with: issuerKey, hash: spec.signatureHash)
        return certificate
    }

    /// (Re-)signs `certificate` with `key`; used after adding extensions to a minted certificate.
    static func sign(_ certificate: Certificate, with key: PrivateKey, hash: SignatureHash) throws {
        guard X509_sign(certificate.pointer, key.pointer, digest(hash)) > 0 else { throw OpenSSLError("X509_sign") }
    }

    static func digest(_ hash: SignatureHash) -> OpaquePointer? {
        switch hash {
        case .md5: EVP_md5()
        case .sha1: EVP_sha1()
        case .sha224: EVP_sha224()
        case .sha256: EVP_sha256()
        case .sha384: EVP_sha384()
        case .sha512: EVP_sha512()
        }
    }

    private static func setRandomSerial(_ x509: OpaquePointer) throws {
        var bytes = [UInt8](repeating: 0, count: 16)
        try check(RAND_bytes(&bytes, 16), "RAND_bytes")
        bytes[0] &= 0x7f
        if bytes[0] == 0 { bytes[0] = 0x01 }
        guard let bn = BN_bin2bn(bytes, 16, nil) else { throw OpenSSLError("BN_bin2bn") }
        defer { BN_free(bn) }
        guard let serial = BN_to_ASN1_INTEGER(bn, nil) else { throw OpenSSLError("BN_to_ASN1_INTEGER") }
        defer { ASN1_INTEGER_free(serial) }
        try check(X509_set_serialNumber(x509, serial), "X509_set_serialNumber")
    }

    private static func addEntry(_ name: OpaquePointer, _ field: String, _ value: String) throws {
        let bytes = Array(value.utf8)
        try check(
            X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0),
            "add subject \(field)")
    }

    private static func addExtension(
        _ x509: OpaquePointer, _ context: inout X509V3_CTX, _ nid: Int32, _ value: String
    ) throws {
        guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
            throw OpenSSLError("build extension \(String(cString: OBJ_nid2sn(nid))) = \(value)")
        }
        defer { X509_EXTENSION_free(ext) }
        try check(X509_add_ext(x509, ext, -1), "X509_add_ext")
    }
}
