internal import COpenSSL
internal import COpenSSLShims

/// The kind and size of a key, as ATS judges it.
public enum KeyAlgorithm: Sendable, Hashable, CustomStringConvertible {
    /// An RSA key of the given modulus size.
    case rsa(bits: Int)
    /// An elliptic-curve key of the given field size (256 for P-256).
    case ec(bits: Int)
    /// Anything else (Ed25519, DSA, …), with OpenSSL's short name.
    case other(name: String, bits: Int)

    public var bits: Int {
        switch self {
        case .rsa(let bits), .ec(let bits), .other(_, let bits): bits
        }
    }

    /// "RSA 2048", "EC 256".
    public var description: String {
        switch self {
        case .rsa(let bits): "RSA \(bits)"
        case .ec(let bits): "EC \(bits)"
        case .other(let name, let bits): "\(name) \(bits)"
        }
    }

    init(_ key: OpaquePointer) {
        let bits = Int(EVP_PKEY_get_bits(key))
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA, EVP_PKEY_RSA_PSS: self = .rsa(bits: bits)
        case EVP_PKEY_EC: self = .ec(bits: bits)
        case let id:
            let name = OBJ_nid2sn(id).map { String(cString: $0) } ?? "unknown"
            self = .other(name: name, bits: bits)
        }
    }
}

/// Owns one `EVP_PKEY`. Immutable after creation, so safe to share across threads (OpenSSL 3
/// allows concurrent read-only use of a key); `deinit` frees it.
public final class PrivateKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// What kind of key to generate.
    public enum Kind: Sendable, Hashable {
        /// ECDSA on NIST P-256 (prime256v1).
        case p256
        /// RSA with the given modulus size.
        case rsa(bits: Int)
    }

    /// Generates a fresh key.
    public static func generate(_ kind: Kind) throws -> PrivateKey {
        let id: Int32
        switch kind {
        case .p256: id = EVP_PKEY_EC
        case .rsa: id = EVP_PKEY_RSA
        }
        guard let context = EVP_PKEY_CTX_new_id(id, nil) else { throw OpenSSLError("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(context) }
        try check(EVP_PKEY_keygen_init(context), "EVP_PKEY_keygen_init")
        switch kind {
        case .p256:
            try check(EVP_PKEY_CTX_set_ec_paramgen_curve_nid(context, NID_X9_62_prime256v1), "set curve")
        case .rsa(let bits):
            try check(EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(bits)), "set RSA bits")
        }
        var key: OpaquePointer?
        try check(EVP_PKEY_keygen(context, &key), "EVP_PKEY_keygen")
        guard let key else { throw OpenSSLError("EVP_PKEY_keygen") }
        return PrivateKey(taking: key)
    }

    /// Parses a PEM private key (PKCS#8, traditional RSA or EC).
    public convenience init(pem: [UInt8]) throws {
        let key = try withReadBIO(pem) { bio in PEM_read_bio_PrivateKey(bio, nil, nil, nil) }
        guard let key else { throw OpenSSLError("parse private key PEM") }
        self.init(taking: key)
    }

    /// PKCS#8 PEM text of the key (unencrypted).
    public func pemBytes() throws -> [UInt8] {
        try withMemoryBIO { bio in
            try check(PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil), "write private key PEM")
        }
    }

    /// Key type and size.
    public var algorithm: KeyAlgorithm { KeyAlgorithm(pointer) }
}
