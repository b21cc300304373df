import Foundation

/// The macOS keychain, through `security`: trusts the proxy CA as a root for the user (`add-trusted-cert`
/// in the login keychain; macOS asks for the user's password to change trust settings, in a dialog or on
/// the terminal, which stays connected) and removes it.
public struct MacKeychain: Sendable {
    let security: ExternalTool
    /// The keychain file the certificate goes into.
    public let keychainPath: String

    /// The login keychain of `HOME` unless another keychain file is given.
    public init(
        keychainPath: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        security = ExternalTool("security", environment: environment)
        let home = environment["HOME"] ?? NSHomeDirectory()
        self.keychainPath = keychainPath ?? "\(home)/Library/Keychains/login.keychain-db"
    }

    /// Adds the certificate and marks it trusted as a root; returns the lines to print.
    public func trust(_ certificatePath: String) throws -> [String] {
        try security.check(
            ["add-trusted-cert", "-r", "trustRoot", "-k", keychainPath, certificatePath], interactive: true)
        return ["keychain \(keychainPath): the proxy CA is now a trusted root for this user"]
    }

    /// Removes the trust setting and the certificate (by its SHA-256 fingerprint, hex without colons).
    public func untrust(_ certificatePath: String, sha256Hex: String) throws -> [String] {
        try security.check(["remove-trusted-cert", certificatePath], interactive: true)
        try security.check(["delete-certificate", "-Z", sha256Hex, keychainPath])
        return ["keychain \(keychainPath): the proxy CA is no longer trusted and was removed"]
    }
}
